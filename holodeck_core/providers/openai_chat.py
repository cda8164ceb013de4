"""OpenAI Chat Completions, for ``openai``, ``azure_openai`` and ``ollama`` (OpenAI-compatible)."""

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
from holodeck_core.providers.messages import Message, ModelCall, ModelReply
from holodeck_core.providers.table import provider_spec


def openai_sdk_client(model: LLMProvider, api_key: str) -> openai.AsyncOpenAI:
    """The official SDK client for ``model``'s endpoint (OpenAI, Azure OpenAI, or Ollama's
    OpenAI-compatible route), with the SDK's own retries off: the scheduler retries.

    The transport is :func:`~holodeck_core.providers.base.sdk_http_client`'s."""
    spec = provider_spec(model.provider)
    if model.provider is ProviderEnum.AZURE_OPENAI:
        return openai.AsyncAzureOpenAI(
            azure_endpoint=model.endpoint or "",
            api_key=api_key,
            api_version=model.api_version or spec.default_api_version,
            max_retries=0,
            http_client=sdk_http_client(openai, model.endpoint),
        )
    endpoint = model.endpoint or spec.default_endpoint
    if model.provider is ProviderEnum.OLLAMA and endpoint:
        endpoint = endpoint.rstrip("/")
        endpoint = endpoint if endpoint.endswith("/v1") else f"{endpoint}/v1"
    return openai.AsyncOpenAI(
        api_key=api_key,
        base_url=endpoint,
        max_retries=0,
        http_client=sdk_http_client(openai, endpoint),
    )


class OpenAIChatClient(SDKClient):
    def __init__(self, model: LLMProvider, api_key: str) -> None:
        super().__init__(model, openai_sdk_client(model, api_key))

    def request(self, call: ModelCall) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model.name,
            "messages": [
                {"role": "system", "content": call.system},
                *map(_to_openai, call.messages),
            ],
        }
        for option in ("temperature", "top_p", "max_tokens"):
            value = getattr(self.model, option)
            if value is not None:
                request[option] = value
        if call.tools:
            request["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in call.tools
            ]
        if call.response_schema is not None:
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": "response",
                    "schema": call.response_schema,
                    "strict": False,
                },
            }
        if call.top_logprobs:
            request["logprobs"] = True
            request["top_logprobs"] = call.top_logprobs
        return request

    def batches(self, client: Any) -> BatchAPI | None:
        key = f"{endpoint_key(self.model)} /v1/chat/completions"
        return OpenAIBatches(
            client, "/v1/chat/completions", key, openai.types.chat.ChatCompletion.model_validate
        )

    async def send(self, request: dict[str, Any], timeout: float | None) -> Any:
        return await post_openai(
            self._client,
            "/chat/completions",
            request,
            openai.types.chat.ChatCompletion,
            timeout,
        )

    def reply(self, response: Any, elapsed_ms: int) -> ModelReply:
        return _reply(response, elapsed_ms)


def _to_openai(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}
    if message.role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": message.text or None}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.raw_arguments},
                }
                for call in message.tool_calls
            ]
        return out
    if not message.images:
        return {"role": "user", "content": message.text}
    parts: list[dict[str, Any]] = [{"type": "text", "text": message.text}]
    parts += [
        {
            "type": "image_url",
            "image_url": {"url": f"data:{image.mime_type};base64,{image.data_base64}"},
        }
        for image in message.images
    ]
    return {"role": "user", "content": parts}


def _reply(completion: Any, elapsed_ms: int) -> ModelReply:
    choices = getattr(completion, "choices", None)
    if not choices:
        raise ModelCallError(CallErrorKind.MALFORMED, "the response has no choices")
    choice = choices[0]
    message = choice.message
    calls = [
        parse_tool_call(call.id, call.function.name, call.function.arguments)
        for call in message.tool_calls or []
    ]
    usage = completion.usage
    details = getattr(usage, "prompt_tokens_details", None) if usage else None
    logprobs = None
    if getattr(choice, "logprobs", None) is not None and choice.logprobs.content:
        logprobs = [item.model_dump() for item in choice.logprobs.content]
    return ModelReply(
        text=message.content or "",
        tool_calls=calls,
        usage=call_usage(
            "usage",
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            total_tokens=usage.total_tokens if usage else 0,
            cache_read_tokens=getattr(details, "cached_tokens", 0) if details else 0,
        ),
        model_ms=elapsed_ms,
        finish_reason=choice.finish_reason,
        system_fingerprint=getattr(completion, "system_fingerprint", None),
        logprobs=logprobs,
    )
