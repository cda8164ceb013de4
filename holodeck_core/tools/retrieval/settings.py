"""Which embeddings model a retrieval tool uses, and what ``validate`` says about the parts of
HoloDeck's retrieval config this engine substitutes or ignores.

As HoloDeck 0.7.1 chooses (``lib/tool_initializer.py``; agent side, docs/holodeck-fidelity.md): the
endpoint is the agent's own model block, or ``embedding_provider`` for an ``anthropic`` agent
(which has no embeddings API, and needs the block: docs/agent-yaml.md); ``embedding_provider`` is
never used otherwise, and its ``name`` never. The model is the one ``embedding_model`` the
agent's retrieval tools set (one embeddings service per agent: two different values are a
config error), else the endpoint provider's default (``text-embedding-3-small``, Ollama's
``nomic-embed-text:latest``)."""

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
        """The part of every cache key that names the vector space (docs/agent-yaml.md), and where
        it came from (docs/agent-yaml.md): vectors of one model name at another endpoint are not the
        same."""
        dims = self.dimensions if self.dimensions is not None else "default"
        where = self.endpoint.endpoint or "default endpoint"
        return f"{self.endpoint.provider.value}|{where}|{self.model}|{dims}"

    def identity(self) -> dict[str, object]:
        return {
            "provider": self.endpoint.provider.value,
            "model": self.model,
            "dimensions": self.dimensions,
        }


def shared_embedding_model(agent: Agent) -> str | None:
    """The ``embedding_model`` the retrieval tools set (HoloDeck embeds every tool of an
    agent with one model), or None; different values are a ConfigError naming them."""
    models = {
        tool.name: tool.embedding_model
        for tool in agent.tools or []
        if isinstance(tool, VectorstoreTool | HierarchicalDocumentTool) and tool.embedding_model
    }
    if len(set(models.values())) > 1:
        found = ", ".join(f"{name}={model}" for name, model in sorted(models.items()))
        raise ConfigError(
            f"tools: the retrieval tools set different embedding_model values ({found}); "
            "HoloDeck embeds all of an agent's tools with one model: give them the same "
            "embedding_model, or set it on one tool only"
        )
    return next(iter(models.values()), None)


def embedding_spec(
    agent_model: LLMProvider,
    embedding_provider: LLMProvider | None,
    tool: RetrievalTool,
    *,
    where: str,
    model: str | None = None,
) -> EmbeddingSpec:
    """The embeddings model of ``tool`` (``model``: the agent's shared ``embedding_model``,
    else the tool's), or a ConfigError naming the fix."""
    dimensions = tool.embedding_dimensions if isinstance(tool, VectorstoreTool) else None
    endpoint = agent_model
    if not provider_spec(agent_model.provider).embeddings:
        if embedding_provider is None:
            raise ConfigError(
                f"{where}: the agent's provider ({agent_model.provider.value}) has no "
                f"embeddings API, so this {tool.type} tool cannot embed its documents; add an "
                f"embedding_provider block to agent.yaml, e.g.\n      "
                f"{_EMBEDDING_PROVIDER_EXAMPLE}\n    or give the tool a fixed result with `mock:`"
            )
        endpoint = embedding_provider
    spec = provider_spec(endpoint.provider, where="embedding_provider")
    if not spec.embeddings or spec.default_embedding_model is None:
        raise ConfigError(
            f"embedding_provider.provider: {endpoint.provider.value} has no "
            f"embeddings API; use {_EMBEDDING_PROVIDERS}"
        )
    chosen = model or tool.embedding_model or spec.default_embedding_model
    return EmbeddingSpec(endpoint, chosen, dimensions)


def live_retrieval_tools(agent: Agent) -> list[tuple[int, RetrievalTool]]:
    """The retrieval tools that run for real (no ``mock:``), with their index in ``tools``."""
    return [
        (i, tool)
        for i, tool in enumerate(agent.tools or [])
        if isinstance(tool, VectorstoreTool | HierarchicalDocumentTool) and tool.mock is None
    ]


def check_retrieval(agent: Agent) -> list[str]:
    """Raise the config errors of the agent's retrieval tools (before any model call) and
    return the notes ``validate`` prints (substituted databases and keyword indexes, named
    once; options that do nothing, in HoloDeck too)."""
    tools = live_retrieval_tools(agent)
    model = shared_embedding_model(agent)
    for index, tool in tools:
        embedding_spec(
            agent.model,
            agent.embedding_provider,
            tool,
            where=f"tools[{index}] ({tool.name})",
            model=model,
        )
    notes: list[str] = []
    unused = agent.embedding_provider is not None and provider_spec(agent.model.provider).embeddings
    if tools and unused:
        spec = embedding_spec(agent.model, None, tools[0][1], where="tools", model=model)
        notes.append(
            f"embedding_provider is not used: the agent's provider is {agent.model.provider.value} "
            "(HoloDeck 0.7.1 reads the block for anthropic agents only); the tools embed with "
            f"{spec.model} at the agent's model endpoint"
        )
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
    if extracting:
        notes.append(
            f"extract_definitions / extract_cross_references of {', '.join(extracting)}: no "
            'effect, as in HoloDeck 0.7.1, which reads neither (a chunk\'s "X" means term '
            "weighs in keyword search either way)"
        )
    return notes
