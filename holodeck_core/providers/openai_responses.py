"""The OpenAI Responses API, for the agent's own calls on ``openai`` and ``azure_openai``.

HoloDeck 0.7.1 runs those two providers' agents through the ``openai-agents`` SDK
(``OpenAIResponsesModel``, non-streaming), so the agent the user deploys speaks
``POST /v1/responses`` (docs/holodeck-fidelity.md): ``instructions`` for the system prompt,
``input`` items (user messages, the model's own output items replayed as returned,
``function_call_output`` items), tools as ``{"type": "function", "strict": false, ...}`` with
``additionalProperties: false``, ``max_output_tokens``, ``include``. The judges keep Chat
Completions (HoloDeck's do too): the provider table's ``agent_client`` picks this class only for the
agent. Calls go through the same scheduler, charges and error classes as chat."""

from __future__ import annotations

from typing import Any

import openai

from holodeck_core.calls.batch import BatchAPI
from holodeck_core.calls.errors import CallErrorKind, ModelCallError
from holodeck_core.calls.scheduler import endpoint_key
from holodeck_core.models import LLMProvider, ProviderEnum
from holodeck_core.models.outside import call_usage
from holodeck_core.providers.base import (
    SDKClient,
    parse_tool_call,
    post_openai,
    sdk_http_client,
)
from holodeck_core.providers.batches import OpenAIBatches
from holodeck_core.providers.messages import Message, ModelCall, ModelReply, ToolSpec
from holodeck_core.providers.openai_chat import openai_sdk_client

REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")
"""HoloDeck's heuristic for reasoning models: they get no ``temperature`` or ``top_p``."""

LOGPROBS_INCLUDE = "message.output_text.logprobs"


def responses_sdk_client(model: LLMProvider, api_key: str) -> openai.AsyncOpenAI:
    """OpenAI's client as the chat backend makes it; Azure's on its ``/openai/v1`` surface
    (where Azure serves the Responses API), with ``api-version`` only when the config pins
    one, as HoloDeck builds it."""
    if model.provider is not ProviderEnum.AZURE_OPENAI:
        return openai_sdk_client(model, api_key)
    base = (model.endpoint or "").rstrip("/")
    base = base if base.endswith("/openai/v1") else f"{base}/openai/v1"
    return openai.AsyncOpenAI(
        api_key=api_key,
        base_url=base,
        default_query={"api-version": model.api_version} if model.api_version else None,
        max_retries=0,
        http_client=sdk_http_client(openai, base),
    )


class OpenAIResponsesClient(SDKClient):
    def __init__(
        self, model: LLMProvider, api_key: str, reasoning: dict[str, str] | None = None
    ) -> None:
        super().__init__(model, responses_sdk_client(model, api_key))
        self.reasoning = reasoning

    def request(self, call: ModelCall) -> dict[str, Any]:
        """The body ``openai-agents`` 0.17.4 sends for HoloDeck's agent (empty ``include``
        and ``tools`` included; the sampling settings that are set)."""
        request: dict[str, Any] = {
            "model": self.model.name,
            "instructions": call.system,
            "input": [item for message in call.messages for item in _input_items(message)],
            "include": [LOGPROBS_INCLUDE] if call.top_logprobs else [],
            "tools": [_tool(t) for t in call.tools or []],
        }
        sampling = not self.model.name.strip().lower().startswith(REASONING_PREFIXES)
        options = ("temperature", "top_p", "max_tokens") if sampling else ("max_tokens",)
        for option in options:
            value = getattr(self.model, option)
            if value is not None:
                request["max_output_tokens" if option == "max_tokens" else option] = value
        if self.reasoning is not None:
            request["reasoning"] = self.reasoning
        if call.response_schema is not None:
            request["text"] = {"format": _text_format(call.response_schema)}
        if call.top_logprobs:
            request["top_logprobs"] = call.top_logprobs
        return request

    def batches(self, client: Any) -> BatchAPI | None:
        key = f"{endpoint_key(self.model)} /v1/responses"
        return OpenAIBatches(
            client, "/v1/responses", key, openai.types.responses.Response.model_validate
        )

    async def send(self, request: dict[str, Any], timeout: float | None) -> Any:
        return await post_openai(
            self._client, "/responses", request, openai.types.responses.Response, timeout
        )

    def reply(self, response: Any, elapsed_ms: int) -> ModelReply:
        return _reply(response, elapsed_ms)


def _tool(tool: ToolSpec) -> dict[str, Any]:
    """HoloDeck's function tool: not strict; its own tools' parameters closed to other
    properties, an MCP tool's as its server gave them (with ``properties``, as the SDK)."""
    closed = {} if tool.from_server else {"additionalProperties": False}
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": {"properties": {}, **tool.parameters, **closed},
        "strict": False,
    }


def _text_format(schema: dict[str, Any]) -> dict[str, Any]:
    """HoloDeck's structured output: strict only when the schema already qualifies (an
    object, closed, every property required); it never rewrites the user's schema."""
    properties = schema.get("properties")
    strict = (
        schema.get("type") == "object"
        and schema.get("additionalProperties") is False
        and isinstance(properties, dict)
        and isinstance(schema.get("required"), list)
        and set(properties) == set(schema["required"])
    )
    return {"type": "json_schema", "name": "final_output", "schema": schema, "strict": strict}


def _input_items(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {
                "call_id": message.tool_call_id,
                "output": message.text,
                "type": "function_call_output",
            }
        ]
    if message.role == "assistant":
        if message.replay:  # the model's own output items, as the SDK replays them
            return list(message.replay)
        items: list[dict[str, Any]] = []
        if message.text:
            items.append(
                {
                    "role": "assistant",
                    "type": "message",
                    "content": [{"type": "output_text", "text": message.text, "annotations": []}],
                }
            )
        items += [
            {
                "arguments": call.raw_arguments,
                "call_id": call.id,
                "name": call.name,
                "type": "function_call",
            }
            for call in message.tool_calls
        ]
        return items
    if not message.images:
        return [{"content": message.text, "role": "user"}]
    parts: list[dict[str, Any]] = [{"type": "input_text", "text": message.text}]
    parts += [
        {
            "type": "input_image",
            "image_url": f"data:{image.mime_type};base64,{image.data_base64}",
            "detail": "auto",
        }
        for image in message.images
    ]
    return [{"content": parts, "role": "user"}]


def _reply(response: Any, elapsed_ms: int) -> ModelReply:
    output = getattr(response, "output", None)
    if not isinstance(output, list) or not output:
        raise ModelCallError(CallErrorKind.MALFORMED, "the response has no output items")
    texts: list[str] = []
    calls = []
    logprobs: list[dict[str, Any]] = []
    for item in output:
        kind = getattr(item, "type", None)
        if kind == "function_call":
            calls.append(parse_tool_call(item.call_id, item.name, item.arguments))
        elif kind == "message":
            for part in item.content or []:
                if getattr(part, "type", None) == "output_text":
                    texts.append(part.text)
                    logprobs += [entry.model_dump() for entry in part.logprobs or []]
    usage = response.usage
    details = getattr(usage, "input_tokens_details", None) if usage else None
    incomplete = getattr(response, "incomplete_details", None)
    return ModelReply(
        text="".join(texts),
        tool_calls=calls,
        usage=call_usage(
            "usage",
            prompt_tokens=usage.input_tokens if usage else 0,
            completion_tokens=usage.output_tokens if usage else 0,
            total_tokens=usage.total_tokens if usage else 0,
            cache_read_tokens=getattr(details, "cached_tokens", 0) if details else 0,
        ),
        model_ms=elapsed_ms,
        finish_reason=getattr(incomplete, "reason", None) or getattr(response, "status", None),
        logprobs=logprobs or None,
        replay=tuple(item.model_dump(exclude_unset=True, mode="json") for item in output),
    )
