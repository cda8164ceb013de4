"""An MCP server over streamable HTTP, written by hand (aiohttp) so it can break a call the
ways a real one dies: ``python tests/mcp_hostile_http.py PORT``. It answers the handshake and
the tool list in JSON; its tools end the call they are in:

- ``reset``: opens the SSE response, then resets the connection (RST);
- ``half``: sends half an SSE event (``data: {"jsonrpc": "2.0", "id": `` and no more), then
  closes the connection mid-body;
- ``hangup``: closes the connection without a response;
- ``exit``: the process exits, the SSE response open;
- ``fine``: answers ``ok``."""

from __future__ import annotations

import os
import socket
import struct
import sys
from typing import Any

from aiohttp import web

TOOLS = ["reset", "half", "hangup", "exit", "fine"]


def result(request_id: Any, value: dict[str, Any]) -> web.Response:
    return web.json_response({"jsonrpc": "2.0", "id": request_id, "result": value})


async def open_sse(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(b": the call is running\n\n")
    return response


async def call(request: web.Request, request_id: Any, name: str) -> web.StreamResponse:
    transport = request.transport
    assert transport is not None
    if name == "hangup":
        transport.close()
        return web.Response()
    if name == "fine":
        return result(request_id, {"content": [{"type": "text", "text": "ok"}]})
    response = await open_sse(request)
    if name == "exit":
        os._exit(3)
    if name == "reset":
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    if name == "half":
        await response.write(b'event: message\ndata: {"jsonrpc": "2.0", "id": ')
        transport.close()
    return response


async def mcp(request: web.Request) -> web.StreamResponse:
    if request.method != "POST":
        return web.Response(status=405)
    message = await request.json()
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:  # a notification
        return web.Response(status=202)
    if method == "initialize":
        return result(
            request_id,
            {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile-http", "version": "1"},
            },
        )
    if method == "tools/list":
        tools = [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]
        return result(request_id, {"tools": tools})
    if method == "tools/call":
        return await call(request, request_id, message["params"]["name"])
    return result(request_id, {})


def main() -> None:
    app = web.Application()
    app.router.add_route("*", "/mcp", mcp)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)


if __name__ == "__main__":
    main()
