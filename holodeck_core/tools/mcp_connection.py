"""One live session with an MCP server through the official ``mcp`` SDK client.

The SDK's transports are anyio context managers that must be entered and left by the same
task. A suite opens its tools in one task and may close them in another (a ``finally`` after
Ctrl-C, a Dagster step's cleanup), so a background task owns the contexts: :meth:`start`
hands back the session once the handshake and the tool list are done, :meth:`stop` lets the
owner leave the contexts (the SDK closes a stdio server's stdin, waits, then kills its process
group, but only if the server did not exit: a clean exit leaves the server's own children
running, so :meth:`stop` ends what is left of the group). ``ClientSession`` matches responses
to requests by id, so concurrent ``call_tool`` calls from many cases share it safely.

A stdio server's stderr goes to a pipe read by a thread, never to the console; its last lines
(redacted) explain a server that fails to start."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import ClientSession, StdioServerParameters
from mcp import types as mcp_types
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from holodeck_core.defaults import MAX_SCHEMA_DEPTH, MAX_SERVER_TOOLS, MAX_TOOL_PAGES
from holodeck_core.models.bounded_json import depth
from holodeck_core.models.tools import TransportType
from holodeck_core.redaction import redact_text
from holodeck_core.tools.mcp_config import ServerParams

STDERR_TAIL_BYTES = 2000
STDERR_KEEP_BYTES = 64 * 1024
"""What is kept of a server's stderr: whole lines, redacted before the tail is cut."""
STOP_TIMEOUT = 10.0
"""Seconds :meth:`Connection.stop` waits for the SDK's shutdown (stdin close, 2 s grace,
SIGTERM, SIGKILL of the process group) before it cancels the owner task."""
GROUP_GRACE = 2.0
"""Seconds the children a stdio server left behind get between SIGTERM and SIGKILL."""


@dataclass(frozen=True)
class Connected:
    session: ClientSession
    server: mcp_types.Implementation
    tools: list[mcp_types.Tool]


class StderrTail:
    """A pipe for a server's stderr, drained by a daemon thread that keeps the last bytes."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.file = os.fdopen(write_fd, "w")
        self._tail = bytearray()
        self._thread = threading.Thread(
            target=self._drain, args=(read_fd,), name="mcp-stderr", daemon=True
        )
        self._thread.start()

    def _drain(self, fd: int) -> None:
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(4096):
                self._tail += chunk
                if len(self._tail) > STDERR_KEEP_BYTES:  # from a line's start: no half secret
                    del self._tail[: len(self._tail) - STDERR_KEEP_BYTES]
                    del self._tail[: self._tail.find(b"\n") + 1]

    def close(self) -> None:
        """Close our end; the thread ends once the server's copies are closed too."""
        self.file.close()

    def text(self, secrets: frozenset[str]) -> str:
        """The redacted tail, after waiting briefly for the server's last writes: redacted
        whole lines first, then cut to its last lines within :data:`STDERR_TAIL_BYTES`."""
        self.close()
        self._thread.join(timeout=1.0)
        text = redact_text(bytes(self._tail).decode("utf-8", "replace").strip(), secrets)
        if len(text) > STDERR_TAIL_BYTES:
            text = text[-STDERR_TAIL_BYTES:]
            text = text[text.find("\n") + 1 :]
        return text


class Connection:
    """One session with one server; not restartable (make a new one)."""

    def __init__(self, params: ServerParams) -> None:
        self.params = params
        self.stderr = StderrTail() if params.transport is TransportType.STDIO else None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._group: int | None = None
        """A stdio server's process group (its pid: the SDK starts it in a session of its
        own), which its children share."""
        self.ended = asyncio.Event()
        """Set once the session is over (stopped, or the transport died): a call still in
        flight then has no answer coming."""

    async def start(self) -> Connected:
        """Connect, handshake and list the tools within ``params.connect_timeout``."""
        ready: asyncio.Future[Connected] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._own(ready), name="mcp-connection")
        try:
            return await ready
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        self._stop.set()
        self.ended.set()
        task, self._task = self._task, None
        if task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(task), STOP_TIMEOUT)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        if self._group is not None:
            await end_group(self._group)
        if self.stderr is not None:
            self.stderr.close()

    async def _own(self, ready: asyncio.Future[Connected]) -> None:
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(stack))
                if self.stderr is not None:
                    self._group = child_writing_to(self.stderr.file)
                session = await stack.enter_async_context(
                    ClientSession(read, write, message_handler=self._unreadable(ready))
                )
                with anyio.fail_after(self.params.connect_timeout):
                    init = await session.initialize()
                    tools = await _list_tools(session)
                ready.set_result(Connected(session, init.serverInfo, tools))
                await self._stop.wait()
        except BaseException as exc:  # the owner must report, never leak, its failure
            if not ready.done():
                ready.set_exception(leaf(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.ended.set()

    def _unreadable(self, ready: asyncio.Future[Connected]) -> Any:
        """The session's handler of incoming messages, which sees the ones the SDK could not
        parse. A stray line is only logged; a message nested too deep for the parser was an
        answer (a tool list with a 120-level schema) that is lost: the session is over, so the
        start fails now and calls in flight crash, none waits for its timeout."""

        async def handle(message: Any) -> None:
            if isinstance(message, Exception) and "recursion limit exceeded" in str(message):
                if not ready.done():
                    ready.set_exception(
                        ServerLimitError(
                            "the server sent a message nested too deeply to read (a tool "
                            f"schema deeper than {MAX_SCHEMA_DEPTH} levels?)"
                        )
                    )
                self.ended.set()

        return handle

    def _transport(self, stack: AsyncExitStack) -> contextlib.AbstractAsyncContextManager[Any]:
        p = self.params
        if p.transport is TransportType.STDIO:
            assert p.command is not None and self.stderr is not None
            server = StdioServerParameters(
                command=p.command, args=list(p.args), env=p.env, cwd=p.cwd, encoding=p.encoding
            )
            return stdio_client(server, errlog=self.stderr.file)
        assert p.url is not None
        if p.transport is TransportType.HTTP:
            return _streamable_http(stack, p, self.ended.set)
        if p.transport is TransportType.SSE:
            return sse_client(
                p.url,
                headers=p.headers or None,
                timeout=p.connect_timeout,
                sse_read_timeout=p.sse_read_timeout,
                httpx_client_factory=watched_client(self.ended.set),
            )
        from mcp.client.websocket import websocket_client

        with warnings.catch_warnings():  # deprecated by the SDK (not in the MCP spec), still served
            warnings.simplefilter("ignore", DeprecationWarning)
            return websocket_client(p.url)


def child_writing_to(pipe: Any) -> int | None:
    """The pid of this process's child whose stderr is ``pipe`` (what Linux's /proc shows;
    elsewhere nothing is found and the SDK's own shutdown is all there is)."""
    ours = os.fstat(pipe.fileno())
    proc = Path("/proc")
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            theirs = (entry / "fd" / "2").stat()
            same = (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)
            if parent == os.getpid() and same:
                return int(entry.name)
    return None


async def end_group(group: int, grace: float = GROUP_GRACE) -> None:
    """SIGTERM to every process left in ``group``, SIGKILL to those still there after
    ``grace`` seconds; nothing if the group is empty."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGTERM)
        with anyio.move_on_after(grace):
            while True:
                os.killpg(group, 0)  # ProcessLookupError once the group is gone
                await asyncio.sleep(0.05)
        os.killpg(group, signal.SIGKILL)


@asynccontextmanager
async def _streamable_http(
    stack: AsyncExitStack, p: ServerParams, lost: Callable[[], None]
) -> AsyncIterator[tuple[Any, Any]]:
    timeout = httpx.Timeout(p.connect_timeout, read=p.sse_read_timeout)
    client = await stack.enter_async_context(watched_client(lost)(p.headers or None, timeout))
    assert p.url is not None
    async with streamable_http_client(
        p.url, http_client=client, terminate_on_close=p.terminate_on_close
    ) as (read, write, _session_id):
        yield read, write


LOST = (httpx.NetworkError, httpx.RemoteProtocolError)
"""What a server that died (or a connection cut under it) does to a request or a response
being read: refused, reset, closed mid-body (never a timeout, which is the caller's to judge)."""


def watched_client(lost: Callable[[], None]) -> Callable[..., httpx.AsyncClient]:
    """A factory of the MCP SDK's HTTP client (``create_mcp_http_client``'s settings) whose
    requests and response bodies call ``lost`` when the connection breaks. The SDK drops such a
    response of a streamable HTTP server (a POST's SSE stream cut mid-call) and its call waits
    for its timeout; :meth:`Connection.ended` makes it a crash at once, as a stdio server's
    death is."""

    def make(
        headers: dict[str, str] | None = None,
        timeout: httpx.Timeout | None = None,
        auth: httpx.Auth | None = None,
    ) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            headers=headers,
            timeout=timeout
            or httpx.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
            auth=auth,
            transport=_WatchedTransport(httpx.AsyncHTTPTransport(), lost),
        )

    return make


class _WatchedTransport(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport, lost: Callable[[], None]) -> None:
        self._inner = inner
        self._lost = lost

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except LOST:
            self._lost()
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _WatchedStream(response.stream, self._lost)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _WatchedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, lost: Callable[[], None]) -> None:
        self._inner = inner
        self._lost = lost

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except LOST:
            self._lost()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


class ServerLimitError(Exception):
    """A server's tool list past our bounds (docs/agent-yaml.md): it cannot start, exit 3."""


async def _list_tools(session: ClientSession) -> list[mcp_types.Tool]:
    """Every page of the tool list, within :data:`MAX_TOOL_PAGES` pages, and
    :data:`MAX_SERVER_TOOLS` tools whose schemas nest at most :data:`MAX_SCHEMA_DEPTH`."""
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await session.list_tools(params=mcp_types.PaginatedRequestParams(cursor=cursor))
        tools.extend(page.tools)
        if len(tools) > MAX_SERVER_TOOLS:
            raise ServerLimitError(f"the server lists more than {MAX_SERVER_TOOLS:,} tools")
        cursor = page.nextCursor
        if not cursor:
            break
    else:
        raise ServerLimitError(
            f"its tool list did not end within {MAX_TOOL_PAGES} pages (every page had a nextCursor)"
        )
    for tool in tools:
        if depth(tool.inputSchema, MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
            raise ServerLimitError(
                f"tool {tool.name[:100]!r}: its input schema nests deeper than "
                f"{MAX_SCHEMA_DEPTH} levels"
            )
    return tools


def leaf(exc: BaseException) -> BaseException:
    """The first real error inside the exception groups anyio wraps around task failures."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
