"""The loopback model server: a scripted fake of the OpenAI and Anthropic HTTP APIs.

It is a real aiohttp HTTP server, bound to 127.0.0.1 only, that the official ``openai`` and
``anthropic`` SDK clients talk to unchanged (``base_url`` pointing at it). Tests, benchmarks and
the demo all use it (DESIGN §3.9). Run it with ``holodeck model-server --port P --script
RULES.yaml [--latency S]`` or in-process with :func:`holodeck_core.testing.run_model_server`.

Routes
------
- ``POST /v1/chat/completions`` (also ``/chat/completions``, ``/openai/v1/chat/completions``
  and Azure's ``/openai/deployments/{deployment}/chat/completions?api-version=…``)
- ``POST /v1/responses`` (also ``/responses``, ``/openai/responses``, ``/openai/v1/responses``);
  ``previous_response_id`` continues a stored conversation
- ``POST /v1/messages`` (also ``/messages``): Anthropic Messages
- ``GET /v1/models``, ``GET /v1/models/{id}``: a small list both SDKs can parse
- ``GET /_stats``, ``POST /_reset``, ``GET /_health``

Streaming is not supported: ``stream: true`` gets a 400 that says so.

Rules file (DESIGN §6.12)
-------------------------
::

    default: {reply: "I don't know."}          # a rule without match; a plain string is a reply
    faults:                                      # optional, for every model call
      rate: {"429": 0.2, "500": 0.1}             # kind -> probability per call (sum <= 1)
      first: {"503": 1}                          # kind -> count: first calls of each request key
      retry_after: 1                             # seconds, Retry-After header of a 429
      seed: 7                                    # rate faults are reproducible per seed
      slow_seconds: 30                           # how long a `slow` fault waits
    rules:                                       # first matching rule wins, else `default`
      - name: weather                            # optional; the rule's label in /_stats
        match:                                   # all optional, all must hold
          user: "weather in (\\w+)"              # re.search in the last user message text
          system: "forecaster"                   # re.search in the system prompt
          route: chat                            # chat | messages | responses
          tool_result: false                     # does the last message carry a tool result?
          nth: 1                                 # only the Nth call (1-based) of the request key
        tool_calls: [{name: get_weather, arguments: {city: "$1"}}]  # or arguments_raw: "{bad"
        reply: "It is {tool_result} in $1."      # or json: {...} (serialized as the content)
        logprobs: true                           # or {"8": 0.7, "7": 0.2, "9": 0.1}
        latency: 0.2                             # seconds, added to --latency
        fault: {kind: "429", first: 2}           # or rate: 0.1, or neither (= every call)

Semantics:

- **Request key** = first 16 hex digits of ``sha256(route + "\\n" + last user message text)``
  (see :func:`request_key`); ``route`` is ``chat`` (also for Azure), ``messages`` or
  ``responses``. Calls are numbered per request key from 1 (reset by ``/_reset``); ``nth``,
  ``fault.first`` and the rate generator use that number, so a client's retries and the later
  turns of a tool loop (same last user message) count as calls 2, 3, … of the same key.
- **Last user message**: chat: the last ``user`` message; messages: the last ``user`` message
  that is not only ``tool_result`` blocks; responses: the last ``user`` input item (earlier turns
  come from ``previous_response_id``). Its text joins the text parts of the content.
- **Templates** in ``reply``, in the string values of ``json`` and of tool-call ``arguments``:
  ``$1``..``$9`` are the groups of the ``user`` regex (empty if absent), ``{tool_result}`` is the
  text of the conversation's last tool result, ``{tool_results}`` all results of the last batch
  of tool results joined by newlines. ``arguments_raw`` is sent verbatim (no templates); on the
  messages route a raw string that is not a JSON object is sent as the ``tool_use.input`` string.
- **What a rule answers**: tool calls and a reply/json → the tool calls while the last message
  carries no tool result, the reply once it does (one rule scripts a whole round trip); tool
  calls alone → tool calls on every call (a model that never stops calling tools); a reply
  alone → the reply; neither (e.g. a rule that only injects a fault) → the ``default`` reply.
- **Faults** (rule fault first, then global ``first``, then global ``rate``): ``429`` with a
  ``Retry-After`` header, ``500``/``503`` with the protocol's error body (OpenAI
  ``{"error": {"message", "type", "code", "param"}}``, Anthropic
  ``{"type": "error", "error": {"type", "message"}}``), ``drop`` closes the connection without
  a response, ``malformed`` answers 200 with a truncated (non-JSON) ``application/json`` body
  (the SDKs raise ``json.JSONDecodeError``), ``slow`` waits ``slow_seconds`` and then answers.
  Latency (``--latency`` + the rule's ``latency``) is applied before every answer, faults
  included. A rate fault is decided by ``sha256(seed, scope, request key, call number)``, so the
  same calls fault the same way in every run, whatever the concurrency.
- **Usage**: tokens are whitespace-separated words: prompt = all text of the request (system,
  messages, tool calls and results), completion = the reply (or tool names and arguments).
- **Logprobs** (chat: request ``logprobs: true`` [+ ``top_logprobs``]; responses: ``include``
  ``message.output_text.logprobs``) are given when the rule says ``logprobs``. A number token
  gets probability 0.78 and its neighbours (n±1: 0.08, n±2: 0.02, …) as ``top_logprobs``, so a
  judge reading the score distribution of "8" sees "7" and "9"; a mapping sets the distribution
  of the first token found in it. Other tokens get probability 0.99 and only themselves.

``GET /_stats``::

    {"total_calls": 7,                       # model calls (bad requests are not counted here)
     "by_route": {"chat": 5, "messages": 2},
     "by_path": {"/v1/chat/completions": 5, "/v1/messages": 2},
     "by_rule": {"weather": 2, "1": 3, "default": 2},   # rule name, else index, else "default"
     "by_key": {"3f2a…16 hex": 2, …},        # calls per request key
     "faults": {"429": 2, "drop": 1},        # faults injected per kind
     "peak_concurrency": 5, "in_flight": 0, "bad_requests": 0}
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import re
import signal
import sys
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypedDict, TypeVar, cast

from aiohttp import web

from holodeck_core.testing.rules import (
    Action,
    FaultKind,
    RouteName,
    Rule,
    Rules,
    RulesError,
    RulesInput,
    coerce_rules,
    load_rules,
)

__all__ = [
    "LOOPBACK_HOST",
    "ModelServer",
    "ServerState",
    "Stats",
    "app_state",
    "count_tokens",
    "create_app",
    "main",
    "request_key",
    "run_model_server",
]

LOOPBACK_HOST = "127.0.0.1"
SYSTEM_FINGERPRINT = "fp_holodeck_loopback"
MODEL_IDS = ("loopback-gpt", "loopback-judge", "loopback-claude")
_MAX_STORED_RESPONSES = 10_000
_CLIENT_MAX_SIZE = 64 * 1024 * 1024

_T = TypeVar("_T")


class Stats(TypedDict):
    """The shape of ``GET /_stats`` and :meth:`ModelServer.stats`."""

    total_calls: int
    by_route: dict[str, int]
    by_path: dict[str, int]
    by_rule: dict[str, int]
    by_key: dict[str, int]
    faults: dict[str, int]
    peak_concurrency: int
    in_flight: int
    bad_requests: int


def request_key(route: str, user_text: str) -> str:
    """The request key of /_stats: sha256 of route + last user message text, first 16 hex."""
    return hashlib.sha256(f"{route}\n{user_text}".encode()).hexdigest()[:16]


def count_tokens(text: str) -> int:
    """Deterministic token count: whitespace-separated words."""
    return len(text.split())


def _check_host(host: str) -> str:
    if host in (LOOPBACK_HOST, "localhost"):
        return LOOPBACK_HOST
    raise ValueError(
        f"the loopback model server binds {LOOPBACK_HOST} only; refusing host {host!r}"
    )


# --------------------------------------------------------------------------- requests


class _BadRequest(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass
class Conversation:
    """What the rules see of a request, normalized across the three protocols."""

    route: RouteName
    model: str
    system: str = ""
    user_text: str = ""
    tool_result: bool = False
    """The conversation's last message carries a tool result."""
    last_tool_result: str = ""
    last_batch: list[str] = field(default_factory=list)
    prompt_texts: list[str] = field(default_factory=list)
    logprobs_requested: bool = False
    top_logprobs: int = 0

    @property
    def prompt_tokens(self) -> int:
        return sum(count_tokens(t) for t in self.prompt_texts)


class _ToolResults:
    """Collects tool results in batches (consecutive results form one batch)."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self._open = False

    def add(self, text: str) -> None:
        if self._open:
            self.batches[-1].append(text)
        else:
            self.batches.append([text])
            self._open = True

    def other(self) -> None:
        self._open = False


def _text_of(content: Any) -> str:
    """The text of a message content: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif (
                isinstance(part, dict)
                and isinstance(part.get("text"), str)
                and part.get("type", "text") in ("text", "input_text", "output_text")
            ):
                parts.append(part["text"])
        return "\n".join(parts)
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return str(content["text"])
    return ""


def _objects(value: Any, field_name: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise _BadRequest(f"'{field_name}' must be a list")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise _BadRequest(f"'{field_name}[{i}]' must be an object")
    return cast("list[dict[str, Any]]", value)


def _top_logprobs(body: Mapping[str, Any]) -> int:
    value = body.get("top_logprobs")
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 20:
        raise _BadRequest("'top_logprobs' must be an integer between 0 and 20")
    return value


def _parse_chat(body: Mapping[str, Any]) -> Conversation:
    conv = Conversation(route="chat", model=str(body.get("model") or "loopback-gpt"))
    if "messages" not in body:
        raise _BadRequest("missing required parameter: 'messages'")
    messages = _objects(body["messages"], "messages")
    if not messages:
        raise _BadRequest("'messages' must not be empty")
    results = _ToolResults()
    system: list[str] = []
    for msg in messages:
        role = msg.get("role")
        text = _text_of(msg.get("content"))
        conv.prompt_texts.append(text)
        if role in ("tool", "function"):
            results.add(text)
            continue
        results.other()
        if role in ("system", "developer"):
            system.append(text)
        elif role == "user":
            conv.user_text = text
        for call in msg.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                fn = call["function"]
                conv.prompt_texts.append(f"{fn.get('name', '')} {fn.get('arguments', '')}")
    conv.system = "\n".join(system)
    conv.tool_result = messages[-1].get("role") in ("tool", "function")
    _set_results(conv, results)
    conv.logprobs_requested = bool(body.get("logprobs"))
    conv.top_logprobs = _top_logprobs(body)
    return conv


def _parse_messages(body: Mapping[str, Any]) -> Conversation:
    conv = Conversation(route="messages", model=str(body.get("model") or "loopback-claude"))
    if "messages" not in body:
        raise _BadRequest("messages: field required")
    messages = _objects(body["messages"], "messages")
    if not messages:
        raise _BadRequest("messages: at least one message is required")
    conv.system = _text_of(body.get("system"))
    conv.prompt_texts.append(conv.system)
    results = _ToolResults()
    for msg in messages:
        role = msg.get("role")
        content = msg.get("content")
        blocks: list[Any] = content if isinstance(content, list) else []
        text = content if isinstance(content, str) else _text_of(blocks)
        conv.prompt_texts.append(text)
        tool_blocks = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        for block in tool_blocks:
            result = _text_of(block.get("content"))
            conv.prompt_texts.append(result)
            results.add(result)
        if not tool_blocks:
            results.other()
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                args = json.dumps(block.get("input"), ensure_ascii=False)
                conv.prompt_texts.append(f"{block.get('name', '')} {args}")
        if role == "user":
            only_results = bool(tool_blocks) and len(tool_blocks) == len(blocks)
            if not only_results:
                conv.user_text = text
    last = messages[-1]
    last_content = last.get("content")
    conv.tool_result = (
        last.get("role") == "user"
        and isinstance(last_content, list)
        and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last_content)
    )
    _set_results(conv, results)
    return conv


def _parse_responses(
    body: Mapping[str, Any], items: list[dict[str, Any]], model: str
) -> Conversation:
    conv = Conversation(route="responses", model=model)
    system: list[str] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        system.append(instructions)
        conv.prompt_texts.append(instructions)
    results = _ToolResults()
    for item in items:
        kind = item.get("type")
        if kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else _text_of(output)
            conv.prompt_texts.append(text)
            results.add(text)
            continue
        if kind == "function_call":
            conv.prompt_texts.append(f"{item.get('name', '')} {item.get('arguments', '')}")
            results.other()
            continue
        role = item.get("role")
        if kind not in (None, "message") or role is None:
            continue  # reasoning, item_reference, …: no text for the rules
        results.other()
        text = _text_of(item.get("content"))
        conv.prompt_texts.append(text)
        if role in ("system", "developer"):
            system.append(text)
        elif role == "user":
            conv.user_text = text
    conv.system = "\n".join(system)
    conv.tool_result = bool(items) and items[-1].get("type") == "function_call_output"
    _set_results(conv, results)
    include = body.get("include") or []
    conv.logprobs_requested = isinstance(include, list) and (
        "message.output_text.logprobs" in include
    )
    conv.top_logprobs = _top_logprobs(body)
    return conv


def _set_results(conv: Conversation, results: _ToolResults) -> None:
    if results.batches:
        conv.last_batch = list(results.batches[-1])
        conv.last_tool_result = results.batches[-1][-1]


# --------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class _ToolCall:
    name: str
    arguments: str
    input: Any  # for Anthropic's tool_use.input


@dataclass
class _Fault:
    kind: FaultKind
    retry_after: float
    slow_seconds: float
    message: str | None = None


@dataclass
class _Plan:
    rule_index: int | None
    content: str | None
    tool_calls: list[_ToolCall]
    logprobs: bool | dict[str, float]
    latency: float
    fault: _Fault | None


_TEMPLATE = re.compile(r"\$([1-9])|\{tool_results?\}")


def _render(template: str, groups: tuple[str | None, ...], conv: Conversation) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(1):
            i = int(m.group(1))
            return (groups[i - 1] or "") if i <= len(groups) else ""
        if m.group(0) == "{tool_result}":
            return conv.last_tool_result
        return "\n".join(conv.last_batch)

    return _TEMPLATE.sub(sub, template)


def _render_json(value: Any, groups: tuple[str | None, ...], conv: Conversation) -> Any:
    if isinstance(value, str):
        return _render(value, groups, conv)
    if isinstance(value, list):
        return [_render_json(v, groups, conv) for v in value]
    if isinstance(value, dict):
        return {k: _render_json(v, groups, conv) for k, v in value.items()}
    return value


def _match_rule(rule: Rule, conv: Conversation, call_no: int) -> tuple[str | None, ...] | None:
    m = rule.match
    if m.route is not None and m.route != conv.route:
        return None
    if m.tool_result is not None and m.tool_result != conv.tool_result:
        return None
    if m.nth is not None and m.nth != call_no:
        return None
    if m.system is not None and re.search(m.system, conv.system) is None:
        return None
    if m.user is not None:
        found = re.search(m.user, conv.user_text)
        if found is None:
            return None
        return found.groups()
    return ()


def _uniform(seed: int, scope: str, key: str, call_no: int) -> float:
    digest = hashlib.sha256(f"{seed}|{scope}|{key}|{call_no}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def _decide_fault(
    rules: Rules, governing: Action, scope: str, key: str, call_no: int
) -> _Fault | None:
    g = rules.faults
    f = governing.fault
    if f is not None:
        if f.first is not None:
            hit = call_no <= f.first
        elif f.rate is not None:
            hit = _uniform(g.seed, scope, key, call_no) < f.rate
        else:
            hit = True
        if hit:
            return _Fault(
                f.kind,
                g.retry_after if f.retry_after is None else f.retry_after,
                g.slow_seconds if f.slow_seconds is None else f.slow_seconds,
                f.message,
            )
    upto = 0
    for kind, count in g.first.items():
        upto += count
        if call_no <= upto:
            return _Fault(kind, g.retry_after, g.slow_seconds)
    if g.rate:
        u = _uniform(g.seed, "global", key, call_no)
        acc = 0.0
        for kind, p in g.rate.items():
            acc += p
            if u < acc:
                return _Fault(kind, g.retry_after, g.slow_seconds)
    return None


def _tool_calls(
    action: Action, groups: tuple[str | None, ...], conv: Conversation
) -> list[_ToolCall]:
    calls: list[_ToolCall] = []
    for spec in action.tool_calls:
        if spec.arguments_raw is not None:
            raw = spec.arguments_raw
            try:
                parsed: Any = json.loads(raw)
            except ValueError:
                parsed = None
            calls.append(_ToolCall(spec.name, raw, parsed if isinstance(parsed, dict) else raw))
        else:
            args = _render_json(spec.arguments or {}, groups, conv)
            calls.append(_ToolCall(spec.name, json.dumps(args, ensure_ascii=False), args))
    return calls


def _answer(
    action: Action, groups: tuple[str | None, ...], conv: Conversation
) -> tuple[str | None, list[_ToolCall]] | None:
    if action.tool_calls and (not conv.tool_result or not action.has_reply):
        return None, _tool_calls(action, groups, conv)
    if action.has_json:
        return json.dumps(_render_json(action.json_, groups, conv), ensure_ascii=False), []
    if action.reply is not None:
        return _render(action.reply, groups, conv), []
    return None


def _plan(rules: Rules, conv: Conversation, key: str, call_no: int, extra_latency: float) -> _Plan:
    index: int | None = None
    groups: tuple[str | None, ...] = ()
    for i, rule in enumerate(rules.rules):
        found = _match_rule(rule, conv, call_no)
        if found is not None:
            index, groups = i, found
            break
    governing: Action = rules.default if index is None else rules.rules[index]
    answer = _answer(governing, groups, conv) or _answer(rules.default, groups, conv)
    content, calls = answer if answer is not None else ("", [])
    scope = "default" if index is None else f"rule{index}"
    return _Plan(
        rule_index=index,
        content=content,
        tool_calls=calls,
        logprobs=governing.logprobs,
        latency=extra_latency + governing.latency,
        fault=_decide_fault(rules, governing, scope, key, call_no),
    )


# --------------------------------------------------------------------------- logprobs

_TOKEN_RE = re.compile(r"\s*(?:[0-9]{1,3}|[A-Za-z]+|[^\sA-Za-z0-9])|\s+")
_CHOSEN_NUMBER_P = 0.78
_OTHER_TOKEN_P = 0.99


def _lp_entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


def _logprobs_content(text: str, spec: bool | dict[str, float], top_k: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    mapping = spec if isinstance(spec, dict) else None
    mapped = False
    for token in _TOKEN_RE.findall(text):
        core = token.strip()
        lead = token[: len(token) - len(token.lstrip())]
        alts: list[tuple[str, float]]
        if mapping is not None and not mapped and core in mapping:
            mapped = True
            chosen = math.log(mapping[core])
            ranked = sorted(mapping.items(), key=lambda kv: (-kv[1], kv[0]))
            alts = [(lead + t, math.log(p)) for t, p in ranked]
        elif core.isascii() and core.isdigit():
            value = int(core)
            chosen = math.log(_CHOSEN_NUMBER_P)
            alts = [(token, chosen)]
            distance = 1
            while len(alts) < max(top_k, 1) and distance <= 20:
                p = 0.08 * 0.25 ** (distance - 1)
                for neighbour in (value - distance, value + distance):
                    if neighbour >= 0:
                        alts.append((lead + str(neighbour), math.log(p)))
                distance += 1
        else:
            chosen = math.log(_OTHER_TOKEN_P)
            alts = [(token, chosen)]
        entry = _lp_entry(token, chosen)
        entry["top_logprobs"] = [_lp_entry(t, lp) for t, lp in alts[:top_k]]
        out.append(entry)
    return out


# --------------------------------------------------------------------------- state


class ServerState:
    """Rules, counters and stored Responses conversations; touched only on the server loop."""

    def __init__(self, rules: Rules, latency: float = 0.0) -> None:
        if latency < 0:
            raise ValueError("latency must be >= 0")
        self.rules = rules
        self.latency = latency
        self.in_flight = 0
        self.responses: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self.reset()

    def reset(self) -> None:
        self.total_calls = 0
        self.bad_requests = 0
        self.by_route: Counter[str] = Counter()
        self.by_path: Counter[str] = Counter()
        self.by_rule: Counter[str] = Counter()
        self.by_key: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()
        self.peak_concurrency = self.in_flight

    def snapshot(self) -> Stats:
        return Stats(
            total_calls=self.total_calls,
            by_route=dict(self.by_route),
            by_path=dict(self.by_path),
            by_rule=dict(self.by_rule),
            by_key=dict(self.by_key),
            faults=dict(self.faults),
            peak_concurrency=self.peak_concurrency,
            in_flight=self.in_flight,
            bad_requests=self.bad_requests,
        )

    def store_response(self, response_id: str, items: list[dict[str, Any]]) -> None:
        self.responses[response_id] = items
        self.responses.move_to_end(response_id)
        while len(self.responses) > _MAX_STORED_RESPONSES:
            self.responses.popitem(last=False)


_STATE_KEY = web.AppKey("holodeck_model_server_state", ServerState)


# --------------------------------------------------------------------------- responses


def _hid(*parts: object) -> str:
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:24]


_OPENAI_ERRORS = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", "internal_error"),
    503: ("server_error", "service_unavailable"),
}
_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
}


def _echo_key(message: str, request: web.Request) -> str:
    """``{api_key}`` / ``{api_key_masked}`` in an injected error message → the request's key."""
    auth = request.headers.get("Authorization", "")
    key = auth.removeprefix("Bearer ").strip() or request.headers.get("x-api-key", "")
    key = key or request.headers.get("api-key", "")
    masked = f"{key[:8]}{'*' * max(len(key) - 12, 0)}{key[-4:]}"
    return message.replace("{api_key}", key).replace("{api_key_masked}", masked)


def _error(
    route: str, status: int, message: str, headers: Mapping[str, str] | None = None
) -> web.Response:
    body: dict[str, Any]
    if route == "messages":
        etype = _ANTHROPIC_ERRORS.get(status, "api_error")
        body = {"type": "error", "error": {"type": etype, "message": message}}
    else:
        otype, code = _OPENAI_ERRORS.get(status, ("server_error", None))
        body = {"error": {"message": message, "type": otype, "code": code, "param": None}}
    return web.json_response(body, status=status, headers=headers)


def _chat_body(conv: Conversation, plan: _Plan, key: str, call_no: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": plan.content, "refusal": None}
    if plan.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{_hid(key, call_no, i)}",
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for i, c in enumerate(plan.tool_calls)
        ]
    logprobs: dict[str, Any] | None = None
    if plan.content is not None and plan.logprobs and conv.logprobs_requested:
        logprobs = {
            "content": _logprobs_content(plan.content, plan.logprobs, conv.top_logprobs),
            "refusal": None,
        }
    prompt, completion = conv.prompt_tokens, _completion_tokens(plan)
    return {
        "id": f"chatcmpl-{_hid(key, call_no, 'chat')}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": conv.model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "service_tier": "default",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": logprobs,
                "finish_reason": "tool_calls" if plan.tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        },
    }


def _completion_tokens(plan: _Plan) -> int:
    if plan.tool_calls:
        return sum(count_tokens(f"{c.name} {c.arguments}") for c in plan.tool_calls)
    return count_tokens(plan.content or "")


def _responses_output(
    conv: Conversation, plan: _Plan, key: str, call_no: int
) -> list[dict[str, Any]]:
    if plan.tool_calls:
        return [
            {
                "type": "function_call",
                "id": f"fc_{_hid(key, call_no, i)}",
                "call_id": f"call_{_hid(key, call_no, i, 'call')}",
                "name": c.name,
                "arguments": c.arguments,
                "status": "completed",
            }
            for i, c in enumerate(plan.tool_calls)
        ]
    text = plan.content or ""
    logprobs: list[dict[str, Any]] = []
    if plan.logprobs and conv.logprobs_requested:
        logprobs = _logprobs_content(text, plan.logprobs, conv.top_logprobs)
    return [
        {
            "type": "message",
            "id": f"msg_{_hid(key, call_no, 'msg')}",
            "status": "completed",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs}
            ],
        }
    ]


def _responses_body(
    body: Mapping[str, Any],
    conv: Conversation,
    plan: _Plan,
    response_id: str,
    output: list[dict[str, Any]],
) -> dict[str, Any]:
    prompt, completion = conv.prompt_tokens, _completion_tokens(plan)
    text = body.get("text")
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": conv.model,
        "output": output,
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        },
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "metadata": body.get("metadata") or {},
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "temperature": body.get("temperature", 1.0),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "text": text if isinstance(text, dict) else {"format": {"type": "text"}},
        "store": body.get("store", True),
    }


def _messages_body(conv: Conversation, plan: _Plan, key: str, call_no: int) -> dict[str, Any]:
    content: list[dict[str, Any]]
    if plan.tool_calls:
        content = [
            {
                "type": "tool_use",
                "id": f"toolu_{_hid(key, call_no, i)}",
                "name": c.name,
                "input": c.input,
            }
            for i, c in enumerate(plan.tool_calls)
        ]
    else:
        content = [{"type": "text", "text": plan.content or ""}]
    return {
        "id": f"msg_{_hid(key, call_no, 'messages')}",
        "type": "message",
        "role": "assistant",
        "model": conv.model,
        "content": content,
        "stop_reason": "tool_use" if plan.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": conv.prompt_tokens,
            "output_tokens": _completion_tokens(plan),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


# --------------------------------------------------------------------------- handlers


async def _read_body(request: web.Request) -> dict[str, Any]:
    try:
        data = await request.json()
    except ValueError:
        raise _BadRequest("the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise _BadRequest("the request body must be a JSON object")
    if data.get("stream"):
        raise _BadRequest(
            "stream=true is not supported by the holodeck loopback model server; "
            "call the API without streaming"
        )
    return data


def _responses_items(
    state: ServerState, body: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(prior conversation from previous_response_id, this request's input items)."""
    prior: list[dict[str, Any]] = []
    previous = body.get("previous_response_id")
    if previous is not None:
        if not isinstance(previous, str) or previous not in state.responses:
            raise _BadRequest(f"Previous response with id '{previous}' not found.")
        prior = state.responses[previous]
    raw = body.get("input")
    if raw is None:
        if not prior:
            raise _BadRequest("missing required parameter: 'input'")
        new: list[dict[str, Any]] = []
    elif isinstance(raw, str):
        new = [{"type": "message", "role": "user", "content": raw}]
    else:
        new = _objects(raw, "input")
    return prior, new


async def _model_call(request: web.Request, route: RouteName) -> web.StreamResponse:
    state = request.app[_STATE_KEY]
    state.in_flight += 1
    state.peak_concurrency = max(state.peak_concurrency, state.in_flight)
    try:
        return await _model_call_inner(request, state, route)
    except _BadRequest as exc:
        state.bad_requests += 1
        return _error(route, exc.status, exc.message)
    finally:
        state.in_flight -= 1


async def _model_call_inner(
    request: web.Request, state: ServerState, route: RouteName
) -> web.StreamResponse:
    deployment = request.match_info.get("deployment")
    if deployment is not None and not request.query.get("api-version"):
        raise _BadRequest("missing required query parameter 'api-version' (Azure OpenAI)")
    body = await _read_body(request)
    items: list[dict[str, Any]] = []
    if route == "chat":
        conv = _parse_chat(body)
    elif route == "messages":
        conv = _parse_messages(body)
    else:
        prior, new = _responses_items(state, body)
        items = prior + new
        conv = _parse_responses(body, items, str(body.get("model") or "loopback-gpt"))
    if deployment is not None:
        conv.model = deployment

    rules = state.rules
    key = request_key(route, conv.user_text)
    state.by_key[key] += 1
    call_no = state.by_key[key]
    state.total_calls += 1
    state.by_route[route] += 1
    state.by_path[request.path] += 1
    plan = _plan(rules, conv, key, call_no, state.latency)
    state.by_rule[rules.rule_label(plan.rule_index)] += 1
    if plan.fault is not None:
        state.faults[plan.fault.kind] += 1

    if plan.latency > 0:
        await asyncio.sleep(plan.latency)

    fault = plan.fault
    if fault is not None:
        if fault.kind == "429":
            return _error(
                route,
                429,
                "Rate limit reached (injected by the holodeck loopback model server).",
                headers={"Retry-After": f"{fault.retry_after:g}"},
            )
        if fault.kind in ("400", "401", "500", "503"):
            status = int(fault.kind)
            message = f"Injected {status} error from the holodeck loopback model server."
            if fault.message is not None:
                message = _echo_key(fault.message, request)
            return _error(route, status, message)
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
        payload = _chat_body(conv, plan, key, call_no)
    elif route == "messages":
        payload = _messages_body(conv, plan, key, call_no)
    else:
        response_id = f"resp_{_hid(key, call_no, 'resp')}"
        output = _responses_output(conv, plan, key, call_no)
        state.store_response(response_id, items + output)
        payload = _responses_body(body, conv, plan, response_id, output)

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


def _model_object(model_id: str) -> dict[str, Any]:
    return {
        "id": model_id,
        "object": "model",
        "created": 1_700_000_000,
        "owned_by": "holodeck",
        "type": "model",
        "display_name": model_id,
        "created_at": "2023-11-14T22:13:20Z",
    }


async def _models(request: web.Request) -> web.Response:
    data = [_model_object(m) for m in MODEL_IDS]
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
    return web.json_response(_model_object(request.match_info["model"]))


async def _stats(request: web.Request) -> web.Response:
    return web.json_response(request.app[_STATE_KEY].snapshot())


async def _reset(request: web.Request) -> web.Response:
    request.app[_STATE_KEY].reset()
    return web.json_response({"ok": True})


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _not_found(request: web.Request) -> web.Response:
    route = "messages" if "messages" in request.path else "chat"
    return _error(
        route,
        404,
        f"{request.method} {request.path} is not a route of the holodeck loopback model "
        "server (POST /v1/chat/completions, /v1/responses, /v1/messages, "
        "/openai/deployments/{d}/chat/completions; GET /v1/models, /_stats; POST /_reset)",
    )


def create_app(rules: RulesInput = None, *, latency: float = 0.0) -> web.Application:
    """The aiohttp application; its :class:`ServerState` is ``app_state(app)``."""
    app = web.Application(client_max_size=_CLIENT_MAX_SIZE)
    app[_STATE_KEY] = ServerState(coerce_rules(rules), latency)
    chat, responses, messages = (
        _route_handler("chat"),
        _route_handler("responses"),
        _route_handler("messages"),
    )
    for path in ("/v1/chat/completions", "/chat/completions", "/openai/v1/chat/completions"):
        app.router.add_post(path, chat)
    app.router.add_post("/openai/deployments/{deployment}/chat/completions", chat)
    for path in ("/v1/responses", "/responses", "/openai/responses", "/openai/v1/responses"):
        app.router.add_post(path, responses)
    for path in ("/v1/messages", "/messages"):
        app.router.add_post(path, messages)
    for prefix in ("/v1", "", "/openai", "/openai/v1"):
        app.router.add_get(f"{prefix}/models", _models)
        app.router.add_get(f"{prefix}/models/{{model}}", _model)
    app.router.add_get("/_stats", _stats)
    app.router.add_post("/_reset", _reset)
    app.router.add_get("/_health", _health)
    app.router.add_route("*", "/{tail:.*}", _not_found)
    return app


def app_state(app: web.Application) -> ServerState:
    """The counters and rules of an app made by :func:`create_app`."""
    return app[_STATE_KEY]


async def _start(app: web.Application, port: int, shutdown_timeout: float) -> web.AppRunner:
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


# --------------------------------------------------------------------------- in-process server


class ModelServer:
    """The server running on its own event loop in a background thread.

    Use :func:`run_model_server` (a context manager) or ``with ModelServer(...) as server:``.
    """

    def __init__(
        self,
        rules: RulesInput = None,
        *,
        latency: float = 0.0,
        host: str = LOOPBACK_HOST,
        port: int = 0,
        shutdown_timeout: float = 0.5,
    ) -> None:
        _check_host(host)
        self._app = create_app(rules, latency=latency)
        self._state = self._app[_STATE_KEY]
        self._requested_port = port
        self._shutdown_timeout = shutdown_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    # -- lifecycle
    def start(self) -> ModelServer:
        if self._thread is not None:
            raise RuntimeError("the model server is already started")
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                runner = loop.run_until_complete(
                    _start(self._app, self._requested_port, self._shutdown_timeout)
                )
            except BaseException as exc:
                failure.append(exc)
                loop.close()
                ready.set()
                return
            self._port = int(runner.addresses[0][1])
            self._loop = loop
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(runner.cleanup())
                pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
                for task in pending:
                    task.cancel()
                if pending:
                    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        thread = threading.Thread(target=run, name="holodeck-model-server", daemon=True)
        self._thread = thread
        thread.start()
        if not ready.wait(timeout=30):
            raise RuntimeError("the model server did not start within 30 s")
        if failure:
            self._thread = None
            raise failure[0]
        return self

    def close(self) -> None:
        """Stop the server and its thread (in-flight requests get ``shutdown_timeout``)."""
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=self._shutdown_timeout + 10)

    def __enter__(self) -> ModelServer:
        return self.start() if self._thread is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- addresses
    @property
    def host(self) -> str:
        return LOOPBACK_HOST

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the model server is not started")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (also the Azure endpoint)."""
        return f"http://{LOOPBACK_HOST}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """``base_url`` for ``openai.OpenAI``: ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """``base_url`` for ``anthropic.Anthropic`` (the SDK appends ``/v1/messages``)."""
        return self.url

    @property
    def azure_endpoint(self) -> str:
        """``azure_endpoint`` for ``openai.AzureOpenAI``."""
        return self.url

    # -- control (run on the server's loop, so no locks are needed)
    def _call(self, fn: Callable[[], _T]) -> _T:
        loop = self._loop
        if loop is None:
            raise RuntimeError("the model server is not running")

        async def call() -> _T:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), loop).result(timeout=10)

    def stats(self) -> Stats:
        """The counters of ``GET /_stats`` (also readable after the server is closed)."""
        if self._loop is None:
            return self._state.snapshot()
        return self._call(self._state.snapshot)

    def reset(self) -> None:
        """Clear the counters, like ``POST /_reset``."""
        self._call(self._state.reset)

    @property
    def rules(self) -> Rules:
        return self._state.rules

    def set_rules(self, rules: RulesInput) -> None:
        """Replace the rules (counters are kept; call :meth:`reset` to clear them)."""
        new = coerce_rules(rules)

        def swap() -> None:
            self._state.rules = new

        self._call(swap)


@contextlib.contextmanager
def run_model_server(
    rules: RulesInput = None,
    latency: float = 0.0,
    *,
    port: int = 0,
    host: str = LOOPBACK_HOST,
) -> Iterator[ModelServer]:
    """Run the loopback model server on 127.0.0.1 in a background thread.

    ``rules``: :class:`Rules`, a mapping in the rules-file format, a path to a YAML rules file,
    or None (everything answers "I don't know."). Raises :class:`RulesError` for bad rules and
    ``ValueError`` for a host other than 127.0.0.1.
    """
    server = ModelServer(rules, latency=latency, host=host, port=port)
    server.start()
    try:
        yield server
    finally:
        server.close()


# --------------------------------------------------------------------------- CLI


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="holodeck model-server",
        description=(
            "Run the loopback model server: scripted OpenAI Chat Completions, Responses and "
            "Anthropic Messages endpoints on 127.0.0.1 (see DESIGN §6.12 for the rules format)."
        ),
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind (0 = a free port)")
    parser.add_argument(
        "--script", metavar="RULES.yaml", help='rules file (default: answer "I don\'t know.")'
    )
    parser.add_argument(
        "--latency", type=float, default=0.0, metavar="S", help="seconds added to every reply"
    )
    parser.add_argument(
        "--host", default=LOOPBACK_HOST, help="only 127.0.0.1 (or localhost) is accepted"
    )
    return parser


def _fail(message: str) -> int:
    print(f"holodeck model-server: error: {message}", file=sys.stderr)
    return 2


async def _serve(app: web.Application, port: int) -> int:
    try:
        runner = await _start(app, port, shutdown_timeout=1.0)
    except OSError as exc:
        return _fail(
            f"cannot listen on {LOOPBACK_HOST}:{port} ({exc.strerror or exc}); "
            "choose another --port, or --port 0 for a free one"
        )
    url = f"http://{LOOPBACK_HOST}:{runner.addresses[0][1]}"
    print(f"holodeck model-server listening on {url}", flush=True)
    print(f"  OpenAI base_url: {url}/v1   Anthropic base_url: {url}   stats: {url}/_stats")
    print("  press Ctrl-C to stop", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``holodeck model-server --port P --script RULES.yaml [--latency S]``; returns the exit code.

    Exit code 2 (with a message naming the file, the field and the fix, no traceback) for a
    bad rules file or bad arguments; 0 when stopped with Ctrl-C or SIGTERM.
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed usage or --help already
        return exc.code if isinstance(exc.code, int) else 2
    try:
        _check_host(args.host)
    except ValueError as exc:
        return _fail(str(exc))
    if not 0 <= args.port <= 65535:
        return _fail(f"--port must be between 0 and 65535, got {args.port}")
    if not args.latency >= 0 or math.isinf(args.latency):
        return _fail(f"--latency must be a number of seconds >= 0, got {args.latency}")
    try:
        rules = load_rules(args.script) if args.script else Rules()
    except RulesError as exc:
        return _fail(str(exc))
    app = create_app(rules, latency=args.latency)
    try:
        return asyncio.run(_serve(app, args.port))
    except KeyboardInterrupt:
        return 0
