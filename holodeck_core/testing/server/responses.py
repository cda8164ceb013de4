"""Responses: the protocol bodies (OpenAI Chat and Responses, Anthropic Messages) and errors."""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from holodeck_core.testing.server.planning import Plan
from holodeck_core.testing.server.requests import Conversation, count_tokens

SYSTEM_FINGERPRINT = "fp_holodeck_loopback"
MODEL_IDS = ("loopback-gpt", "loopback-judge", "loopback-claude")

_TOKEN_RE = re.compile(r"\s*(?:[0-9]{1,3}|[A-Za-z]+|[^\sA-Za-z0-9])|\s+")
_CHOSEN_NUMBER_P = 0.78
_OTHER_TOKEN_P = 0.99


def _lp_entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


def logprobs_content(text: str, spec: bool | dict[str, float], top_k: int) -> list[dict[str, Any]]:
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


def hid(*parts: object) -> str:
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:24]


_OPENAI_ERRORS = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "not_found"),
    409: ("invalid_request_error", "conflict"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", "internal_error"),
    503: ("server_error", "service_unavailable"),
}
_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    409: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
}


def echo_key(message: str, headers: Mapping[str, str]) -> str:
    """``{api_key}`` / ``{api_key_masked}`` in an injected error message → the request's key."""
    auth = headers.get("Authorization", "")
    key = auth.removeprefix("Bearer ").strip() or headers.get("x-api-key", "")
    key = key or headers.get("api-key", "")
    masked = f"{key[:8]}{'*' * max(len(key) - 12, 0)}{key[-4:]}"
    return message.replace("{api_key}", key).replace("{api_key_masked}", masked)


def error_body(route: str, status: int, message: str) -> dict[str, Any]:
    """The protocol's error body: Anthropic's on the messages route, else OpenAI's."""
    if route == "messages":
        etype = _ANTHROPIC_ERRORS.get(status, "api_error")
        return {"type": "error", "error": {"type": etype, "message": message}}
    otype, code = _OPENAI_ERRORS.get(status, ("server_error", None))
    return {"error": {"message": message, "type": otype, "code": code, "param": None}}


def error_response(
    route: str, status: int, message: str, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.json_response(error_body(route, status, message), status=status, headers=headers)


def chat_body(conv: Conversation, plan: Plan, key: str, call_no: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": plan.content, "refusal": None}
    if plan.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{hid(key, call_no, i)}",
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for i, c in enumerate(plan.tool_calls)
        ]
    logprobs: dict[str, Any] | None = None
    if plan.content is not None and plan.logprobs and conv.logprobs_requested:
        logprobs = {
            "content": logprobs_content(plan.content, plan.logprobs, conv.top_logprobs),
            "refusal": None,
        }
    prompt, completion = _usage(conv, plan)
    return {
        "id": f"chatcmpl-{hid(key, call_no, 'chat')}",
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


def _usage(conv: Conversation, plan: Plan) -> tuple[int, int]:
    """The prompt and completion tokens reported: counted, unless the rule's ``usage`` says."""
    prompt, completion = conv.prompt_tokens, _completion_tokens(plan)
    if plan.usage is not None:
        if plan.usage.prompt_tokens is not None:
            prompt = plan.usage.prompt_tokens
        if plan.usage.completion_tokens is not None:
            completion = plan.usage.completion_tokens
    return prompt, completion


def _completion_tokens(plan: Plan) -> int:
    thinking = count_tokens(plan.thinking or "")
    if plan.tool_calls:
        return thinking + sum(count_tokens(f"{c.name} {c.arguments}") for c in plan.tool_calls)
    return thinking + count_tokens(plan.content or "")


def responses_output(
    conv: Conversation, plan: Plan, key: str, call_no: int
) -> list[dict[str, Any]]:
    if plan.tool_calls:
        return [
            {
                "type": "function_call",
                "id": f"fc_{hid(key, call_no, i)}",
                "call_id": f"call_{hid(key, call_no, i, 'call')}",
                "name": c.name,
                "arguments": c.arguments,
                "status": "completed",
            }
            for i, c in enumerate(plan.tool_calls)
        ]
    text = plan.content or ""
    logprobs: list[dict[str, Any]] = []
    if plan.logprobs and conv.logprobs_requested:
        logprobs = logprobs_content(text, plan.logprobs, conv.top_logprobs)
    return [
        {
            "type": "message",
            "id": f"msg_{hid(key, call_no, 'msg')}",
            "status": "completed",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs}
            ],
        }
    ]


def responses_body(
    body: Mapping[str, Any],
    conv: Conversation,
    plan: Plan,
    response_id: str,
    output: list[dict[str, Any]],
) -> dict[str, Any]:
    prompt, completion = _usage(conv, plan)
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


def messages_body(conv: Conversation, plan: Plan, key: str, call_no: int) -> dict[str, Any]:
    content: list[dict[str, Any]]
    if plan.tool_calls:
        content = [
            {
                "type": "tool_use",
                "id": f"toolu_{hid(key, call_no, i)}",
                "name": c.name,
                "input": c.input,
            }
            for i, c in enumerate(plan.tool_calls)
        ]
    else:
        content = [{"type": "text", "text": plan.content or ""}]
    if plan.thinking is not None:
        signature = hid(key, call_no, "signature")
        content.insert(0, {"type": "thinking", "thinking": plan.thinking, "signature": signature})
    return {
        "id": f"msg_{hid(key, call_no, 'messages')}",
        "type": "message",
        "role": "assistant",
        "model": conv.model,
        "content": content,
        "stop_reason": "tool_use" if plan.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": _usage(conv, plan)[0],
            "output_tokens": _usage(conv, plan)[1],
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def model_object(model_id: str) -> dict[str, Any]:
    return {
        "id": model_id,
        "object": "model",
        "created": 1_700_000_000,
        "owned_by": "holodeck",
        "type": "model",
        "display_name": model_id,
        "created_at": "2023-11-14T22:13:20Z",
    }
