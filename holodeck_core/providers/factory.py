"""The factory of model clients: the provider table picks the backend and says where the key
is found."""

from __future__ import annotations

import os
from importlib import import_module
from typing import cast

from holodeck_core.errors import ConfigError
from holodeck_core.models import LLMProvider
from holodeck_core.providers.base import ModelClient
from holodeck_core.providers.table import provider_spec


def api_key_for(model: LLMProvider, *, where: str = "model", fallback: str | None = None) -> str:
    """The key from the config, else ``fallback``, else the provider's environment variable."""
    if model.api_key is not None:
        return model.api_key.get_secret_value()
    spec = provider_spec(model.provider, where=where)
    if spec.key_variable is None:
        return spec.provider.value  # a local server (Ollama) wants a non-empty placeholder
    key = fallback or os.environ.get(spec.key_variable)
    if not key:
        raise ConfigError(
            f"{where}.api_key is not set for provider {model.provider.value}: write "
            f"api_key: ${{{spec.key_variable}}} in agent.yaml or export {spec.key_variable}"
        )
    return key


def make_client(
    model: LLMProvider,
    *,
    where: str = "model",
    fallback_key: str | None = None,
    agent: bool = False,
    reasoning: dict[str, str] | None = None,
) -> ModelClient:
    """A client for ``model``; SDKs are imported here, not at start-up. ``agent``: for the
    agent's own calls, on the API HoloDeck's agent uses (the table's ``agent_protocol``);
    ``reasoning``: the Responses ``reasoning`` of HoloDeck's ``openai.effort`` (that API only)."""
    spec = provider_spec(model.provider, where=where)
    key = api_key_for(model, where=where, fallback=fallback_key)
    if spec.endpoint_required and not model.endpoint:
        raise ConfigError(f"{where}.endpoint is required for provider {model.provider.value}")
    module, _, name = spec.client_class(agent=agent).partition(":")
    client_class = getattr(import_module(module), name)
    extra = {"reasoning": reasoning} if reasoning else {}
    return cast(ModelClient, client_class(model, key, **extra))
