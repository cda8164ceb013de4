"""An MCP server (the SDK's low-level ``Server`` over stdio) whose tool list is hostile:
``python tests/mcp_hostile_server.py MODE`` with MODE ``cursor`` (every page has a
``nextCursor``), ``many`` (60,000 tools in pages of 5,000), ``deep`` (a tool whose input
schema nests 120 levels), ``deep60`` (60 levels: 120 of JSON) or ``fine`` (one ordinary tool)."""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

MODE = sys.argv[1]


def nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


def tool(name: str, schema: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(
        name=name, description=name, inputSchema=schema or {"type": "object", "properties": {}}
    )


server: Server[Any] = Server("hostile")


@server.list_tools()
async def list_tools(request: types.ListToolsRequest) -> types.ListToolsResult:
    cursor = int(request.params.cursor or 0) if request.params else 0
    if MODE == "cursor":
        return types.ListToolsResult(tools=[tool(f"t{cursor}")], nextCursor=str(cursor + 1))
    if MODE == "many":
        page = [tool(f"t{cursor * 5000 + i}") for i in range(5000)]
        return types.ListToolsResult(
            tools=page, nextCursor=str(cursor + 1) if cursor < 11 else None
        )
    if MODE == "deep":  # too deep for the SDK's parser
        return types.ListToolsResult(tools=[tool("deep", nested(120))])
    if MODE == "deep60":  # readable, past our bound
        return types.ListToolsResult(tools=[tool("deep", nested(60))])
    return types.ListToolsResult(tools=[tool("fine")])


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
