"""The recorded requests of the loopback server (``GET /_requests``) in one normal form, so two
clients' request sets can be compared field by field (bench/holodeck_fidelity.py,
docs/holodeck-fidelity.md).

The form keeps what shapes the model's behaviour and drops what is noise: ids (``call_id``,
``tool_call_id``, item ids and statuses), the arrival order of parallel cases (requests are
sorted by case, then by conversation length), the spacing of tool-call arguments (parsed).
Messages of the three protocols share one shape, ``{"role", "text"}`` or ``{"role":
"assistant", "tool_calls": [{"name", "arguments"}]}``; the **route**, the path and the name of
the token-limit field are kept beside them, so a Chat Completions request and a Responses
request that say the same thing are never equal: they differ in ``route``, ``path`` and
``token_limit_field`` and only there.

A request is an **agent** request when its first user message is a test case's input (turn
inputs included; its case is that input's index), an **embeddings** request by its route, and
**other** otherwise (judges, context summaries)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

KINDS = ("agent", "embeddings", "other")
_TOKEN_LIMITS = ("max_tokens", "max_output_tokens", "max_completion_tokens")
_CONSUMED = {
    "model",
    "messages",
    "input",
    "instructions",
    "system",
    "tools",
    "temperature",
    "top_p",
    "response_format",
    "text",
    *_TOKEN_LIMITS,
}
_NOISE = {"stream", "user", "metadata"}
_REMINDER = "<system-reminder>"
_CLI_VARYING = (
    (re.compile(r"(cc_version=\d+\.\d+\.\d+)\.[0-9a-f]+"), r"\1.<hash>"),
    (re.compile(r"\bcch=[0-9a-f]+"), "cch=<hash>"),
    (re.compile(r"(Today's date is )\d{4}-\d{2}-\d{2}"), r"\1<date>"),
)
"""What the Claude Code CLI's requests carry that varies between two runs of one case: the
billing header's hashes (of the request; its CLI version is kept) and today's date in a
system reminder. Its session and device ids are in ``metadata``, dropped."""
_SESSION = re.compile(r"^<session>\n(.*)\n</session>$", re.S)
"""The CLI's title-generation request: the case input inside ``<session>`` tags."""


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _text(content: Any) -> str:
    """The text of a message content: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [_text(p.get("text", p.get("content"))) for p in content if isinstance(p, dict)]
        return "\n".join(p for p in parts if p)
    return str(content)


def _call(name: Any, arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": _json(arguments)}


def _append_calls(messages: list[dict[str, Any]], calls: list[dict[str, Any]]) -> None:
    """Consecutive tool calls are one assistant message (as Chat Completions sends them)."""
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant" and "tool_calls" in last:
        last["tool_calls"].extend(calls)
    else:
        messages.append({"role": "assistant", "tool_calls": calls})


def _chat_messages(body: Mapping[str, Any]) -> tuple[str | None, list[dict[str, Any]]]:
    system: list[str] = []
    messages: list[dict[str, Any]] = []
    for message in body.get("messages") or []:
        role, text = message.get("role"), _text(message.get("content"))
        if role in ("system", "developer"):
            system.append(text)
            continue
        if text or not message.get("tool_calls"):
            messages.append({"role": role, "text": text})
        calls = [
            _call(c["function"]["name"], c["function"].get("arguments"))
            for c in message.get("tool_calls") or []
        ]
        if calls:
            _append_calls(messages, calls)
    return ("\n\n".join(system) if system else None), messages


def _responses_messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else list(raw or [])
    messages: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call":
            _append_calls(messages, [_call(item.get("name"), item.get("arguments"))])
        elif kind == "function_call_output":
            messages.append({"role": "tool", "text": _text(item.get("output"))})
        elif kind == "message":
            messages.append({"role": item.get("role"), "text": _text(item.get("content"))})
        else:
            messages.append({"role": kind, "item": item})
    return messages


def _stable(text: str) -> str:
    """A Claude Code CLI text with what varies per request or per day written as a mark."""
    for pattern, mark in _CLI_VARYING:
        text = pattern.sub(mark, text)
    return text


def _messages_messages(body: Mapping[str, Any]) -> tuple[str | None, list[dict[str, Any]]]:
    """Messages API; the Claude Code CLI's ``<system-reminder>`` blocks of a user turn are
    messages of their own (role ``reminder``), so the case input stays the user's text."""
    system = body.get("system")
    messages: list[dict[str, Any]] = []
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks or []:
            kind = block.get("type")
            if kind == "tool_use":
                _append_calls(messages, [_call(block.get("name"), block.get("input"))])
            elif kind == "tool_result":
                messages.append({"role": "tool", "text": _text(block.get("content"))})
            else:
                text = _stable(_text(block.get("text")))
                reminder = text.startswith(_REMINDER) and message.get("role") == "user"
                messages.append(
                    {"role": "reminder" if reminder else message.get("role"), "text": text}
                )
    return (_stable(_text(system)) if system else None), messages


def _tools(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    tools = body.get("tools")
    if not tools:
        return None
    out = []
    for tool in tools:
        spec = tool.get("function", tool)  # chat nests it; responses and messages do not
        out.append(
            {
                "name": spec.get("name"),
                "description": spec.get("description"),
                "parameters": spec.get("parameters", spec.get("input_schema")),
                "strict": spec.get("strict"),
            }
        )
    return sorted(out, key=lambda t: str(t["name"]))


def _response_format(body: Mapping[str, Any]) -> Any:
    text = body.get("text")
    if isinstance(text, Mapping) and "format" in text:
        return text["format"]  # responses: {type, name, schema, strict} flat
    fmt = body.get("response_format")
    if isinstance(fmt, Mapping) and isinstance(fmt.get("json_schema"), Mapping):
        return {"type": fmt.get("type"), **fmt["json_schema"]}  # chat nests the schema
    return fmt


def normalise(entry: Mapping[str, Any]) -> dict[str, Any]:
    """One recorded request (``{"route", "path", "body"}``) in the normal form."""
    route, body = entry["route"], entry["body"]
    out: dict[str, Any] = {"route": route, "path": entry["path"], "model": body.get("model")}
    if route == "embeddings":
        raw = body.get("input")
        out["inputs"] = [raw] if isinstance(raw, str) else raw
        out["extra"] = {k: v for k, v in body.items() if k not in {"model", "input"} | _NOISE}
        return out
    if route == "chat":
        instructions, messages = _chat_messages(body)
    elif route == "messages":
        instructions, messages = _messages_messages(body)
        out["stream"] = body.get("stream", False)  # the CLI streams, our direct loop does not
    else:
        instructions, messages = body.get("instructions"), _responses_messages(body)
    limit = next((k for k in _TOKEN_LIMITS if k in body), None)
    out.update(
        instructions=instructions,
        messages=messages,
        tools=_tools(body),
        temperature=body.get("temperature"),
        top_p=body.get("top_p"),
        max_tokens=body.get(limit) if limit else None,
        token_limit_field=limit,
        response_format=_response_format(body),
        extra={k: v for k, v in body.items() if k not in _CONSUMED | _NOISE},
    )
    return out


def _first_user(request: Mapping[str, Any]) -> str | None:
    """The first user text, unwrapped from the ``<session>`` tags of a CLI title request."""
    for message in request.get("messages") or []:
        if message["role"] == "user":
            text = str(message.get("text", "")).strip()
            session = _SESSION.match(text)
            return session.group(1).strip() if session else text
    return None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def request_set(
    recorded: Iterable[Mapping[str, Any]], inputs: Sequence[Sequence[str]]
) -> dict[str, Any]:
    """Every recorded request, normalised and grouped by kind; ``inputs`` holds each case's
    inputs (its turns'); agent requests carry their ``case`` (the index of the case whose
    input is their first user message) and are sorted by it."""
    index = {
        text.strip(): case for case, texts in reversed(list(enumerate(inputs))) for text in texts
    }
    groups: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for entry in recorded:
        request = normalise(entry)
        case = index.get(_first_user(request) or "") if entry["route"] != "embeddings" else None
        if entry["route"] == "embeddings":
            groups["embeddings"].append(request)
        elif case is not None:
            groups["agent"].append({"case": case, **request})
        else:
            groups["other"].append(request)

    def order(r: dict[str, Any]) -> tuple[int, int, str]:
        return (r.get("case", -1), len(r.get("messages") or r.get("inputs") or []), _canonical(r))

    return {kind: sorted(requests, key=order) for kind, requests in groups.items()}


def differing_fields(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> set[str]:
    """``kind.field`` for every field where two request sets differ (``kind.count`` when they
    hold a different number of requests of that kind; the requests are paired in order)."""
    found: set[str] = set()
    for kind in KINDS:
        a, b = list(ours.get(kind) or []), list(theirs.get(kind) or [])
        if len(a) != len(b):
            found.add(f"{kind}.count")
        for x, y in zip(a, b, strict=False):
            found |= {f"{kind}.{k}" for k in x.keys() | y.keys() if x.get(k) != y.get(k)}
    return found
