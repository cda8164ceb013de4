"""The one provider table (docs/architecture.md): per provider, the wire protocol its backend speaks
(and the agent's own, where HoloDeck's agent calls another API than its judges), the
environment variable of its key, its default endpoint, whether it serves embeddings and
logprobs, how its SDK errors are classified, and its key in the price table. The factory,
the judges, the retrieval tools and the Dagster resources read it; a provider that is not
here is a config error, never "OpenAI by default".

Adding a provider: a member of :class:`~holodeck_core.models.ProviderEnum` (the schema users
validate ``agent.yaml`` against), a row here and its backend module."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from holodeck_core.calls.classify import classify
from holodeck_core.calls.errors import ModelCallError
from holodeck_core.errors import ConfigError
from holodeck_core.models import ProviderEnum

Protocol = Literal["openai_chat", "openai_responses", "anthropic_messages"]
AgentRunner = Literal["loop", "claude_agent_sdk"]


@dataclass(frozen=True)
class ProviderSpec:
    provider: ProviderEnum
    protocol: Protocol
    """The wire protocol of its model calls (its client: :data:`CLIENTS`)."""
    key_variable: str | None
    """Where its API key is found when ``api_key`` is not set; None: it needs none."""
    agent_protocol: Protocol | None = None
    """The protocol of the agent's own calls when HoloDeck's agent speaks another API than
    its judges (None: :attr:`protocol`): HoloDeck 0.7.1 runs ``openai`` and
    ``azure_openai`` agents on the Responses API (the openai-agents SDK), judges on chat."""
    default_endpoint: str | None = None
    """Used when ``endpoint`` is not set; None: the SDK's own default."""
    endpoint_required: bool = False
    embeddings: bool = False
    """It serves an embeddings API (retrieval tools can embed with it)."""
    logprobs: bool = False
    """Its chat API returns top-logprobs (judges that want a score distribution)."""
    default_api_version: str | None = None
    default_embedding_model: str | None = None
    classify_error: Callable[[BaseException], ModelCallError] = classify
    """Its SDK's exceptions as transient or permanent call errors."""
    price_key: str = ""
    """Its models' rows in the price table (default: the provider's name)."""
    batches: bool = False
    """It sells its calls through a batch API too (``execution.batch``, docs/cost.md)."""
    agent_runner: AgentRunner = "loop"
    """What runs its agents as HoloDeck 0.7.1 does: our tool loop on :meth:`client_class`, or
    the Claude Agent SDK (:mod:`holodeck_core.agents.claude_sdk`), as HoloDeck's ``anthropic``
    and ``ollama`` agents are (docs/holodeck-fidelity.md)."""

    @property
    def prices_under(self) -> str:
        return self.price_key or self.provider.value

    def client_class(self, *, agent: bool = False) -> str:
        """``module:Class`` of the client for the agent's calls or for any other's."""
        return CLIENTS[(self.agent_protocol or self.protocol) if agent else self.protocol]


CLIENTS: dict[Protocol, str] = {
    "openai_chat": "holodeck_core.providers.openai_chat:OpenAIChatClient",
    "openai_responses": "holodeck_core.providers.openai_responses:OpenAIResponsesClient",
    "anthropic_messages": "holodeck_core.providers.anthropic_messages:AnthropicClient",
}

PROVIDERS: dict[ProviderEnum, ProviderSpec] = {
    spec.provider: spec
    for spec in (
        ProviderSpec(
            ProviderEnum.OPENAI,
            "openai_chat",
            "OPENAI_API_KEY",
            agent_protocol="openai_responses",
            embeddings=True,
            logprobs=True,
            default_embedding_model="text-embedding-3-small",
            batches=True,
        ),
        ProviderSpec(
            ProviderEnum.AZURE_OPENAI,
            "openai_chat",
            "AZURE_OPENAI_API_KEY",
            agent_protocol="openai_responses",
            endpoint_required=True,
            embeddings=True,
            logprobs=True,
            default_api_version="2024-10-21",
            default_embedding_model="text-embedding-3-small",
            price_key="openai",  # Azure's list prices are OpenAI's
            batches=True,
        ),
        ProviderSpec(
            ProviderEnum.ANTHROPIC,
            "anthropic_messages",
            "ANTHROPIC_API_KEY",
            agent_runner="claude_agent_sdk",
            batches=True,
        ),
        ProviderSpec(
            ProviderEnum.OLLAMA,
            "openai_chat",
            None,
            default_endpoint="http://127.0.0.1:11434/v1",
            embeddings=True,
            logprobs=True,
            default_embedding_model="nomic-embed-text:latest",
            agent_runner="claude_agent_sdk",
        ),
    )
}


def provider_spec(provider: ProviderEnum | str, *, where: str = "model") -> ProviderSpec:
    """The row of ``provider``, or a ConfigError naming the field and the providers known."""
    try:
        return PROVIDERS[ProviderEnum(provider)]
    except (KeyError, ValueError):
        known = ", ".join(p.value for p in PROVIDERS)
        raise ConfigError(
            f"{where}.provider: {provider!r} is not a provider this engine can call; "
            f"use one of {known}"
        ) from None
