"""Anthropic's Message Batches API, in the shapes of the ``anthropic`` SDK.

``POST /v1/messages/batches`` (``requests: [{custom_id, params}]``),
``GET /v1/messages/batches/{id}``, ``GET /v1/messages/batches/{id}/results`` (JSONL of
``{custom_id, result: {type: succeeded|errored|canceled|expired, message|error}}``),
``POST /v1/messages/batches/{id}/cancel``, ``DELETE /v1/messages/batches/{id}``,
``GET /v1/messages/batches``; also at ``/v1/messages/batches?beta=true`` with the
``anthropic-beta`` header, as the SDK's beta client sends them (headers are not checked).
As Anthropic says, ``request_counts`` show every request ``processing`` until the batch ends.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from holodeck_core.defaults import (
    MODEL_SERVER_ANTHROPIC_BATCH_LIST_MOST,
    MODEL_SERVER_BATCH_MAX_REQUESTS,
    MODEL_SERVER_BATCH_WINDOW_S,
)
from holodeck_core.testing.server.batch_model import Batch, BatchRequest, Outcome, OutcomeKind
from holodeck_core.testing.server.batches import (
    cancel,
    find_batch,
    json_object,
    list_limit,
    new_batch,
    page,
    protocol_errors,
    submit,
)
from holodeck_core.testing.server.requests import BadRequest, objects, read_body
from holodeck_core.testing.server.state import STATE_KEY

PREFIX = "msgbatch_"
_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_RESULT_TYPES: dict[OutcomeKind, str] = {
    "succeeded": "succeeded",
    "errored": "errored",
    "cancelled": "canceled",
    "expired": "expired",
}

_errors = protocol_errors("messages")


def _items(body: dict[str, Any]) -> list[BatchRequest]:
    if "requests" not in body:
        raise BadRequest("requests: field required")
    requests = objects(body["requests"], "requests")
    if not requests:
        raise BadRequest("requests: at least one request is required")
    if len(requests) > MODEL_SERVER_BATCH_MAX_REQUESTS:
        raise BadRequest(
            f"requests: {len(requests)} requests; a batch takes at most "
            f"{MODEL_SERVER_BATCH_MAX_REQUESTS}"
        )
    items: list[BatchRequest] = []
    seen: set[str] = set()
    for i, request in enumerate(requests):
        custom_id = request.get("custom_id")
        if not isinstance(custom_id, str) or not _CUSTOM_ID.fullmatch(custom_id):
            raise BadRequest(
                f"requests[{i}].custom_id: must be 1 to 64 letters, digits, '_' or '-', "
                f"got {custom_id!r}"
            )
        if custom_id in seen:
            raise BadRequest(f"requests[{i}].custom_id: duplicate custom_id {custom_id!r}")
        seen.add(custom_id)
        params = json_object(request.get("params"), f"requests[{i}].params")
        items.append(BatchRequest(custom_id, "messages", "/v1/messages", params))
    return items


def _time(moment: float | None) -> str | None:
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, UTC).isoformat().replace("+00:00", "Z")


def _processing_status(batch: Batch) -> str:
    if batch.ended:
        return "ended"
    return "canceling" if batch.status == "cancelling" else "in_progress"


def _request_counts(batch: Batch) -> dict[str, int]:
    if not batch.ended:
        return {
            "processing": len(batch.items),
            "succeeded": 0,
            "errored": 0,
            "canceled": 0,
            "expired": 0,
        }
    counts = {name: batch.count(kind) for kind, name in _RESULT_TYPES.items()}
    return {"processing": 0} | counts


def batch_object(batch: Batch, request: web.Request) -> dict[str, Any]:
    """The batch as ``GET /v1/messages/batches/{id}`` shows it."""
    results_url = None
    if batch.ended:
        results_url = f"{request.url.origin()}/v1/messages/batches/{batch.id}/results"
    ended_at = next(
        (batch.times[s] for s in ("completed", "cancelled", "expired") if s in batch.times), None
    )
    return {
        "id": batch.id,
        "type": "message_batch",
        "processing_status": _processing_status(batch),
        "request_counts": _request_counts(batch),
        "ended_at": _time(ended_at),
        "created_at": _time(batch.created_at),
        "expires_at": _time(batch.created_at + MODEL_SERVER_BATCH_WINDOW_S),
        "archived_at": None,
        "cancel_initiated_at": _time(batch.times.get("cancelling")),
        "results_url": results_url,
    }


def _anthropic_batch(request: web.Request) -> Batch:
    batch = find_batch(request, "Message Batch")
    if not batch.id.startswith(PREFIX):
        raise BadRequest(f"No such Message Batch: '{batch.id}'", 404)
    return batch


def _result(outcome: Outcome) -> dict[str, Any]:
    kind = _RESULT_TYPES[outcome.kind]
    if outcome.kind == "succeeded":
        return {"type": kind, "message": outcome.body}
    if outcome.kind == "errored":
        return {"type": kind, "error": outcome.body}
    return {"type": kind}


@_errors
async def _create(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    batch = new_batch(state, PREFIX, _items(await read_body(request)), request)
    submit(state, batch)
    return web.json_response(batch_object(batch, request))


@_errors
async def _retrieve(request: web.Request) -> web.StreamResponse:
    return web.json_response(batch_object(_anthropic_batch(request), request))


@_errors
async def _results(request: web.Request) -> web.StreamResponse:
    batch = _anthropic_batch(request)
    if not batch.ended:
        raise BadRequest(
            f"Message Batch {batch.id} is still {_processing_status(batch)}; its results "
            "are available once its processing_status is 'ended'",
            404,
        )
    lines = [
        json.dumps({"custom_id": item.custom_id, "result": _result(item.outcome)})
        for item in batch.items
        if item.outcome is not None
    ]
    body = "".join(line + "\n" for line in lines)
    return web.Response(text=body, content_type="application/x-jsonl")


@_errors
async def _cancel(request: web.Request) -> web.StreamResponse:
    batch = _anthropic_batch(request)
    cancel(batch)
    return web.json_response(batch_object(batch, request))


@_errors
async def _delete(request: web.Request) -> web.StreamResponse:
    batch = _anthropic_batch(request)
    if not batch.ended:
        raise BadRequest(
            f"Message Batch {batch.id} is still {_processing_status(batch)}; cancel it and "
            "wait until it has ended before deleting it"
        )
    del request.app[STATE_KEY].batches[batch.id]
    return web.json_response({"id": batch.id, "type": "message_batch_deleted"})


@_errors
async def _list(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    limit = list_limit(request.query, MODEL_SERVER_ANTHROPIC_BATCH_LIST_MOST)
    mine = [b for b in state.batches.values() if b.id.startswith(PREFIX)]
    after, before = request.query.get("after_id"), request.query.get("before_id")
    shown, more = page(mine, limit, after, before)
    data = [batch_object(b, request) for b in shown]
    return web.json_response(
        {
            "data": data,
            "has_more": more,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }
    )


def add_routes(app: web.Application) -> None:
    """The Message Batches routes under ``/v1/messages/batches``."""
    base = "/v1/messages/batches"
    app.router.add_post(base, _create)
    app.router.add_get(base, _list)
    app.router.add_get(f"{base}/{{batch_id}}", _retrieve)
    app.router.add_delete(f"{base}/{{batch_id}}", _delete)
    app.router.add_get(f"{base}/{{batch_id}}/results", _results)
    app.router.add_post(f"{base}/{{batch_id}}/cancel", _cancel)
