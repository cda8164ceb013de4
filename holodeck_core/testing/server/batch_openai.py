"""OpenAI's Files and Batch APIs, in the shapes of the ``openai`` SDK.

``POST /v1/files`` (multipart, ``purpose=batch``: JSONL of ``{custom_id, method, url, body}``),
``GET /v1/files/{id}``, ``GET /v1/files/{id}/content``, ``DELETE /v1/files/{id}``,
``POST /v1/batches``, ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``,
``GET /v1/batches``. An ended batch's ``output_file_id`` holds the answered requests
(``response.status_code`` 200), its ``error_file_id`` the others: an HTTP error
(``response.status_code`` 4xx/5xx, the error body) or a request never run (``response: null``,
``error.code`` ``batch_expired`` or ``batch_cancelled``).
"""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from holodeck_core.defaults import (
    MODEL_SERVER_BATCH_MAX_REQUESTS,
    MODEL_SERVER_BATCH_WINDOW_S,
    MODEL_SERVER_OPENAI_BATCH_LIST_MOST,
)
from holodeck_core.testing.rules import RouteName
from holodeck_core.testing.server.batch_model import Batch, BatchRequest, InputLine, StoredFile
from holodeck_core.testing.server.batches import (
    cancel,
    find_batch,
    json_object,
    list_limit,
    new_batch,
    new_id,
    page,
    protocol_errors,
    submit,
)
from holodeck_core.testing.server.requests import BadRequest, read_body
from holodeck_core.testing.server.responses import hid
from holodeck_core.testing.server.state import STATE_KEY, ServerState

PREFIX = "batch_"
"""The ids of OpenAI batches (Anthropic's begin ``msgbatch_``)."""
ENDPOINTS: dict[str, RouteName] = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/embeddings": "embeddings",
}
"""The batch endpoints the server answers, and the route answering each."""
_COMPLETION_WINDOW = "24h"
_UNRUN_ERRORS = {
    "expired": (
        "batch_expired",
        "This request could not be executed before the completion window expired.",
    ),
    "cancelled": ("batch_cancelled", "This request was not executed: the batch was cancelled."),
}

_errors = protocol_errors("responses")


def _line_error(filename: str, number: int, problem: str) -> BadRequest:
    return BadRequest(f"{filename}, line {number}: {problem}")


def _parse_line(filename: str, number: int, text: str) -> InputLine:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _line_error(filename, number, f"not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise _line_error(filename, number, "must be a JSON object")
    custom_id, url, body = data.get("custom_id"), data.get("url"), data.get("body")
    if not isinstance(custom_id, str) or not custom_id:
        raise _line_error(filename, number, "'custom_id' must be a non-empty string")
    if data.get("method") != "POST":
        raise _line_error(filename, number, "'method' must be \"POST\"")
    if not isinstance(url, str) or url not in ENDPOINTS:
        raise _line_error(filename, number, f"'url' {url!r} is not one of {', '.join(ENDPOINTS)}")
    if not isinstance(body, dict):
        raise _line_error(filename, number, "'body' must be a JSON object")
    return InputLine(number, custom_id, url, body)


def parse_input(data: bytes, filename: str) -> list[InputLine]:
    """The request lines of a batch input file; :class:`BadRequest` names the line at fault."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest(f"{filename} is not UTF-8 text (a batch file is JSONL)") from None
    lines: list[InputLine] = []
    seen: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        line = _parse_line(filename, number, raw)
        if line.custom_id in seen:
            raise _line_error(filename, number, f"duplicate custom_id {line.custom_id!r}")
        seen.add(line.custom_id)
        lines.append(line)
    if not lines:
        raise BadRequest(f"{filename} holds no request lines")
    if len(lines) > MODEL_SERVER_BATCH_MAX_REQUESTS:
        raise BadRequest(
            f"{filename} holds {len(lines)} requests; a batch takes at most "
            f"{MODEL_SERVER_BATCH_MAX_REQUESTS}"
        )
    return lines


def _file_object(stored: StoredFile) -> dict[str, Any]:
    return {
        "id": stored.id,
        "object": "file",
        "bytes": len(stored.data),
        "created_at": stored.created_at,
        "filename": stored.filename,
        "purpose": stored.purpose,
        "status": "processed",
        "expires_at": None,
        "status_details": None,
    }


def _find_file(request: web.Request) -> StoredFile:
    file_id = request.match_info["file_id"]
    stored = request.app[STATE_KEY].files.get(file_id)
    if stored is None:
        raise BadRequest(f"No such File object: {file_id}", 404)
    return stored


@_errors
async def _create_file(request: web.Request) -> web.StreamResponse:
    try:
        form = await request.post()
    except (ValueError, HttpProcessingError):
        raise BadRequest("the request body is not a valid multipart/form-data form") from None
    upload, purpose = form.get("file"), form.get("purpose")
    if not isinstance(upload, web.FileField):
        raise BadRequest("missing required parameter: 'file' (multipart/form-data)")
    if purpose != "batch":
        raise BadRequest(
            f"'purpose' must be 'batch' (the only files the loopback server keeps), got {purpose!r}"
        )
    data = upload.file.read()
    stored = StoredFile(
        id=new_id("file-"),
        filename=upload.filename,
        purpose="batch",
        data=data,
        created_at=int(time.time()),
        lines=parse_input(data, upload.filename),
    )
    request.app[STATE_KEY].files[stored.id] = stored
    return web.json_response(_file_object(stored))


@_errors
async def _get_file(request: web.Request) -> web.StreamResponse:
    return web.json_response(_file_object(_find_file(request)))


@_errors
async def _file_content(request: web.Request) -> web.StreamResponse:
    stored = _find_file(request)
    return web.Response(body=stored.data, content_type="application/octet-stream")


@_errors
async def _delete_file(request: web.Request) -> web.StreamResponse:
    stored = _find_file(request)
    del request.app[STATE_KEY].files[stored.id]
    return web.json_response({"id": stored.id, "object": "file", "deleted": True})


def _batch_params(state: ServerState, body: dict[str, Any]) -> tuple[StoredFile, str]:
    """The input file and endpoint of a ``POST /v1/batches`` body."""
    file_id, endpoint = body.get("input_file_id"), body.get("endpoint")
    if not isinstance(file_id, str) or not file_id:
        raise BadRequest("missing required parameter: 'input_file_id'")
    if not isinstance(endpoint, str) or endpoint not in ENDPOINTS:
        raise BadRequest(
            f"'endpoint' must be one of {', '.join(ENDPOINTS)} "
            f"(those the loopback server answers), got {endpoint!r}"
        )
    if body.get("completion_window") != _COMPLETION_WINDOW:
        raise BadRequest(
            f"'completion_window' must be '{_COMPLETION_WINDOW}', "
            f"got {body.get('completion_window')!r}"
        )
    if body.get("metadata") is not None:
        json_object(body["metadata"], "metadata")
    stored = state.files.get(file_id)
    if stored is None:
        raise BadRequest(f"No such File object: {file_id}", 404)
    if stored.purpose != "batch":
        raise BadRequest(f"File {file_id} has purpose '{stored.purpose}', not 'batch'")
    return stored, endpoint


def _url_errors(lines: list[InputLine], endpoint: str) -> list[dict[str, Any]]:
    return [
        {
            "code": "invalid_url",
            "message": f"The URL provided for this request does not match the batch "
            f"endpoint {endpoint}.",
            "param": "url",
            "line": line.line,
        }
        for line in lines
        if line.url != endpoint
    ]


@_errors
async def _create_batch(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    body = await read_body(request)
    stored, endpoint = _batch_params(state, body)
    items = [
        BatchRequest(line.custom_id, ENDPOINTS[line.url], line.url, line.body)
        for line in stored.lines
    ]
    batch = new_batch(state, PREFIX, items, request)
    batch.extra = {
        "endpoint": endpoint,
        "input_file_id": stored.id,
        "metadata": body.get("metadata"),
        "model": next((str(i.body["model"]) for i in items if "model" in i.body), None),
    }
    errors = _url_errors(stored.lines, endpoint)
    if errors:
        batch.status = "failed"
        batch.times["failed"] = batch.created_at
        batch.extra["errors"] = {"object": "list", "data": errors}
    batch.on_end = lambda ended: _write_outputs(state, ended)
    submit(state, batch)
    return web.json_response(batch_object(batch))


def _output_line(batch: Batch, item: BatchRequest) -> dict[str, Any]:
    outcome = item.outcome
    line: dict[str, Any] = {"id": f"batch_req_{hid(batch.id, item.custom_id)}"}
    line["custom_id"] = item.custom_id
    if outcome is None or outcome.status is None:
        code, message = _UNRUN_ERRORS[outcome.kind if outcome else "expired"]
        return line | {"response": None, "error": {"code": code, "message": message}}
    response = {
        "status_code": outcome.status,
        "request_id": f"req_{hid(batch.id, item.custom_id, 'request')}",
        "body": outcome.body,
    }
    return line | {"response": response, "error": None}


def _write_outputs(state: ServerState, batch: Batch) -> None:
    """The output file (answered requests) and the error file (the others), if not empty."""
    ok: list[str] = []
    failed: list[str] = []
    for item in batch.items:
        line = json.dumps(_output_line(batch, item))
        (ok if item.outcome and item.outcome.status == 200 else failed).append(line)
    for kind, lines in (("output", ok), ("error", failed)):
        if not lines:
            continue
        stored = StoredFile(
            id=new_id("file-"),
            filename=f"{batch.id}_{kind}.jsonl",
            purpose="batch_output",
            data=("\n".join(lines) + "\n").encode(),
            created_at=int(time.time()),
        )
        state.files[stored.id] = stored
        batch.extra[f"{kind}_file_id"] = stored.id


def _at(batch: Batch, status: str) -> int | None:
    moment = batch.times.get(status)
    return None if moment is None else int(moment)


def batch_object(batch: Batch) -> dict[str, Any]:
    """The batch as ``GET /v1/batches/{id}`` shows it."""
    extra = batch.extra
    answered = sum(1 for i in batch.items if i.outcome and i.outcome.status == 200)
    done = sum(1 for i in batch.items if i.outcome)
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": extra["endpoint"],
        "errors": extra.get("errors"),
        "input_file_id": extra["input_file_id"],
        "completion_window": _COMPLETION_WINDOW,
        "status": batch.status,
        "output_file_id": extra.get("output_file_id"),
        "error_file_id": extra.get("error_file_id"),
        "created_at": int(batch.created_at),
        "in_progress_at": _at(batch, "in_progress"),
        "expires_at": int(batch.created_at) + MODEL_SERVER_BATCH_WINDOW_S,
        "finalizing_at": _at(batch, "finalizing"),
        "completed_at": _at(batch, "completed"),
        "failed_at": _at(batch, "failed"),
        "expired_at": _at(batch, "expired"),
        "cancelling_at": _at(batch, "cancelling"),
        "cancelled_at": _at(batch, "cancelled"),
        "request_counts": {
            "total": len(batch.items),
            "completed": answered,
            "failed": done - answered,
        },
        "metadata": extra.get("metadata"),
        "model": extra.get("model"),
    }


def _openai_batch(request: web.Request) -> Batch:
    batch = find_batch(request, "batch")
    if not batch.id.startswith(PREFIX):  # an Anthropic batch's id
        raise BadRequest(f"No such batch: '{batch.id}'", 404)
    return batch


@_errors
async def _get_batch(request: web.Request) -> web.StreamResponse:
    return web.json_response(batch_object(_openai_batch(request)))


@_errors
async def _cancel_batch(request: web.Request) -> web.StreamResponse:
    batch = _openai_batch(request)
    if batch.ended:
        raise BadRequest(f"Cannot cancel a batch with status '{batch.status}'.", 409)
    cancel(batch)
    return web.json_response(batch_object(batch))


@_errors
async def _list_batches(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    limit = list_limit(request.query, MODEL_SERVER_OPENAI_BATCH_LIST_MOST)
    mine = [b for b in state.batches.values() if b.id.startswith(PREFIX)]
    shown, more = page(mine, limit, request.query.get("after"))
    data = [batch_object(b) for b in shown]
    return web.json_response(
        {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": more,
        }
    )


def add_routes(app: web.Application) -> None:
    """The Files and Batch routes under ``/v1``."""
    app.router.add_post("/v1/files", _create_file)
    app.router.add_get("/v1/files/{file_id}", _get_file)
    app.router.add_delete("/v1/files/{file_id}", _delete_file)
    app.router.add_get("/v1/files/{file_id}/content", _file_content)
    app.router.add_post("/v1/batches", _create_batch)
    app.router.add_get("/v1/batches", _list_batches)
    app.router.add_get("/v1/batches/{batch_id}", _get_batch)
    app.router.add_post("/v1/batches/{batch_id}/cancel", _cancel_batch)
