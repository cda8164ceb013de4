"""A hostile agent served on 127.0.0.1 for the target hardening tests: it speaks the three
protocols of tests/target_servers.py (the path says which: ``…/chat/completions`` OpenAI's,
``/agent/<name>/chat`` HoloDeck's serve, anything else the plain JSON API) and the message
says what it does instead of answering:

- ``redirect STATUS LOCATION``: a redirect (only outside ``/landed``, which answers
  ``landed METHOD: MESSAGE``, so a redirect to it is seen to arrive);
- ``loop``: a 307 back to the same path, for ever;
- ``huge-length``: declares a 1.5 GB Content-Length, then streams it;
- ``endless``: a chunked body that never ends (``endless 500``: under a 500);
- ``over-by-one``: a chunked JSON reply one byte past ``MAX_TARGET_REPLY_BYTES``.

Every request is recorded (method, host, path, headers, body) and every byte of a streamed
body counted, so a test sees what reached which server and how much was sent before the
client hung up."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from holodeck_core.defaults import MAX_TARGET_REPLY_BYTES

CHUNK = b"a" * 65536


@dataclass
class Seen:
    method: str
    host: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class HostileState:
    requests: list[Seen] = field(default_factory=list)
    streamed: int = 0
    """Bytes of streamed bodies written before the client went away."""


def message_of(body: Any) -> str:
    if not isinstance(body, dict):
        return ""
    if isinstance(body.get("messages"), list) and body["messages"]:
        return str(body["messages"][-1].get("content", ""))
    return str(body.get("message") or body.get("input") or "")


def reply(path: str, text: str) -> dict[str, Any]:
    """``text`` as the protocol ``path`` speaks wants it."""
    if path.endswith("/chat/completions"):
        message = {"role": "assistant", "content": text}
        return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    if "/agent/" in path:
        return {"content": text, "session_id": "s1", "tool_calls": []}
    return {"output": {"text": text}}


async def stream(
    request: web.Request, state: HostileState, size: int | None, status: int = 200
) -> web.StreamResponse:
    """``a`` for ever, declaring ``size`` bytes (else chunked), until the client hangs up."""
    response = web.StreamResponse(status=status, headers={"Content-Type": "application/json"})
    if size is not None:
        response.content_length = size
    await response.prepare(request)
    try:
        while True:
            await response.write(CHUNK)
            state.streamed += len(CHUNK)
            await asyncio.sleep(0)
    except (ConnectionError, RuntimeError):  # the client went away
        return response


async def over_by_one(request: web.Request) -> web.StreamResponse:
    """A valid reply of ``MAX_TARGET_REPLY_BYTES + 1`` bytes, chunked."""
    head, tail = (
        part.encode() for part in json.dumps(reply(request.path, "@FILL@")).split("@FILL@")
    )
    filler = MAX_TARGET_REPLY_BYTES + 1 - len(head) - len(tail)
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    await response.write(head)
    for start in range(0, filler, len(CHUNK)):
        await response.write(CHUNK[: min(len(CHUNK), filler - start)])
    await response.write(tail)
    await response.write_eof()
    return response


def create_hostile_app(state: HostileState) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw) if raw else None
        state.requests.append(
            Seen(request.method, request.host, request.path, dict(request.headers), body)
        )
        message = message_of(body)
        if request.path.startswith("/landed"):
            return web.json_response(reply(request.path, f"landed {request.method}: {message}"))
        words = message.split()
        if words[:1] == ["redirect"]:
            return web.Response(status=int(words[1]), headers={"Location": words[2]})
        if message == "loop":
            return web.Response(status=307, headers={"Location": request.path})
        if message == "huge-length":
            return await stream(request, state, 1_500_000_000)
        if message == "endless":
            return await stream(request, state, None)
        if message == "endless 500":
            return await stream(request, state, None, 500)
        if message == "over-by-one":
            return await over_by_one(request)
        return web.json_response(reply(request.path, f"plain: {message}"))

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app
