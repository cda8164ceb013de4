"""Anthropic Messages: ``tool_use`` blocks out, ``tool_result`` blocks back."""

from __future__ import annotations

import json
from typing import Any

import anthropic

from holodeck_core.calls.batch import BatchAPI
from holodeck_core.calls.errors import CallErrorKind, ModelCallError
from holodeck_core.calls.scheduler import endpoint_key
from holodeck_core.defaults import ANTHROPIC_MAX_TOKENS
from holodeck_core.models import LLMProvider, TokenUsage
from holodeck_core.models.outside import checked_counts
from holodeck_core.providers.base import SDKClient, parse_tool_call, sdk_http_client
from holodeck_core.providers.batches import AnthropicBatches
from holodeck_core.providers.messages import Message, ModelCall, ModelReply


class AnthropicClient(SDKClient):
    def __init__(self, model: LLMProvider, api_key: str) -> None:
        client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=model.endpoint,
            max_retries=0,
            http_client=sdk_http_client(anthropic, model.endpoint),
        )
        super().__init__(model, client)

    def request(self, call: ModelCall) -> dict[str, Any]:
        """Messages has no logprobs (the table says so) and no structured-output field: a
        response schema is asked for in the system prompt."""
        system = call.system
        if call.response_schema is not None:
            system += (
                "\n\nRespond with only a JSON document that matches this JSON Schema:\n"
                + json.dumps(call.response_schema)
            )
        request: dict[str, Any] = {
            "model": self.model.name,
            "system": system,
            "messages": _to_anthropic(call.messages),
            "max_tokens": self.model.max_tokens or ANTHROPIC_MAX_TOKENS,
        }
        sampling = {
            option: getattr(self.model, option)
            for option in ("temperature", "top_p")
            if getattr(self.model, option) is not None
        }
        if sampling:  # no longer typed arguments of the SDK; the API still takes them
            request["extra_body"] = sampling
        if call.tools:
            request["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in call.tools
            ]
        return request

    def batches(self, client: Any) -> BatchAPI | None:
        return AnthropicBatches(client, f"{endpoint_key(self.model)} /v1/messages")

    async def send(self, request: dict[str, Any], timeout: float | None) -> Any:
        return await self._client.messages.create(**request, timeout=timeout)

    def reply(self, response: Any, elapsed_ms: int) -> ModelReply:
        return _reply(response, elapsed_ms)


def _to_anthropic(messages: list[Message]) -> list[dict[str, Any]]:
    """Neutral messages → Anthropic turns. Consecutive tool results share one user turn."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.text,
                "is_error": message.is_error,
            }
            if out and out[-1]["role"] == "user" and out[-1].get("_tool_results"):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block], "_tool_results": True})
            continue
        if message.role == "assistant":
            content: list[dict[str, Any]] = []
            if message.text:
                content.append({"type": "text", "text": message.text})
            content += [
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": call.arguments or {},
                }
                for call in message.tool_calls
            ]
            out.append({"role": "assistant", "content": content or message.text})
            continue
        blocks: list[dict[str, Any]] = [
            {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": image.mime_type,
                    "data": image.data_base64,
                },
            }
            for image in message.images
        ]
        blocks.append({"type": "text", "text": message.text})
        out.append({"role": "user", "content": blocks})
    for turn in out:
        turn.pop("_tool_results", None)
    return out


def _reply(response: Any, elapsed_ms: int) -> ModelReply:
    content = getattr(response, "content", None)
    if content is None:
        raise ModelCallError(CallErrorKind.MALFORMED, "the response has no content")
    texts = [block.text for block in content if block.type == "text"]
    calls = [
        parse_tool_call(block.id, block.name, block.input)
        for block in content
        if block.type == "tool_use"
    ]
    return ModelReply(
        text="".join(texts),
        tool_calls=calls,
        usage=_usage(response.usage),
        model_ms=elapsed_ms,
        finish_reason=response.stop_reason,
    )


def _usage(usage: Any) -> TokenUsage:
    """Messages reports input and output apart; the total is their sum."""
    counts = checked_counts(
        "usage",
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_creation_input_tokens=getattr(usage, "cache_creation_input_tokens", 0),
        cache_read_input_tokens=getattr(usage, "cache_read_input_tokens", 0),
    )
    return TokenUsage(
        prompt_tokens=counts["input_tokens"],
        completion_tokens=counts["output_tokens"],
        total_tokens=counts["input_tokens"] + counts["output_tokens"],
        cache_creation_tokens=counts["cache_creation_input_tokens"],
        cache_read_tokens=counts["cache_read_input_tokens"],
    )
