"""``type: mcp`` tools: the :class:`~holodeck_core.tools.runtime.ToolRuntime` of one MCP server.

Tools are offered to the model under the names the server lists (as HoloDeck 0.7.1's OpenAI
Agents backend offers them), with their input schemas, limited to ``config.allowed_tools``
when given; ``load_tools: false`` offers none. A result's text blocks are joined by newlines
(other blocks as their JSON); ``isError`` results go back to the model as tool errors. A
server that dies mid-run is restarted once; the calls that failed make their cases ERROR,
transient (docs/agent-yaml.md)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx
from mcp import McpError
from mcp import types as mcp_types

from holodeck_core.models import MCPTool
from holodeck_core.models.base import digest
from holodeck_core.models.outside import valid_value
from holodeck_core.providers.messages import ToolSpec
from holodeck_core.redaction import redact_text
from holodeck_core.tools.mcp_config import ServerParams, server_params
from holodeck_core.tools.mcp_connection import Connected, Connection
from holodeck_core.tools.runtime import ToolContext, ToolCrashedError, ToolOutput, ToolStartError

T = TypeVar("T")
_DISCONNECTED = (anyio.ClosedResourceError, anyio.BrokenResourceError, httpx.TransportError)


class MCPRuntime:
    def __init__(self, tool: MCPTool, context: ToolContext, *, where: str) -> None:
        self.config_name = tool.name
        self.specs: list[ToolSpec] = []
        self._tool = tool
        self._where = where
        self._secrets = context.secrets
        self.params: ServerParams = server_params(tool, context, where=where)
        self._connection: Connection | None = None
        self._connected: Connected | None = None
        self._generation = 0
        self._restarts_left = 1
        self._lock = asyncio.Lock()
        self._identity: dict[str, Any] = {}

    async def open(self) -> None:
        connected = await self._connect()
        allowed = self.params.allowed_tools
        offered = [
            t
            for t in connected.tools
            if self._tool.load_tools and (allowed is None or t.name in allowed)
        ]
        self.specs = [
            ToolSpec(t.name, t.description or "", t.inputSchema, from_server=True) for t in offered
        ]
        self._identity = {
            "type": "mcp",
            "name": self.config_name,
            **self.params.identity(),
            "server": {"name": connected.server.name, "version": connected.server.version},
            "tools": digest([t.model_dump(mode="json", exclude_none=True) for t in offered]),
        }

    def identity(self) -> dict[str, Any]:
        return self._identity

    async def call(self, function: str, arguments: dict[str, Any]) -> ToolOutput:
        connected, connection, generation = self._connected, self._connection, self._generation
        if connected is None or connection is None:
            raise ToolCrashedError(
                f"{self._where}: the MCP server is down (it died and was restarted once already)"
            )
        timeout = self.params.request_timeout
        try:
            result = await _unless_ended(
                connected.session.call_tool(
                    function, arguments, read_timeout_seconds=timedelta(seconds=timeout)
                ),
                connection.ended,
            )
        except _Ended:
            await self._restart(generation)
            raise ToolCrashedError(
                f"{self._where}: the connection to the MCP server ended with the call in flight"
            ) from None
        except McpError as exc:
            if exc.error.code == mcp_types.CONNECTION_CLOSED:
                await self._restart(generation)
                raise ToolCrashedError(f"{self._where}: the MCP server died mid-call") from None
            if exc.error.code == httpx.codes.REQUEST_TIMEOUT:
                return ToolOutput(error=f"MCP tool {function} timed out after {timeout:g} s")
            return ToolOutput(error=redact_text(exc.error.message, self._secrets))
        except _DISCONNECTED as exc:
            await self._restart(generation)
            raise ToolCrashedError(
                f"{self._where}: lost the MCP server ({type(exc).__name__})"
            ) from None
        except Exception as exc:  # e.g. structured content that breaks the tool's schema
            return ToolOutput(error=redact_text(f"{type(exc).__name__}: {exc}", self._secrets))
        return tool_output(result, retrieval=self._tool.is_retrieval)

    async def aclose(self) -> None:
        connection, self._connection, self._connected = self._connection, None, None
        if connection is not None:
            await connection.stop()

    async def _connect(self) -> Connected:
        connection = Connection(self.params)
        try:
            connected = await connection.start()
        except Exception as exc:
            raise ToolStartError(self._start_failure(connection, exc)) from None
        self._connection, self._connected = connection, connected
        return connected

    async def _restart(self, generation: int) -> None:
        """After a call found the server gone: start it again, once per run. Calls that
        failed on the same dead server find the restart done (or used up) and just fail."""
        async with self._lock:
            if generation != self._generation:
                return
            self._generation += 1
            await self.aclose()
            if self._restarts_left == 0:
                return
            self._restarts_left -= 1
            try:
                await self._connect()
            except ToolStartError:
                self._connected = None

    def _start_failure(self, connection: Connection, exc: BaseException) -> str:
        p = self.params
        server = f"{Path(p.command).name} {' '.join(p.args)}".strip() if p.command else str(p.url)
        if isinstance(exc, TimeoutError):
            reason = f"no answer to the MCP handshake within {p.connect_timeout:g} s (timeout)"
        elif isinstance(exc, McpError) and exc.error.code == mcp_types.CONNECTION_CLOSED:
            reason = "the server exited during the MCP handshake"
        else:
            reason = f"{type(exc).__name__}: {exc}"
        message = f"{self._where}: MCP server `{server}` did not start: {reason}"
        tail = connection.stderr.text(self._secrets) if connection.stderr else ""
        if tail:
            message += "\n  its stderr ended with:\n    " + "\n    ".join(tail.splitlines()[-15:])
        return redact_text(message, self._secrets)


class _Ended(Exception):
    """The session ended before the call's answer came."""


async def _unless_ended(call: Coroutine[Any, Any, T], ended: asyncio.Event) -> T:
    """``call``'s result, or :class:`_Ended` as soon as ``ended`` is set: when a server dies
    with calls in flight, each of them is a crash (transient), none waits for its timeout."""
    task = asyncio.ensure_future(call)
    watcher = asyncio.ensure_future(ended.wait())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
    if task.cancelled():
        raise _Ended
    return task.result()


def tool_output(result: mcp_types.CallToolResult, *, retrieval: bool) -> ToolOutput:
    """What the model reads: the text blocks joined by newlines; other blocks as JSON; the
    structured content when there is no block at all. The result's text is made valid (and
    noted) with every tool result's; the retrieval texts here."""
    texts = [
        block.text
        if isinstance(block, mcp_types.TextContent)
        else json.dumps(block.model_dump(mode="json", exclude_none=True), ensure_ascii=False)
        for block in result.content
    ]
    text = "\n".join(texts)
    if result.isError:
        return ToolOutput(error=text or "the MCP tool reported an error")
    if not texts and result.structuredContent is not None:
        return ToolOutput(result=result.structuredContent)
    context = valid_value(texts)[0] if retrieval else None
    return ToolOutput(result=text, retrieval_context=context)
