"""The aiohttp application: routes, the model-call handler and the control endpoints."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from holodeck_core.testing.rules import RouteName
from holodeck_core.testing.rules_loading import RulesInput, coerce_rules
from holodeck_core.testing.server.embeddings import embeddings_body, parse_embeddings
from holodeck_core.testing.server.planning import plan_call
from holodeck_core.testing.server.requests import (
    BadRequest,
    objects,
    parse_chat,
    parse_messages,
    parse_responses,
    read_body,
    request_key,
)
from holodeck_core.testing.server.responses import (
    MODEL_IDS,
    chat_body,
    echo_key,
    error_response,
    hid,
    messages_body,
    model_object,
    responses_body,
    responses_output,
)
from holodeck_core.testing.server.state import STATE_KEY, ServerState

LOOPBACK_HOST = "127.0.0.1"
_CLIENT_MAX_SIZE = 64 * 1024 * 1024


def check_host(host: str) -> str:
    if host in (LOOPBACK_HOST, "localhost"):
        return LOOPBACK_HOST
    raise ValueError(
        f"the loopback model server binds {LOOPBACK_HOST} only; refusing host {host!r}"
    )


def _responses_items(
    state: ServerState, body: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(prior conversation from previous_response_id, this request's input items)."""
    prior: list[dict[str, Any]] = []
    previous = body.get("previous_response_id")
    if previous is not None:
        if not isinstance(previous, str) or previous not in state.responses:
            raise BadRequest(f"Previous response with id '{previous}' not found.")
        prior = state.responses[previous]
    raw = body.get("input")
    if raw is None:
        if not prior:
            raise BadRequest("missing required parameter: 'input'")
        new: list[dict[str, Any]] = []
    elif isinstance(raw, str):
        new = [{"type": "message", "role": "user", "content": raw}]
    else:
        new = objects(raw, "input")
    return prior, new


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


async def _model_call_inner(
    request: web.Request, state: ServerState, route: RouteName
) -> web.StreamResponse:
    deployment = request.match_info.get("deployment")
    if deployment is not None and not request.query.get("api-version"):
        raise BadRequest("missing required query parameter 'api-version' (Azure OpenAI)")
    body = await read_body(request)
    query = {"query": dict(request.query)} if request.query else {}
    state.requests.append({"route": route, "path": request.path, **query, "body": body})
    items: list[dict[str, Any]] = []
    if route == "chat":
        conv = parse_chat(body)
    elif route == "messages":
        conv = parse_messages(body)
    elif route == "embeddings":
        conv = parse_embeddings(body)
    else:
        prior, new = _responses_items(state, body)
        items = prior + new
        conv = parse_responses(body, items, str(body.get("model") or "loopback-gpt"))
    if deployment is not None:
        conv.model = deployment

    rules = state.rules
    key = request_key(route, conv.user_text)
    state.by_key[key] += 1
    call_no = state.by_key[key]
    state.total_calls += 1
    state.by_route[route] += 1
    state.by_path[request.path] += 1
    plan = plan_call(rules, conv, key, call_no, state.latency)
    state.by_rule[rules.rule_label(plan.rule_index)] += 1
    if plan.fault is not None:
        state.faults[plan.fault.kind] += 1

    if plan.latency > 0:
        await asyncio.sleep(plan.latency)

    fault = plan.fault
    if fault is not None:
        if fault.kind == "429":
            return error_response(
                route,
                429,
                "Rate limit reached (injected by the holodeck loopback model server).",
                headers={"Retry-After": f"{fault.retry_after:g}"},
            )
        if fault.kind in ("400", "401", "500", "503"):
            status = int(fault.kind)
            message = f"Injected {status} error from the holodeck loopback model server."
            if fault.message is not None:
                message = echo_key(fault.message, request)
            return error_response(route, status, message)
        if fault.kind == "drop":
            # Close the connection without a response; aiohttp then fails to write the
            # empty response below and treats it as a client disconnection (quietly).
            transport = request.transport
            if transport is not None:
                transport.close()
            return web.Response(status=204)
        if fault.kind == "slow":
            await asyncio.sleep(fault.slow_seconds)

    payload: dict[str, Any]
    if route == "chat":
        payload = chat_body(conv, plan, key, call_no)
    elif route == "messages":
        payload = messages_body(conv, plan, key, call_no)
    elif route == "embeddings":
        payload = embeddings_body(body, conv)
    else:
        response_id = f"resp_{hid(key, call_no, 'resp')}"
        output = responses_output(conv, plan, key, call_no)
        state.store_response(response_id, items + output)
        payload = responses_body(body, conv, plan, response_id, output)

    if fault is not None and fault.kind == "malformed":
        text = json.dumps(payload)
        return web.Response(
            status=200, text=text[: max(1, len(text) // 2)], content_type="application/json"
        )
    return web.json_response(payload)


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
        "/openai/deployments/{d}/chat/completions and /embeddings; GET /v1/models, "
        "/_stats, /_requests; POST /_reset)",
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
    for prefix in ("/v1", "", "/openai", "/openai/v1"):
        app.router.add_get(f"{prefix}/models", _models)
        app.router.add_get(f"{prefix}/models/{{model}}", _model)
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
