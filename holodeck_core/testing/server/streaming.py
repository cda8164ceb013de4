"""Streaming: a finished answer as the server-sent events of its protocol (``stream: true``).

Each protocol's events are built from the same body a non-streamed call answers, so the
message an SDK accumulates from the stream equals the non-streamed one (docs/cli.md): Chat
Completions chunks ending in ``data: [DONE]``, the Responses API's typed events with their
``sequence_number``, Anthropic's ``message_start`` … ``message_stop``. Text, tool-call arguments
and thinking go out in several deltas, split by :func:`pieces`.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from holodeck_core.defaults import MODEL_SERVER_STREAM_PIECE_CHARS

_PIECE_RE = re.compile(rf"\s*\S{{1,{MODEL_SERVER_STREAM_PIECE_CHARS}}}|\s+")


@dataclass(frozen=True)
class SseEvent:
    """One server-sent event: its ``event:`` name (none on Chat Completions) and its data."""

    name: str | None
    data: str

    def encode(self) -> bytes:
        head = f"event: {self.name}\n" if self.name is not None else ""
        return f"{head}data: {self.data}\n\n".encode()


def pieces(text: str) -> list[str]:
    """``text`` cut into deltas at its words (blanks go with the word after them), a long word
    every :data:`MODEL_SERVER_STREAM_PIECE_CHARS` characters; joined they give ``text`` back."""
    return _PIECE_RE.findall(text)


def _event(name: str | None, data: Mapping[str, Any]) -> SseEvent:
    return SseEvent(name, json.dumps(data))


# --------------------------------------------------------------------- Chat Completions


def chat_events(payload: Mapping[str, Any], include_usage: bool) -> list[SseEvent]:
    """``chat.completion.chunk`` events of a ``chat.completion`` body, then ``[DONE]``; with
    ``include_usage`` every chunk has ``usage: null`` and a last chunk (``choices: []``) the
    usage, as OpenAI's ``stream_options: {include_usage: true}``."""
    choice = payload["choices"][0]
    base = {k: payload[k] for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"
    base["service_tier"] = payload.get("service_tier")

    def chunk(delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> SseEvent:
        body = {
            **base,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
            ],
        }
        if include_usage:
            body["usage"] = None
        return _event(None, body)

    message = choice["message"]
    events = [chunk({"role": "assistant", "content": None if message["content"] is None else ""})]
    logprobs = choice["logprobs"]
    for piece in pieces(message["content"] or ""):
        events.append(chunk({"content": piece}, logprobs=logprobs))
        logprobs = None
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        head = {"name": function["name"], "arguments": ""}
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {"index": index, "id": call["id"], "type": "function", "function": head}
                    ]
                }
            )
        )
        for piece in pieces(function["arguments"]):
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    events.append(chunk({}, finish=choice["finish_reason"]))
    if include_usage:
        events.append(_event(None, {**base, "choices": [], "usage": payload["usage"]}))
    events.append(SseEvent(None, "[DONE]"))
    return events


# --------------------------------------------------------------------- the Responses API


def _output_item_events(
    index: int, item: Mapping[str, Any]
) -> Iterator[tuple[str, dict[str, Any]]]:
    ids = {"item_id": item["id"], "output_index": index}
    if item["type"] == "function_call":
        yield (
            "response.output_item.added",
            {
                "output_index": index,
                "item": {**item, "arguments": "", "status": "in_progress"},
            },
        )
        for piece in pieces(item["arguments"]):
            yield "response.function_call_arguments.delta", {**ids, "delta": piece}
        yield (
            "response.function_call_arguments.done",
            {
                **ids,
                "name": item["name"],
                "arguments": item["arguments"],
            },
        )
    else:
        yield (
            "response.output_item.added",
            {
                "output_index": index,
                "item": {**item, "content": [], "status": "in_progress"},
            },
        )
        for content_index, part in enumerate(item["content"]):
            where = {**ids, "content_index": content_index}
            empty = {**part, "text": "", "logprobs": []}
            yield "response.content_part.added", {**where, "part": empty}
            logprobs = part["logprobs"]
            for piece in pieces(part["text"]):
                yield "response.output_text.delta", {**where, "delta": piece, "logprobs": logprobs}
                logprobs = []
            yield (
                "response.output_text.done",
                {
                    **where,
                    "text": part["text"],
                    "logprobs": part["logprobs"],
                },
            )
            yield "response.content_part.done", {**where, "part": part}
    yield "response.output_item.done", {"output_index": index, "item": item}


def responses_events(payload: Mapping[str, Any]) -> list[SseEvent]:
    """The typed events of a ``response`` body, numbered by ``sequence_number`` from 0."""
    started = {**copy.deepcopy(dict(payload)), "status": "in_progress", "output": [], "usage": None}
    typed: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": started}),
        ("response.in_progress", {"response": started}),
    ]
    for index, item in enumerate(payload["output"]):
        typed.extend(_output_item_events(index, item))
    typed.append(("response.completed", {"response": payload}))
    return [
        _event(name, {"type": name, "sequence_number": number, **data})
        for number, (name, data) in enumerate(typed)
    ]


# --------------------------------------------------------------------- Anthropic Messages


def _block_events(index: int, block: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    def delta(body: dict[str, Any]) -> dict[str, Any]:
        return {"type": "content_block_delta", "index": index, "delta": body}

    kind = block["type"]
    if kind == "tool_use":
        yield {
            "type": "content_block_start",
            "index": index,
            "content_block": {**block, "input": {}},
        }
        given = block["input"]
        raw = given if isinstance(given, str) else json.dumps(given, ensure_ascii=False)
        for piece in pieces(raw):
            yield delta({"type": "input_json_delta", "partial_json": piece})
    elif kind == "thinking":
        empty = {**block, "thinking": "", "signature": ""}
        yield {"type": "content_block_start", "index": index, "content_block": empty}
        for piece in pieces(block["thinking"]):
            yield delta({"type": "thinking_delta", "thinking": piece})
        yield delta({"type": "signature_delta", "signature": block["signature"]})
    else:
        yield {
            "type": "content_block_start",
            "index": index,
            "content_block": {**block, "text": ""},
        }
        for piece in pieces(block["text"]):
            yield delta({"type": "text_delta", "text": piece})
    yield {"type": "content_block_stop", "index": index}


def messages_events(payload: Mapping[str, Any]) -> list[SseEvent]:
    """The events of a ``message`` body: ``message_start`` (the input tokens), a ``ping``,
    each block's start, deltas and stop, ``message_delta`` (stop reason, output tokens) and
    ``message_stop``."""
    usage = payload["usage"]
    start = {
        **payload,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 0},
    }
    typed: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "ping"},
    ]
    for index, block in enumerate(payload["content"]):
        typed.extend(_block_events(index, block))
    typed.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": payload["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    typed.append({"type": "message_stop"})
    return [_event(data["type"], data) for data in typed]
