"""Processing batches: a background task on the server's loop answers each request as the
synchronous route would (:mod:`.calls`), spread over ``batches.complete_after`` seconds,
until the batch completes, expires (``batches.expire_after``) or is cancelled.

The rules' ``batches`` section (docs/cli.md) is read when a batch is submitted. A rule's fault
of an HTTP kind (400, 401, 429, 500, 503) makes its request fail with that error; connection
faults (drop, malformed, cut, slow) have no connection to act on and do not apply; latency
neither (``complete_after`` is a batch's latency).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, TypeAlias

from aiohttp import web

from holodeck_core.defaults import MODEL_SERVER_BATCH_LIST_LIMIT
from holodeck_core.testing.server.batch_model import Batch, BatchRequest, Outcome
from holodeck_core.testing.server.calls import answer_payload, fault_error, plan_request
from holodeck_core.testing.server.requests import BadRequest
from holodeck_core.testing.server.responses import echo_key, error_body, error_response
from holodeck_core.testing.server.state import STATE_KEY, ServerState

_KEY_HEADERS = ("Authorization", "x-api-key", "api-key")

BatchEnd: TypeAlias = Literal["completed", "cancelled", "expired"]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def new_batch(
    state: ServerState, id_prefix: str, items: list[BatchRequest], request: web.Request
) -> Batch:
    """A batch of ``items`` under the rules' current ``batches`` controls (not yet running)."""
    headers = {h: request.headers[h] for h in _KEY_HEADERS if h in request.headers}
    return Batch(
        id=new_id(id_prefix),
        items=items,
        controls=state.rules.batches,
        seed=state.rules.faults.seed,
        key_headers=headers,
        created_at=time.time(),
    )


def submit(state: ServerState, batch: Batch) -> None:
    """Keep ``batch``, count it and start processing it in the background (unless it has
    already failed validation)."""
    state.batches[batch.id] = batch
    state.batch_counts["submitted"] += 1
    state.batch_requests["submitted"] += len(batch.items)
    for item in batch.items:
        state.batch_by_route[item.route] += 1
    if batch.status == "failed":
        state.batch_counts["failed"] += 1
        return
    task = asyncio.get_running_loop().create_task(_run(state, batch))
    state.batch_tasks.add(task)
    task.add_done_callback(state.batch_tasks.discard)


def cancel(batch: Batch) -> None:
    """Ask a running batch to stop: it shows ``cancelling`` until its task has ended it."""
    if batch.ended or batch.status == "cancelling":
        return
    batch.status = "cancelling"
    batch.times["cancelling"] = time.time()
    batch.cancel.set()


async def _wait_until(batch: Batch, offset: float) -> bool:
    """Wait until ``offset`` seconds after submission; True if the batch is cancelled."""
    delay = batch.created_at + offset - time.time()
    if delay > 0 and not batch.cancel.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(batch.cancel.wait(), delay)
    else:
        await asyncio.sleep(0)
    return batch.cancel.is_set()


async def _run(state: ServerState, batch: Batch) -> None:
    await asyncio.sleep(0)
    if batch.status == "validating":
        batch.status = "in_progress"
        batch.times["in_progress"] = time.time()
    controls, n = batch.controls, len(batch.items)
    expire_after = controls.expire_after
    end: BatchEnd = "completed"
    for i, item in enumerate(batch.items):
        due = controls.complete_after * (i + 1) / n
        if expire_after is not None and due > expire_after:
            end = "cancelled" if await _wait_until(batch, expire_after) else "expired"
            break
        if await _wait_until(batch, due):
            end = "cancelled"
            break
        item.outcome = _answer_guarded(state, batch, item)
        state.batch_requests[item.outcome.kind] += 1
    _finish(state, batch, end)


def _finish(state: ServerState, batch: Batch, end: BatchEnd) -> None:
    unrun: Literal["cancelled", "expired"] = "cancelled" if end == "cancelled" else "expired"
    for item in batch.items:
        if item.outcome is None:
            item.outcome = Outcome(unrun)
            state.batch_requests[unrun] += 1
    now = time.time()
    if end == "completed":
        batch.status = "finalizing"
        batch.times["finalizing"] = now
    if batch.on_end is not None:
        batch.on_end(batch)
    batch.status = "completed" if end == "completed" else unrun
    batch.times[batch.status] = now
    state.batch_counts[batch.status] += 1


def _injected_failure(batch: Batch, item: BatchRequest) -> Outcome | None:
    fail = batch.controls.fail
    hit = item.custom_id in fail.custom_ids
    if not hit and fail.rate > 0:
        hit = random.Random(f"{batch.seed}|batch|{item.custom_id}").random() < fail.rate
    if not hit:
        return None
    message = echo_key(fail.message, batch.key_headers)
    return Outcome("errored", fail.status, error_body(item.route, fail.status, message))


def _answer_guarded(state: ServerState, batch: Batch, item: BatchRequest) -> Outcome:
    """:func:`answer_item`, where a body the request handling cannot read fails this request
    with a 500, as the synchronous route answers it, rather than the whole batch's task."""
    try:
        return answer_item(state, batch, item)
    except Exception as exc:  # one request's failure must not stall the batch
        message = f"The holodeck loopback model server could not answer this request: {exc!r}"
        return Outcome("errored", 500, error_body(item.route, 500, message))


def answer_item(state: ServerState, batch: Batch, item: BatchRequest) -> Outcome:
    """The outcome of one request: its answer as the synchronous route gives it, or an error."""
    state.requests.append(
        {
            "route": item.route,
            "path": item.path,
            "body": item.body,
            "batch": batch.id,
            "custom_id": item.custom_id,
        }
    )
    injected = _injected_failure(batch, item)
    if injected is not None:
        return injected
    try:
        if item.body.get("stream"):
            raise BadRequest("'stream' is not supported in a batch request")
        call = plan_request(state, item.route, item.path, item.body)
    except BadRequest as exc:
        return Outcome("errored", exc.status, error_body(item.route, exc.status, exc.message))
    error = fault_error(call.plan.fault) if call.plan.fault is not None else None
    if error is not None:
        status, message = error
        body = error_body(item.route, status, echo_key(message, batch.key_headers))
        return Outcome("errored", status, body)
    return Outcome("succeeded", 200, answer_payload(state, call))


def page(
    batches: list[Batch], limit: int, after: str | None, before: str | None = None
) -> tuple[list[Batch], bool]:
    """Newest first: the batches after (older than) ``after`` or before (newer than)
    ``before``, at most ``limit``, and whether more follow."""
    ordered = list(reversed(batches))
    ids = [b.id for b in ordered]
    if after is not None:
        if after not in ids:
            raise BadRequest(f"no batch with id '{after}' to list after", 404)
        ordered = ordered[ids.index(after) + 1 :]
    if before is not None:
        if before not in ids:
            raise BadRequest(f"no batch with id '{before}' to list before", 404)
        ordered = ordered[: ids.index(before)][-limit:]
        return ordered, ids.index(before) > len(ordered)
    return ordered[:limit], len(ordered) > limit


def list_limit(query: Mapping[str, str], most: int) -> int:
    """The ``limit`` of a list request: 1 to ``most``, else the providers' default."""
    raw = query.get("limit")
    if raw is None:
        return MODEL_SERVER_BATCH_LIST_LIMIT
    try:
        limit = int(raw)
    except ValueError:
        raise BadRequest(f"'limit' must be an integer between 1 and {most}, got {raw!r}") from None
    if not 1 <= limit <= most:
        raise BadRequest(f"'limit' must be an integer between 1 and {most}, got {limit}")
    return limit


def protocol_errors(error_route: str) -> Callable[[Handler], Handler]:
    """Answer a :class:`BadRequest` raised by a batch route in the provider's error shape."""

    def wrap(handler: Handler) -> Handler:
        async def wrapped(request: web.Request) -> web.StreamResponse:
            try:
                return await handler(request)
            except BadRequest as exc:
                return error_response(error_route, exc.status, exc.message)

        return wrapped

    return wrap


def find_batch(request: web.Request, what: str) -> Batch:
    batch = request.app[STATE_KEY].batches.get(request.match_info["batch_id"])
    if batch is None:
        raise BadRequest(f"No such {what}: '{request.match_info['batch_id']}'", 404)
    return batch


async def cancel_tasks(app: web.Application) -> None:
    """On shutdown: stop the batches still processing."""
    tasks = list(app[STATE_KEY].batch_tasks)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def json_object(value: Any, field_name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRequest(f"'{field_name}' must be an object")
    return value
