"""The factory of model clients: picks the backend for a provider and finds its key."""

from __future__ import annotations

import os

from holodeck_core.agents.base import ModelClient
from holodeck_core.errors import ConfigError
from holodeck_core.models import LLMProvider, ProviderEnum

KEY_VARIABLES = {
    ProviderEnum.OPENAI: "OPENAI_API_KEY",
    ProviderEnum.AZURE_OPENAI: "AZURE_OPENAI_API_KEY",
    ProviderEnum.ANTHROPIC: "ANTHROPIC_API_KEY",
}


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
