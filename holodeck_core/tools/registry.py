"""Which runtime serves which tool type. Implementations are imported only when an agent uses
them, so the CLI starts fast and an agent without MCP tools never imports the ``mcp`` SDK."""

from __future__ import annotations

from holodeck_core.models import (
    HierarchicalDocumentTool,
    MCPTool,
    PromptTool,
    Tool,
    VectorstoreTool,
)
from holodeck_core.tools.runtime import ToolContext, ToolRuntime


def runtime_for(tool: Tool, context: ToolContext, *, where: str) -> ToolRuntime | None:
    """The runtime for ``tool``, or None when this engine cannot run its type (then the tool
    needs a ``mock:``). ``where`` (``tools[2] (name)``) prefixes every config error."""
    if isinstance(tool, MCPTool):
        from holodeck_core.tools.mcp_runtime import MCPRuntime

        return MCPRuntime(tool, context, where=where)
    if isinstance(tool, PromptTool):
        from holodeck_core.tools.prompt import PromptRuntime

        return PromptRuntime(tool, context, where=where)
    if isinstance(tool, VectorstoreTool):
        from holodeck_core.tools.retrieval.vectorstore import VectorstoreRuntime

        return VectorstoreRuntime(tool, context, where=where)
    if isinstance(tool, HierarchicalDocumentTool):
        from holodeck_core.tools.retrieval.hierarchical import HierarchicalRuntime

        return HierarchicalRuntime(tool, context, where=where)
    return None
