"""The aiohttp application: routes, the model-call handler and the control endpoints."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from holodeck_core.testing.rules import RouteName
from holodeck_core.testing.rules_loading import RulesInput, coerce_rules
from holodeck_core.testing.server import batch_anthropic, batch_openai
from holodeck_core.testing.server.batches import cancel_tasks
from holodeck_core.testing.server.calls import (
    OLLAMA_EMBED,
    answer_payload,
    fault_error,
    plan_request,
)
from holodeck_core.testing.server.planning import Fault
from holodeck_core.testing.server.requests import BadRequest, read_body
from holodeck_core.testing.server.responses import (
    MODEL_IDS,
    echo_key,
    error_response,
    model_object,
)
from holodeck_core.testing.server.state import STATE_KEY, ServerState
from holodeck_core.testing.server.streaming import (
    SseEvent,
    chat_events,
    messages_events,
    responses_events,
)

LOOPBACK_HOST = "127.0.0.1"
_CLIENT_MAX_SIZE = 64 * 1024 * 1024


def check_host(host: str) -> str:
    if host in (LOOPBACK_HOST, "localhost"):
        return LOOPBACK_HOST
    raise ValueError(
        f"the loopback model server binds {LOOPBACK_HOST} only; refusing host {host!r}"
    )


async def _model_call(request: web.Request, route: RouteName) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    state.in_flight += 1
    state.peak_concurrency = max(state.peak_concurrency, state.in_flight)
    try:
        return await _model_call_inner(request, state, route)
    except BadRequest as exc:
        state.bad_requests += 1
        return error_response(route, exc.status, exc.message)
    finally:
        state.in_flight -= 1


def _streamed(body: Mapping[str, Any], route: RouteName) -> bool:
    """Is ``stream: true`` asked for? (``stream_options`` only with it, as OpenAI says.)"""
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise BadRequest(f"'stream' must be a boolean, got {stream!r}")
    if stream and route == "embeddings":
        raise BadRequest("'stream' is not supported by the embeddings endpoint")
    if "stream_options" in body and body["stream_options"] is not None and not stream:
        raise BadRequest("The 'stream_options' parameter is only allowed when 'stream' is enabled.")
    return bool(stream)


def _include_usage(body: Mapping[str, Any]) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


async def _model_call_inner(
    request: web.Request, state: ServerState, route: RouteName
) -> web.StreamResponse:
    deployment = request.match_info.get("deployment")
    if deployment is not None and not request.query.get("api-version"):
        raise BadRequest("missing required query parameter 'api-version' (Azure OpenAI)")
    body = await read_body(request)
    query = {"query": dict(request.query)} if request.query else {}
    record: dict[str, Any] = {"route": route, "path": request.path, **query, "body": body}
    state.requests.append(record)
    streamed = _streamed(body, route)
    call = plan_request(state, route, request.path, body, deployment)
    plan = call.plan
    state.by_key[call.key] += 1
    state.count_call(route, request.path, streamed)
    if streamed:
        record["streamed"] = True
    state.by_rule[state.rules.rule_label(plan.rule_index)] += 1
    if plan.fault is not None:
        state.faults[plan.fault.kind] += 1

    if plan.latency > 0:
        await asyncio.sleep(plan.latency)
    fault = plan.fault
    if fault is not None:
        refused = await _fault_response(request, route, fault)
        if refused is not None:
            return refused

    payload = answer_payload(state, call)
    cut = fault.after_events if fault is not None and fault.kind == "cut" else None
    if streamed:
        return await _write_stream(request, _events(route, body, payload), cut)
    text = json.dumps(payload)
    if fault is not None and fault.kind in ("malformed", "cut"):
        return await _write_cut_body(request, text, declared_length=fault.kind == "cut")
    return web.json_response(payload)


def _close_connection(request: web.Request) -> None:
    """Close the connection under a response: data already written still goes out; aiohttp then
    fails to finish the response and treats it as a client disconnection (quietly)."""
    transport = request.transport
    if transport is not None:
        transport.close()


async def _fault_response(
    request: web.Request, route: RouteName, fault: Fault
) -> web.StreamResponse | None:
    """The answer of a fault that replaces the model's answer (before any stream starts)."""
    error = fault_error(fault)
    if error is not None:
        status, message = error
        headers = {"Retry-After": f"{fault.retry_after:g}"} if status == 429 else None
        return error_response(route, status, echo_key(message, request.headers), headers)
    if fault.kind == "drop":
        _close_connection(request)
        return web.Response(status=204)
    if fault.kind == "slow":
        await asyncio.sleep(fault.slow_seconds)
    return None


def _events(
    route: RouteName, body: Mapping[str, Any], payload: Mapping[str, Any]
) -> list[SseEvent]:
    if route == "chat":
        return chat_events(payload, _include_usage(body))
    if route == "messages":
        return messages_events(payload)
    return responses_events(payload)


async def _write_stream(
    request: web.Request, events: list[SseEvent], cut_after: int | None
) -> web.StreamResponse:
    """Send ``events`` as ``text/event-stream``; a ``cut`` closes the connection after
    ``cut_after`` events, never letting the last one through."""
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    limit = len(events) if cut_after is None else min(cut_after, len(events) - 1)
    for event in events[:limit]:
        await response.write(event.encode())
    if cut_after is not None:
        _close_connection(request)
        return response
    await response.write_eof()
    return response


async def _write_cut_body(
    request: web.Request, text: str, *, declared_length: bool
) -> web.StreamResponse:
    """Half of a JSON body: ``malformed`` ends it there (a complete, invalid body), a ``cut``
    declares the whole length and closes the connection after the half."""
    data = text.encode()
    half = data[: max(1, len(data) // 2)]
    if not declared_length:
        return web.Response(status=200, body=half, content_type="application/json")
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    response.content_length = len(data)
    await response.prepare(request)
    await response.write(half)
    _close_connection(request)
    return response


def _route_handler(
    route: RouteName,
) -> Callable[[web.Request], Any]:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await _model_call(request, route)

    return handler


async def _models(request: web.Request) -> web.Response:
    data = [model_object(m) for m in MODEL_IDS]
    return web.json_response(
        {
            "object": "list",
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"],
            "last_id": data[-1]["id"],
        }
    )


async def _model(request: web.Request) -> web.Response:
    return web.json_response(model_object(request.match_info["model"]))


async def _stats(request: web.Request) -> web.Response:
    return web.json_response(request.app[STATE_KEY].snapshot())


async def _requests(request: web.Request) -> web.Response:
    return web.json_response(request.app[STATE_KEY].requests)


async def _reset(request: web.Request) -> web.Response:
    request.app[STATE_KEY].reset()
    return web.json_response({"ok": True})


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _not_found(request: web.Request) -> web.Response:
    route = "messages" if "messages" in request.path else "chat"
    return error_response(
        route,
        404,
        f"{request.method} {request.path} is not a route of the holodeck loopback model "
        "server (POST /v1/chat/completions, /v1/responses, /v1/messages, /v1/embeddings, "
        "/openai/deployments/{d}/chat/completions and /embeddings, /api/embed; GET /v1/models, "
        "/_stats, /_requests; POST /_reset; the batch APIs under /v1/files, /v1/batches, "
        "/v1/messages/batches)",
    )


def create_app(rules: RulesInput = None, *, latency: float = 0.0) -> web.Application:
    """The aiohttp application; its :class:`ServerState` is ``app_state(app)``."""
    app = web.Application(client_max_size=_CLIENT_MAX_SIZE)
    app[STATE_KEY] = ServerState(coerce_rules(rules), latency)
    chat, responses, messages, embeddings = (
        _route_handler("chat"),
        _route_handler("responses"),
        _route_handler("messages"),
        _route_handler("embeddings"),
    )
    for path in ("/v1/chat/completions", "/chat/completions", "/openai/v1/chat/completions"):
        app.router.add_post(path, chat)
    app.router.add_post("/openai/deployments/{deployment}/chat/completions", chat)
    for path in ("/v1/responses", "/responses", "/openai/responses", "/openai/v1/responses"):
        app.router.add_post(path, responses)
    for path in ("/v1/messages", "/messages"):
        app.router.add_post(path, messages)
    for path in ("/v1/embeddings", "/embeddings", "/openai/v1/embeddings"):
        app.router.add_post(path, embeddings)
    app.router.add_post("/openai/deployments/{deployment}/embeddings", embeddings)
    app.router.add_post(OLLAMA_EMBED, embeddings)
    for prefix in ("/v1", "", "/openai", "/openai/v1"):
        app.router.add_get(f"{prefix}/models", _models)
        app.router.add_get(f"{prefix}/models/{{model}}", _model)
    batch_openai.add_routes(app)
    batch_anthropic.add_routes(app)
    app.on_cleanup.append(cancel_tasks)
    app.router.add_get("/_stats", _stats)
    app.router.add_get("/_requests", _requests)
    app.router.add_post("/_reset", _reset)
    app.router.add_get("/_health", _health)
    app.router.add_route("*", "/{tail:.*}", _not_found)
    return app


def app_state(app: web.Application) -> ServerState:
    """The counters and rules of an app made by :func:`create_app`."""
    return app[STATE_KEY]


async def start_app(app: web.Application, port: int, shutdown_timeout: float) -> web.AppRunner:
    runner = web.AppRunner(
        app,
        handle_signals=False,
        access_log=None,
        handler_cancellation=True,
        shutdown_timeout=shutdown_timeout,
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, LOOPBACK_HOST, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner
