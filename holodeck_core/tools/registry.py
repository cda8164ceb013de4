"""Which runtime serves which tool type. Implementations are imported only when an agent uses
them, so the CLI starts fast and an agent without MCP tools never imports the ``mcp`` SDK."""

from __future__ import annotations

from holodeck_core.models import Tool
from holodeck_core.tools.runtime import ToolContext, ToolRuntime


def runtime_for(tool: Tool, context: ToolContext, *, where: str) -> ToolRuntime | None:
    """The runtime for ``tool``, or None when this engine cannot run its type (then the tool
    needs a ``mock:``). ``where`` (``tools[2] (name)``) prefixes every config error."""
    del tool, context, where
    return None
