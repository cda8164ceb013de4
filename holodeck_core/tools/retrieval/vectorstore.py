"""``type: vectorstore``: semantic search over documents (paragraph chunks) or records
(``vector_field`` set: one chunk per JSON object or CSV row, not split, as in HoloDeck).

``record_prefix`` prefixes each record's id and ``meta_prefix`` each metadata key in what the
model reads (HoloDeck 0.7.1 accepts both and does nothing with them)."""

from __future__ import annotations

import asyncio
from typing import Any

from holodeck_core.defaults import RETRIEVAL_CHUNK_SIZE
from holodeck_core.models import TokenUsage, VectorstoreTool
from holodeck_core.tools.retrieval.chunking import paragraph_chunks
from holodeck_core.tools.retrieval.embeddings import Vectors
from holodeck_core.tools.retrieval.index import Chunk, Index
from holodeck_core.tools.retrieval.runtime import RetrievalRuntime
from holodeck_core.tools.retrieval.search import semantic
from holodeck_core.tools.retrieval.sources import SourceFile, read_records


class VectorstoreRuntime(RetrievalRuntime):
    tool: VectorstoreTool

    @property
    def structured(self) -> bool:
        return self.tool.vector_field is not None

    def options(self) -> dict[str, Any]:
        t = self.tool
        if self.structured:
            return {
                "records": t.model_dump(
                    include={
                        "vector_field",
                        "id_field",
                        "meta_fields",
                        "field_separator",
                        "delimiter",
                        "record_path",
                        "record_prefix",
                        "meta_prefix",
                    }
                )
            }
        # ``chunk_overlap`` is accepted and not applied, as in HoloDeck 0.7.1 (its paragraph
        # splitter takes no overlap): the agent's retrieval is HoloDeck's
        # (docs/holodeck-fidelity.md)
        return {"chunk_size": t.chunk_size or RETRIEVAL_CHUNK_SIZE}

    async def make_chunks(self, files: list[SourceFile]) -> list[Chunk]:
        t = self.tool
        if self.structured:
            records = await asyncio.to_thread(read_records, files, t, where=self.where)
            prefix, meta_prefix = t.record_prefix or "", t.meta_prefix or ""
            return [
                Chunk(
                    id=f"{r.source}#{prefix}{r.id}",
                    text=r.content,
                    source=r.source,
                    record_id=f"{prefix}{r.id}",
                    metadata={f"{meta_prefix}{k}": v for k, v in r.metadata.items()},
                )
                for r in records
            ]
        size = self.options()["chunk_size"]
        chunks: list[Chunk] = []
        async for doc in self.documents(files):  # each document dropped once chunked
            chunks += [
                Chunk(id=f"{doc.source}#{n}", text=piece.text, source=doc.source)
                for n, piece in enumerate(paragraph_chunks(doc.text, size))
            ]
        return chunks

    def prepare(self, index: Index) -> None:
        """The vectors are all semantic search needs."""

    async def search(
        self, query: str, vector: Vectors | None
    ) -> tuple[list[tuple[Chunk, float]], TokenUsage]:
        assert self.index is not None and vector is not None
        ranked = semantic(self.index.vectors, vector, self.tool.top_k)
        floor = self.tool.min_similarity_score
        chunks = self.index.chunks
        return [(chunks[i], s) for i, s in ranked if floor is None or s >= floor], TokenUsage()

    def format(self, query: str, results: list[tuple[Chunk, float]]) -> str:
        if not results:
            return f"No relevant results found for query: {query}"
        lines = [f"Found {len(results)} result(s):", ""]
        for rank, (chunk, score) in enumerate(results, start=1):
            if self.structured:
                lines.append(f"[{rank}] ID: {chunk.record_id} | Score: {score:.2f}")
                lines.append(f"Content: {chunk.text}")
                if chunk.metadata:
                    meta = ", ".join(f"{k}: {v}" for k, v in chunk.metadata.items())
                    lines.append(f"Metadata: {meta}")
            else:
                # the file's absolute path, as HoloDeck 0.7.1 shows a local source
                source = self.context.resolve(chunk.source)
                lines.append(f"[{rank}] Score: {score:.2f} | Source: {source}")
                lines.append(chunk.text)
            lines.append("")
        return "\n".join(lines).rstrip()
