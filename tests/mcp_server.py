"""A real MCP server for the tests, written with the SDK's FastMCP.

``python tests/mcp_server.py [--transport stdio|streamable-http|sse|websocket] [--port P]
[--hang] [--exit-at-start]``. Environment (files are paths):

- ``MCP_TEST_STATE``: a file counting calls across restarts; ``MCP_TEST_CRASH_ON``: the
  process exits on these call numbers (comma-separated);
- ``MCP_TEST_UPGRADED``: while this file exists the server offers one more tool (an upgrade);
- ``MCP_TEST_STDERR``: written to stderr at start; ``MCP_TEST_STARTS``: a line per start;
- ``MCP_TEST_CRASH_FLAG``: ``add`` with ``a == 13`` removes this file and kills the server
  (a one-off outage); ``MCP_TEST_CHILD``: the server starts a child that sleeps (a helper
  process, as ``npx`` starts ``node``) and writes its pid to this file."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP


def _count_call() -> None:
    state = os.environ.get("MCP_TEST_STATE")
    if not state:
        return
    path = Path(state)
    calls = int(path.read_text() or 0) + 1 if path.exists() else 1
    path.write_text(str(calls))
    if str(calls) in os.environ.get("MCP_TEST_CRASH_ON", "").split(","):
        os._exit(3)


def build(port: int) -> FastMCP:
    from mcp.server.fastmcp import FastMCP  # here: --exit-at-start and --hang act at once

    server = FastMCP("holodeck-test-server", host="127.0.0.1", port=port, log_level="WARNING")

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        _count_call()
        flag = Path(os.environ.get("MCP_TEST_CRASH_FLAG", "/nonexistent"))
        if a == 13 and flag.exists():
            flag.unlink()
            os._exit(3)
        return str(a + b)

    @server.tool()
    def read_env(name: str) -> str:
        """The value of an environment variable of the server process."""
        _count_call()
        return os.environ.get(name, "<unset>")

    @server.tool()
    def where() -> str:
        """The server's working directory."""
        return os.getcwd()

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails with the reason (an isError result)."""
        raise ValueError(f"refused: {reason}")

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleeps, then answers."""
        await asyncio.sleep(seconds)
        return "done"

    @server.tool()
    def die(how: str) -> str:
        """Ends the transport: ``exit``, ``kill`` (SIGKILL), ``garbage`` (invalid UTF-8 on
        stdout, the process stays) or ``close`` (stdout closed, the process stays)."""
        if how == "exit":
            os._exit(3)
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if how == "garbage":
            os.write(1, b"\xff\xfe not json \xc3\x28\n")
        if how == "close":
            os.close(1)
        time.sleep(3600)
        return "unreachable"

    @server.tool()
    def say(name: str) -> str:
        """Writes a line that is not JSON-RPC to stdout: the environment variable ``name``."""
        os.write(1, f"stray line: {os.environ.get(name, '')}\n".encode())
        return "said"

    @server.tool()
    def big(size: int) -> str:
        """``size`` characters."""
        return "b" * size

    if Path(os.environ.get("MCP_TEST_UPGRADED", "/nonexistent")).exists():

        @server.tool()
        def extra() -> str:
            """Only in the upgraded server."""
            return "extra"

    return server


def serve_websocket(server: FastMCP, port: int) -> None:
    """The SDK's (deprecated, still shipped) websocket server transport under uvicorn."""
    import uvicorn
    from mcp.server.websocket import websocket_server
    from starlette.applications import Starlette
    from starlette.routing import WebSocketRoute
    from starlette.types import Receive, Scope, Send

    lowlevel = server._mcp_server

    class Endpoint:
        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            async with websocket_server(scope, receive, send) as (read, write):
                await lowlevel.run(read, write, lowlevel.create_initialization_options())

    app = Starlette(routes=[WebSocketRoute("/ws", Endpoint())])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", default="stdio")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--hang", action="store_true", help="never answer the handshake")
    parser.add_argument("--exit-at-start", action="store_true")
    args = parser.parse_args()
    if os.environ.get("MCP_TEST_STDERR"):
        print(os.environ["MCP_TEST_STDERR"], file=sys.stderr, flush=True)
    if os.environ.get("MCP_TEST_STARTS"):
        with open(os.environ["MCP_TEST_STARTS"], "a") as starts:
            starts.write(f"{os.getpid()}\n")
    if os.environ.get("MCP_TEST_CHILD"):
        child = subprocess.Popen(  # the server's path in its command line: tests find it
            [sys.executable, "-c", "import time; time.sleep(600)", str(Path(__file__).resolve())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        Path(os.environ["MCP_TEST_CHILD"]).write_text(str(child.pid))
    if args.exit_at_start:
        print("fatal: cannot start", file=sys.stderr, flush=True)
        sys.exit(1)
    if args.hang:
        time.sleep(3600)
    server = build(args.port)
    if args.transport == "websocket":
        serve_websocket(server, args.port)
    else:
        server.run(transport=args.transport)


if __name__ == "__main__":
    main()
