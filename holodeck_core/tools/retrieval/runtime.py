"""What both retrieval tool types share: the embeddings client, the index life cycle (key,
load or build, store) and the tool call (embed the query, search, format, report chunks).

The model sees one function, ``<name>_search(query)``, described as ``Search <name>:
<description>`` (HoloDeck 0.7.1's adapters)."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import Any

from holodeck_core.calls.errors import ModelCallError
from holodeck_core.models import RetrievedChunk, TokenUsage
from holodeck_core.providers.factory import api_key_for
from holodeck_core.providers.messages import ToolSpec
from holodeck_core.tools.retrieval.embeddings import Embedder, EmbedStats, Vectors
from holodeck_core.tools.retrieval.index import Chunk, Index, index_key
from holodeck_core.tools.retrieval.settings import RetrievalTool, embedding_spec
from holodeck_core.tools.retrieval.sources import (
    Document,
    SourceFile,
    document_batches,
    read_documents,
    source_files,
)
from holodeck_core.tools.retrieval.store import KeyValueStore
from holodeck_core.tools.runtime import ToolContext, ToolCrashedError, ToolOutput, ToolStartError

QUERY_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string"}},  # as HoloDeck 0.7.1 declares it
    "required": ["query"],
}


class RetrievalRuntime(ABC):
    """One retrieval tool with its index. Config problems surface in ``__init__`` (the
    embeddings model) and ``open`` (sources), both before any model call."""

    def __init__(self, tool: RetrievalTool, context: ToolContext, *, where: str) -> None:
        self.tool = tool
        self.context = context
        self.where = where
        self.config_name = tool.name
        self.function = f"{tool.name}_search"
        self.specs = [
            ToolSpec(self.function, f"Search {tool.name}: {tool.description}", QUERY_SCHEMA)
        ]
        self.spec = embedding_spec(
            context.agent_model,
            context.embedding_provider,
            tool,
            where=where,
            model=context.embedding_model,
        )
        self._api_key = api_key_for(self.spec.endpoint, where=f"{where} embeddings")
        self.index: Index | None = None
        self.build = EmbedStats()
        self.built = False
        self.fingerprint_key: str | None = None
        self._store: KeyValueStore | None = None
        self._embedder: Embedder | None = None

    @abstractmethod
    def options(self) -> dict[str, Any]:
        """The chunking, record and search-time-independent options in the index key."""

    @abstractmethod
    async def make_chunks(self, files: list[SourceFile]) -> list[Chunk]:
        """Read and chunk the sources (raising ConfigError on bad input)."""

    @abstractmethod
    async def search(
        self, query: str, vector: Vectors | None
    ) -> tuple[list[tuple[Chunk, float]], TokenUsage]:
        """The ranked chunks for ``query`` after every filter, with tokens spent."""

    @abstractmethod
    def format(self, query: str, results: list[tuple[Chunk, float]]) -> str:
        """The result text the model reads, as HoloDeck formats it."""

    async def documents(self, files: list[SourceFile]) -> AsyncIterator[Document]:
        """The sources as text, one bounded batch at a time (markitdown in its workers, off
        the event loop): a caller that chunks each document as it comes holds one batch's
        text, never the corpus's (docs/agent-yaml.md)."""
        for batch in document_batches(files):
            for document in await asyncio.to_thread(
                read_documents,
                batch,
                base_dir=self.context.base_dir,
                cache_dir=self.context.cache_dir / "files",
                where=self.where,
            ):
                yield document

    @property
    def needs_query_vector(self) -> bool:
        return True

    async def open(self) -> None:
        from holodeck_core.providers.openai_chat import openai_sdk_client

        cache = self.context.cache_dir
        self._store = KeyValueStore(cache / "embeddings" / "vectors.sqlite")
        self._embedder = Embedder(
            self.spec,
            self.context.scheduler,
            self._store,
            openai_sdk_client(self.spec.endpoint, self._api_key),
            timeout=self.context.timeout,
        )
        files = await asyncio.to_thread(
            source_files,
            self.tool.source,
            self.context.base_dir,
            self.context.resolve,
            where=self.where,
        )
        what = {
            "type": self.tool.type,
            "sources": [(f.display, f.sha256) for f in files],
            "embeddings": self.spec.identity(),
            **self.options(),
        }
        # the case fingerprint's key has no endpoint (docs/architecture.md)
        self.fingerprint_key = index_key(what)
        key = index_key({**what, "vector_space": self.spec.namespace})  # where vectors came from
        root = cache / "indexes"
        index = await asyncio.to_thread(Index.load, root, key)
        if index is None:
            chunks = await self.make_chunks(files)
            try:
                vectors, stats = await self._embedder.embed([c.embedded for c in chunks])
            except ModelCallError as exc:
                raise ToolStartError(
                    f"{self.where}: embedding its {len(chunks)} chunks failed: {exc}"
                ) from None
            self.build.add(stats)
            index = Index(key, chunks, vectors)
            await asyncio.to_thread(index.save, root)
            self.built = True
        self.index = index
        await asyncio.to_thread(self.prepare, index)

    @abstractmethod
    def prepare(self, index: Index) -> None:
        """Build what searching needs besides the vectors (a keyword index); in a thread."""

    def identity(self) -> dict[str, Any]:
        return {"type": self.tool.type, "index": self.fingerprint_key if self.index else None}

    def provenance(self) -> dict[str, Any]:
        """What opening cost, for the EvalRun: whether the index was built and the
        embedding requests and tokens it took."""
        return {
            "tool": self.tool.name,
            "index": self.index.key if self.index else None,
            "chunks": len(self.index.chunks) if self.index else 0,
            "built": self.built,
            "embedding_model": self.spec.model,
            "embedding_requests": self.build.requests,
            "embedded_texts": self.build.texts,
            "embedding_tokens": self.build.usage.total_tokens,
        }

    async def call(self, function: str, arguments: dict[str, Any]) -> ToolOutput:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return ToolOutput(error="'query' must be a non-empty string")
        usage = TokenUsage()
        vector: Vectors | None = None
        try:
            if self.needs_query_vector:
                assert self._embedder is not None
                matrix, stats = await self._embedder.embed([query])
                usage = usage + stats.usage
                vector = matrix[0]
            results, spent = await self.search(query, vector)
        except ModelCallError as exc:
            if exc.transient:
                raise ToolCrashedError(f"{self.where}: {exc}") from None
            return ToolOutput(error=str(exc), usage=usage)
        usage = usage + spent
        return ToolOutput(
            result=self.format(query, results),
            retrieval_context=[chunk.text for chunk, _ in results],
            chunks=[
                RetrievedChunk(
                    text=chunk.text,
                    source=chunk.source,
                    chunk_id=chunk.record_id or chunk.id,
                    score=round(score, 6),
                )
                for chunk, score in results
            ],
            usage=usage if usage.total_tokens else None,
        )

    async def aclose(self) -> None:
        if self._embedder is not None:
            await self._embedder.aclose()
        if self._store is not None:
            self._store.close()
