"""The interface every model backend implements, and the factory that picks one."""

from __future__ import annotations

import json
import os
from typing import Any, Protocol

from holodeck_core.agents.messages import Message, ModelReply, ToolCall, ToolSpec
from holodeck_core.errors import ConfigError
from holodeck_core.models import LLMProvider, ProviderEnum

DEFAULT_OLLAMA_ENDPOINT = "http://127.0.0.1:11434/v1"
DEFAULT_AZURE_API_VERSION = "2024-10-21"
KEY_VARIABLES = {
    ProviderEnum.OPENAI: "OPENAI_API_KEY",
    ProviderEnum.AZURE_OPENAI: "AZURE_OPENAI_API_KEY",
    ProviderEnum.ANTHROPIC: "ANTHROPIC_API_KEY",
}


class ModelClient(Protocol):
    """One provider protocol. Implementations never retry: the scheduler does."""

    model: LLMProvider

    async def complete(
        self,
        system: str,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        response_schema: dict[str, Any] | None = None,
        timeout: float | None = None,
        top_logprobs: int | None = None,
    ) -> ModelReply: ...

    async def aclose(self) -> None: ...


def api_key_for(model: LLMProvider, *, where: str = "model", fallback: str | None = None) -> str:
    """The key from the config, else ``fallback``, else the provider's environment variable."""
    if model.api_key is not None:
        return model.api_key.get_secret_value()
    if model.provider is ProviderEnum.OLLAMA:
        return "ollama"
    variable = KEY_VARIABLES[model.provider]
    key = fallback or os.environ.get(variable)
    if not key:
        raise ConfigError(
            f"{where}.api_key is not set for provider {model.provider.value}: write "
            f"api_key: ${{{variable}}} in agent.yaml or export {variable}"
        )
    return key


def make_client(
    model: LLMProvider, *, where: str = "model", fallback_key: str | None = None
) -> ModelClient:
    """A client for ``model``; SDKs are imported here, not at start-up."""
    key = api_key_for(model, where=where, fallback=fallback_key)
    if model.provider is ProviderEnum.ANTHROPIC:
        from holodeck_core.agents.anthropic_backend import AnthropicClient

        return AnthropicClient(model, key)
    from holodeck_core.agents.openai_backend import OpenAIChatClient

    if model.provider is ProviderEnum.AZURE_OPENAI and not model.endpoint:
        raise ConfigError(f"{where}.endpoint is required for provider azure_openai")
    return OpenAIChatClient(model, key)


def parse_tool_call(call_id: str, name: str, raw: str | dict[str, Any] | None) -> ToolCall:
    """A tool call whose arguments may be invalid JSON: keep the raw text and the reason."""
    if isinstance(raw, dict):
        return ToolCall(id=call_id, name=name, raw_arguments=json.dumps(raw), arguments=raw)
    text = raw or "{}"
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        return ToolCall(call_id, name, text, None, f"invalid JSON arguments: {exc.msg}")
    if not isinstance(parsed, dict):
        return ToolCall(call_id, name, text, None, "arguments must be a JSON object")
    return ToolCall(id=call_id, name=name, raw_arguments=text, arguments=parsed)
