"""A scripted agent served over HTTP on 127.0.0.1 for the target tests, speaking the three
protocols a target reads: a plain JSON API (``POST /chat``), OpenAI's chat completions
(``POST /v1/chat/completions``, stateless: the history comes in ``messages``) and HoloDeck
0.7.1's REST serve (``POST /agent/<name>/chat``, the server assigns session ids).

The agent: ``weather in X`` calls ``get_weather(city=X)`` and says it is sunny in X; ``my
name is N`` remembers N for the session; ``what is my name`` recalls it. Markers in a
message inject faults for that message: ``[429x2]`` (the first two calls answer 429 with a
short Retry-After), ``[drop]`` (the first call's connection is dropped), ``[500]``, ``[400]``
(always), ``[garble]`` (200 with a body that is not JSON), ``[polite-error]`` (200 with the
agent's own error object)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

HOST = "127.0.0.1"


@dataclass
class AgentState:
    calls: Counter[str] = field(default_factory=Counter)
    """Calls per message (every attempt, retries included)."""
    memory: dict[str, dict[str, str]] = field(default_factory=dict)
    headers: list[dict[str, str]] = field(default_factory=list)
    bodies: list[Any] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0
    latency: float = 0.0


def answer(message: str, memory: dict[str, str]) -> tuple[str, list[dict[str, Any]]]:
    if weather := re.search(r"weather in (\w+)", message):
        city = weather.group(1)
        return f"It is sunny in {city}.", [{"name": "get_weather", "arguments": {"city": city}}]
    if name := re.search(r"my name is (\w+)", message):
        memory["name"] = name.group(1)
        return f"Nice to meet you, {name.group(1)}.", []
    if "what is my name" in message:
        return f"Your name is {memory.get('name', 'unknown')}.", []
    return "I don't know.", []


async def _fault(request: web.Request, state: AgentState, message: str) -> web.Response | None:
    state.calls[message] += 1
    nth = state.calls[message]
    if "[429x2]" in message and nth <= 2:
        return web.json_response(
            {"error": "slow down"}, status=429, headers={"retry-after-ms": "20"}
        )
    if "[drop]" in message and nth == 1:
        assert request.transport is not None
        request.transport.close()
        return web.Response()
    if "[500]" in message:
        return web.json_response({"error": "boom"}, status=500)
    if "[400]" in message:
        return web.json_response({"error": "bad input"}, status=400)
    if "[garble]" in message:
        return web.Response(text="<html>oops</html>", content_type="text/html")
    if "[polite-error]" in message:
        return web.json_response({"error": {"message": "I cannot help with that."}})
    return None


def create_app(state: AgentState, agent_name: str = "served") -> web.Application:
    async def track(request: web.Request) -> Any:
        state.headers.append(dict(request.headers))
        body = await request.json()
        state.bodies.append(body)
        state.in_flight += 1
        state.peak = max(state.peak, state.in_flight)
        try:
            await asyncio.sleep(state.latency)
        finally:
            state.in_flight -= 1
        return body

    async def chat(request: web.Request) -> web.Response:
        body = await track(request)
        message = body["input"]
        fault = await _fault(request, state, message)
        if fault is not None:
            return fault
        session = body.get("session") or "none"
        text, calls = answer(message, state.memory.setdefault(session, {}))
        return web.json_response(
            {
                "output": {"text": text},
                "calls": calls,
                "usage": {"input_tokens": 10, "output_tokens": 5},
                "turn": body.get("turn"),
            }
        )

    async def completions(request: web.Request) -> web.Response:
        body = await track(request)
        messages = [m["content"] for m in body["messages"] if m["role"] == "user"]
        fault = await _fault(request, state, messages[-1])
        if fault is not None:
            return fault
        memory: dict[str, str] = {}
        for message in messages:
            text, calls = answer(message, memory)
        tool_calls = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
            }
            for i, c in enumerate(calls)
        ]
        return web.json_response(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text, "tool_calls": tool_calls},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18},
            }
        )

    async def serve(request: web.Request) -> web.Response:
        body = await track(request)
        message = body["message"]
        fault = await _fault(request, state, message)
        if fault is not None:
            return fault
        session = body.get("session_id") or uuid.uuid4().hex.upper()[:26]
        files = body.get("files") or []
        text, calls = answer(message, state.memory.setdefault(session, {}))
        if files:
            text += f" I read {len(files)} file(s): {', '.join(f['filename'] for f in files)}."
        return web.json_response(
            {
                "message_id": uuid.uuid4().hex.upper()[:26],
                "content": text,
                "session_id": session,
                "tool_calls": [{**c, "status": "success"} for c in calls],
                "tokens_used": {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27},
                "execution_time_ms": 3,
            }
        )

    app = web.Application()
    app.router.add_post("/chat", chat)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_post(f"/agent/{agent_name}/chat", serve)
    return app


@contextmanager
def agent_server(state: AgentState, agent_name: str = "served") -> Iterator[str]:
    """The scripted agent on a free 127.0.0.1 port, in a thread; yields its base URL."""
    with serve_app(create_app(state, agent_name)) as base:
        yield base


@contextmanager
def serve_app(app: web.Application) -> Iterator[str]:
    """``app`` on a free 127.0.0.1 port, in a thread; yields its base URL."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        runner = web.AppRunner(app, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, HOST, 0)
        await site.start()
        holder["runner"] = runner
        holder["port"] = runner.addresses[0][1]

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, name="target-agent", daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield f"http://{HOST}:{holder['port']}"
    finally:
        asyncio.run_coroutine_threadsafe(holder["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
