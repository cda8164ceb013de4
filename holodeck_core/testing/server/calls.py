"""Calls: one model request, from its JSON body to the protocol's answer.

Shared by the synchronous routes (:mod:`.app`, which adds counting, latency, faults and
streaming) and the batches (:mod:`.batches`), so a request in a batch is answered exactly as
the same request sent on its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from holodeck_core.testing.rules import RouteName
from holodeck_core.testing.server.embeddings import (
    embeddings_body,
    ollama_embed_body,
    parse_embeddings,
)
from holodeck_core.testing.server.planning import Fault, Plan, plan_call
from holodeck_core.testing.server.requests import (
    BadRequest,
    Conversation,
    objects,
    parse_chat,
    parse_messages,
    parse_responses,
    request_key,
)
from holodeck_core.testing.server.responses import (
    chat_body,
    hid,
    messages_body,
    responses_body,
    responses_output,
)
from holodeck_core.testing.server.state import ServerState

OLLAMA_EMBED = "/api/embed"
"""Ollama's native embeddings route (its OpenAI-compatible one is ``/v1/embeddings``)."""

HTTP_FAULTS = ("400", "401", "429", "500", "503")
"""Fault kinds that answer an HTTP error in place of the model's answer."""


@dataclass
class Call:
    """A planned model call: the request as the rules see it, its number and the plan."""

    route: RouteName
    path: str
    body: Mapping[str, Any]
    conv: Conversation
    items: list[dict[str, Any]]
    """The Responses API's whole conversation (earlier turns included); empty elsewhere."""
    key: str
    call_no: int
    plan: Plan


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


def _conversation(
    state: ServerState, route: RouteName, body: Mapping[str, Any]
) -> tuple[Conversation, list[dict[str, Any]]]:
    """The request as the rules see it, and (Responses API) its whole conversation's items."""
    if route == "chat":
        return parse_chat(body), []
    if route == "messages":
        return parse_messages(body), []
    if route == "embeddings":
        return parse_embeddings(body), []
    prior, new = _responses_items(state, body)
    items = prior + new
    return parse_responses(body, items, str(body.get("model") or "loopback-gpt")), items


def plan_request(
    state: ServerState,
    route: RouteName,
    path: str,
    body: Mapping[str, Any],
    deployment: str | None = None,
) -> Call:
    """Parse ``body`` (:class:`BadRequest` if it is not a valid request), number the call
    within its request key and plan its answer from the rules."""
    conv, items = _conversation(state, route, body)
    if deployment is not None:
        conv.model = deployment
    key = request_key(route, conv.user_text)
    state.call_numbers[key] += 1
    call_no = state.call_numbers[key]
    plan = plan_call(state.rules, conv, key, call_no, state.latency)
    return Call(route, path, body, conv, items, key, call_no, plan)


def answer_payload(state: ServerState, call: Call) -> dict[str, Any]:
    """The protocol's JSON answer of a planned call (a Responses answer is stored, so that
    ``previous_response_id`` can continue it)."""
    conv, plan, key, call_no = call.conv, call.plan, call.key, call.call_no
    if call.route == "chat":
        return chat_body(conv, plan, key, call_no)
    if call.route == "messages":
        return messages_body(conv, plan, key, call_no)
    if call.route == "embeddings":
        payload = embeddings_body(call.body, conv)
        return ollama_embed_body(payload) if call.path == OLLAMA_EMBED else payload
    response_id = f"resp_{hid(key, call_no, 'resp')}"
    output = responses_output(conv, plan, key, call_no)
    state.store_response(response_id, call.items + output)
    return responses_body(call.body, conv, plan, response_id, output)


def fault_error(fault: Fault) -> tuple[int, str] | None:
    """The HTTP status and message of a fault that answers an error, else None."""
    if fault.kind not in HTTP_FAULTS:
        return None
    status = int(fault.kind)
    if status == 429:
        return status, "Rate limit reached (injected by the holodeck loopback model server)."
    message = f"Injected {status} error from the holodeck loopback model server."
    return status, message if fault.message is None else fault.message
