"""Which embeddings model a retrieval tool uses, and what ``validate`` says about the parts of
HoloDeck's retrieval config this engine substitutes or ignores.

Embeddings come from ``embedding_provider`` when the agent has one (its endpoint and key; the
model is the tool's ``embedding_model``, else the block's ``name``), else from the agent's own
provider with the tool's ``embedding_model`` or the provider default (HoloDeck 0.7.1's
defaults). Anthropic has no embeddings API: such an agent needs the block (DESIGN §7.5)."""

from __future__ import annotations

from dataclasses import dataclass

from holodeck_core.errors import ConfigError
from holodeck_core.models import (
    Agent,
    HierarchicalDocumentTool,
    LLMProvider,
    VectorstoreTool,
)
from holodeck_core.providers.table import PROVIDERS, provider_spec

RetrievalTool = VectorstoreTool | HierarchicalDocumentTool
_EMBEDDING_PROVIDERS = ", ".join(p.value for p, spec in PROVIDERS.items() if spec.embeddings)
_EMBEDDING_PROVIDER_EXAMPLE = (
    "embedding_provider:\n"
    "        provider: openai            # or azure_openai / ollama\n"
    "        name: text-embedding-3-small\n"
    "        api_key: ${OPENAI_API_KEY}"
)


@dataclass(frozen=True)
class EmbeddingSpec:
    """An embeddings model at an endpoint. ``dimensions`` is sent only when configured."""

    endpoint: LLMProvider
    model: str
    dimensions: int | None = None

    @property
    def namespace(self) -> str:
        """The part of every cache key that names the vector space (§7.5), and where it came
        from (issue 25): vectors of one model name at another endpoint are not the same."""
        dims = self.dimensions if self.dimensions is not None else "default"
        where = self.endpoint.endpoint or "default endpoint"
        return f"{self.endpoint.provider.value}|{where}|{self.model}|{dims}"

    def identity(self) -> dict[str, object]:
        return {
            "provider": self.endpoint.provider.value,
            "model": self.model,
            "dimensions": self.dimensions,
        }


def embedding_spec(
    agent_model: LLMProvider,
    embedding_provider: LLMProvider | None,
    tool: RetrievalTool,
    *,
    where: str,
) -> EmbeddingSpec:
    """The embeddings model of ``tool``, or a ConfigError naming the fix."""
    dimensions = tool.embedding_dimensions if isinstance(tool, VectorstoreTool) else None
    if embedding_provider is not None:
        if not provider_spec(embedding_provider.provider, where="embedding_provider").embeddings:
            raise ConfigError(
                f"embedding_provider.provider: {embedding_provider.provider.value} has no "
                f"embeddings API; use {_EMBEDDING_PROVIDERS}"
            )
        model = tool.embedding_model or embedding_provider.name
        return EmbeddingSpec(embedding_provider, model, dimensions)
    spec = provider_spec(agent_model.provider)
    if not spec.embeddings or spec.default_embedding_model is None:
        raise ConfigError(
            f"{where}: the agent's provider ({agent_model.provider.value}) has no embeddings "
            f"API, so this "
            f"{tool.type} tool cannot embed its documents; add an embedding_provider block "
            f"to agent.yaml, e.g.\n      {_EMBEDDING_PROVIDER_EXAMPLE}\n"
            "    or give the tool a fixed result with `mock:`"
        )
    return EmbeddingSpec(
        agent_model, tool.embedding_model or spec.default_embedding_model, dimensions
    )


def live_retrieval_tools(agent: Agent) -> list[tuple[int, RetrievalTool]]:
    """The retrieval tools that run for real (no ``mock:``), with their index in ``tools``."""
    return [
        (i, tool)
        for i, tool in enumerate(agent.tools or [])
        if isinstance(tool, VectorstoreTool | HierarchicalDocumentTool) and tool.mock is None
    ]


def check_retrieval(agent: Agent) -> tuple[list[str], list[str]]:
    """Raise the config errors of the agent's retrieval tools (before any model call) and
    return what ``validate`` prints: notes (substituted databases and keyword indexes, named
    once) and warnings (HoloDeck options this engine ignores)."""
    tools = live_retrieval_tools(agent)
    for index, tool in tools:
        embedding_spec(
            agent.model, agent.embedding_provider, tool, where=f"tools[{index}] ({tool.name})"
        )
    notes: list[str] = []
    databases = [(tool, tool.database) for _, tool in tools if tool.database is not None]
    if databases:
        kinds = sorted(
            {d if isinstance(d, str) else d.provider for _, d in databases}, key=str.lower
        )
        with_url = [t.name for t, d in databases if not isinstance(d, str) and d.connection_string]
        notes.append(
            f"database ({', '.join(kinds)}) of {', '.join(t.name for t, _ in databases)}: "
            "served by an embedded index built from `source` (the same results any vector "
            "database gives for the same embeddings)"
            + (
                f"; the connection_string of {', '.join(with_url)} is accepted, redacted "
                "and not used"
                if with_url
                else ""
            )
        )
    opensearch = [
        t.name
        for _, t in tools
        if isinstance(t, HierarchicalDocumentTool)
        and t.keyword_index is not None
        and t.keyword_index.provider != "in-memory"
    ]
    if opensearch:
        notes.append(
            f"keyword_index of {', '.join(opensearch)}: served by the embedded BM25 index "
            "(its endpoint and credentials are not used)"
        )
    extracting = [
        t.name
        for _, t in tools
        if isinstance(t, HierarchicalDocumentTool)
        and (t.extract_definitions or t.extract_cross_references)
    ]
    warnings: list[str] = []
    if extracting:
        warnings.append(
            f"extract_definitions / extract_cross_references of {', '.join(extracting)} "
            "are ignored by this engine (no definition or cross-reference index yet)"
        )
    return notes, warnings
