"""Requests: the three protocols' bodies normalized into the :class:`Conversation` rules see."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from aiohttp import web

from holodeck_core.testing.rules import RouteName


def request_key(route: str, user_text: str) -> str:
    """The request key of /_stats: sha256 of route + last user message text, first 16 hex."""
    return hashlib.sha256(f"{route}\n{user_text}".encode()).hexdigest()[:16]


def count_tokens(text: str) -> int:
    """Deterministic token count: whitespace-separated words."""
    return len(text.split())


class BadRequest(Exception):
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


def text_of(content: Any) -> str:
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


def objects(value: Any, field_name: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise BadRequest(f"'{field_name}' must be a list")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise BadRequest(f"'{field_name}[{i}]' must be an object")
    return cast("list[dict[str, Any]]", value)


def _top_logprobs(body: Mapping[str, Any]) -> int:
    value = body.get("top_logprobs")
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 20:
        raise BadRequest("'top_logprobs' must be an integer between 0 and 20")
    return value


def parse_chat(body: Mapping[str, Any]) -> Conversation:
    conv = Conversation(route="chat", model=str(body.get("model") or "loopback-gpt"))
    if "messages" not in body:
        raise BadRequest("missing required parameter: 'messages'")
    messages = objects(body["messages"], "messages")
    if not messages:
        raise BadRequest("'messages' must not be empty")
    results = _ToolResults()
    system: list[str] = []
    for index, msg in enumerate(messages):
        role = msg.get("role")
        text = text_of(msg.get("content"))
        conv.prompt_texts.append(text)
        if role in ("tool", "function"):
            results.add(text)
            continue
        results.other()
        if role in ("system", "developer"):
            system.append(text)
        elif role == "user":
            conv.user_text = text
        calls = msg.get("tool_calls") or []
        if not isinstance(calls, list):
            raise BadRequest(f"'messages[{index}].tool_calls' must be a list")
        for call in calls:
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                fn = call["function"]
                conv.prompt_texts.append(f"{fn.get('name', '')} {fn.get('arguments', '')}")
    conv.system = "\n".join(system)
    conv.tool_result = messages[-1].get("role") in ("tool", "function")
    _set_results(conv, results)
    conv.logprobs_requested = bool(body.get("logprobs"))
    conv.top_logprobs = _top_logprobs(body)
    return conv


def parse_messages(body: Mapping[str, Any]) -> Conversation:
    conv = Conversation(route="messages", model=str(body.get("model") or "loopback-claude"))
    if "messages" not in body:
        raise BadRequest("messages: field required")
    messages = objects(body["messages"], "messages")
    if not messages:
        raise BadRequest("messages: at least one message is required")
    conv.system = text_of(body.get("system"))
    conv.prompt_texts.append(conv.system)
    results = _ToolResults()
    for msg in messages:
        role = msg.get("role")
        content = msg.get("content")
        blocks: list[Any] = content if isinstance(content, list) else []
        text = content if isinstance(content, str) else text_of(blocks)
        conv.prompt_texts.append(text)
        tool_blocks = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        for block in tool_blocks:
            result = text_of(block.get("content"))
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


def parse_responses(
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
            text = output if isinstance(output, str) else text_of(output)
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
        text = text_of(item.get("content"))
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


async def read_body(request: web.Request) -> dict[str, Any]:
    try:
        data = await request.json()
    except ValueError:
        raise BadRequest("the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise BadRequest("the request body must be a JSON object")
    return data
