"""``type: hierarchical_document``: structure- or token-chunked documents searched by
``semantic``, ``keyword`` (BM25) or ``hybrid`` (RRF of semantic, keyword and exact legs),
with optional contextual summaries before embedding and an LLM rerank after searching."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

from holodeck_core.errors import ConfigError
from holodeck_core.models import HierarchicalDocumentTool, TokenUsage
from holodeck_core.tools.retrieval import search as legs
from holodeck_core.tools.retrieval.chunking import Piece, token_chunks
from holodeck_core.tools.retrieval.domains import DOMAIN_PATTERNS
from holodeck_core.tools.retrieval.embeddings import Vectors
from holodeck_core.tools.retrieval.index import Chunk, Index
from holodeck_core.tools.retrieval.llm_steps import LLMStep, contextualize, rerank
from holodeck_core.tools.retrieval.runtime import RetrievalRuntime
from holodeck_core.tools.retrieval.sources import SourceFile
from holodeck_core.tools.retrieval.store import KeyValueStore
from holodeck_core.tools.retrieval.structure import CHUNKER, StructureChunker, defined_term
from holodeck_core.tools.runtime import ToolContext

RERANK_POOL = 3  # rerank the best 3 * top_k candidates


class HierarchicalRuntime(RetrievalRuntime):
    tool: HierarchicalDocumentTool

    def __init__(self, tool: HierarchicalDocumentTool, context: ToolContext, *, where: str) -> None:
        super().__init__(tool, context, where=where)
        all_patterns = DOMAIN_PATTERNS.get(tool.document_domain, ())
        depth = tool.max_subsection_depth
        if depth is not None and all_patterns and not 1 <= depth <= len(all_patterns):
            raise ConfigError(
                f"{where}.max_subsection_depth: {depth} is out of range for document_domain "
                f"{tool.document_domain} (1 to {len(all_patterns)})"
            )
        if tool.search_mode == "hybrid":
            total = tool.semantic_weight + tool.keyword_weight + tool.exact_weight
            if not math.isclose(total, 1.0, abs_tol=1e-6):
                raise ConfigError(
                    f"{where}: semantic_weight + keyword_weight + exact_weight must sum to 1.0 "
                    f"for search_mode hybrid (they sum to {total:g})"
                )
        if tool.enable_reranking and tool.reranker_model is None:
            raise ConfigError(f"{where}.reranker_model is required when enable_reranking is true")
        self.chunker = StructureChunker(tool.max_chunk_tokens, all_patterns, depth)
        self._steps: KeyValueStore | None = None
        self._llm: dict[str, LLMStep] = {}
        self._keyword: legs.KeywordIndex | None = None
        self._folded: list[str] = []

    @property
    def needs_query_vector(self) -> bool:
        return self.tool.search_mode != "keyword"

    def options(self) -> dict[str, Any]:
        t = self.tool
        options: dict[str, Any] = {
            "strategy": t.chunking_strategy,
            "max_chunk_tokens": t.max_chunk_tokens,
            "document_domain": t.document_domain,
            "max_subsection_depth": t.max_subsection_depth,
        }
        if t.chunking_strategy == "token":
            options["chunk_overlap"] = t.chunk_overlap
        else:  # an index of the chunker before it cut as HoloDeck does is another index
            options["chunker"] = CHUNKER
        if t.contextual_embeddings:
            model = t.context_model or self.context.agent_model
            options["context"] = {
                "model": model.fingerprint_fields(),
                "max_tokens": t.context_max_tokens,
            }
        return options

    def _pieces(self, text: str) -> list[Piece]:
        t = self.tool
        if t.chunking_strategy == "token":
            return token_chunks(text, t.max_chunk_tokens, t.chunk_overlap)
        return self.chunker.chunks(text)

    def _llm_step(self, model_field: str) -> LLMStep:
        """The step using ``context_model`` or ``reranker_model`` (else the agent's model),
        made once."""
        step = self._llm.get(model_field)
        if step is None:
            model = getattr(self.tool, model_field) or self.context.agent_model
            if self._steps is None:
                self._steps = KeyValueStore(
                    self.context.cache_dir / "retrieval" / "llm_steps.sqlite"
                )
            step = LLMStep(
                model,
                self.context.client_factory(model),
                self.context.scheduler,
                self._steps,
                "reranker" if model_field == "reranker_model" else "embedding",
                timeout=self.context.timeout,
            )
            self._llm[model_field] = step
        return step

    async def make_chunks(self, files: list[SourceFile]) -> list[Chunk]:
        t = self.tool
        chunks: list[Chunk] = []
        async for doc in self.documents(files):  # each document dropped once chunked
            pieces = self._pieces(doc.text)
            embed_texts = [p.text for p in pieces]
            if t.contextual_embeddings:
                embed_texts = await contextualize(
                    self._llm_step("context_model"),
                    embed_texts,
                    doc.text,
                    limit=t.context_max_tokens,
                    concurrency=t.context_concurrency,
                )
            chunks += [
                Chunk(
                    id=f"{doc.source}#{n}",
                    text=p.text,
                    source=doc.source,
                    embed_text=e if e != p.text else "",
                    parent_chain=p.parent_chain,
                    section_id=p.section_id,
                )
                for n, (p, e) in enumerate(zip(pieces, embed_texts, strict=True))
            ]
        if not chunks:
            raise ConfigError(f"{self.where}.source: no text to index in {t.source!r}")
        return chunks

    def prepare(self, index: Index) -> None:
        if self.tool.search_mode == "semantic":
            return
        self._folded = [legs.fold(c.text) for c in index.chunks]
        self._keyword = legs.KeywordIndex(
            [
                " ".join(
                    [
                        c.embedded,
                        *[" > ".join(c.parent_chain)] * 2,
                        *[c.section_id] * 2,
                        *[defined_term(c.text)] * 3,
                        Path(c.source).name,
                    ]
                )
                for c in index.chunks
            ]
        )

    async def search(
        self, query: str, vector: Vectors | None
    ) -> tuple[list[tuple[Chunk, float]], TokenUsage]:
        assert self.index is not None
        t = self.tool
        pool = t.top_k * RERANK_POOL if t.enable_reranking else t.top_k
        if t.search_mode == "keyword":
            assert self._keyword is not None
            ranked = legs.max_normalized(self._keyword.search(query, pool))
        elif t.search_mode == "semantic":
            assert vector is not None
            ranked = legs.semantic(self.index.vectors, vector, pool)
        else:
            assert vector is not None and self._keyword is not None
            ranked = legs.hybrid(
                legs.semantic(self.index.vectors, vector, pool),
                self._keyword.search(query, pool),
                legs.exact(self._folded, query, pool) if t.exact_weight > 0 else [],
                [t.semantic_weight, t.keyword_weight, t.exact_weight],
                t.rrf_k,
            )[:pool]
        if t.min_score is not None:
            ranked = [(i, s) for i, s in ranked if s >= t.min_score]
        usage = TokenUsage()
        if t.enable_reranking and len(ranked) > 1:
            step = self._llm_step("reranker_model")
            order, usage = await rerank(step, query, [self.index.chunks[i].text for i, _ in ranked])
            ranked = [ranked[i] for i in order]
        return [(self.index.chunks[i], s) for i, s in ranked[: t.top_k]], usage

    def format(self, query: str, results: list[tuple[Chunk, float]]) -> str:
        if not results:
            return "No results found."
        blocks = []
        for chunk, score in results:
            source = self.context.resolve(chunk.source)  # absolute, as HoloDeck 0.7.1 shows it
            lines = [
                f"Score: {score:.3f} | Source: {source}",
                f"Location: {' > '.join(chunk.parent_chain) or 'Root'}",
            ]
            if chunk.section_id:
                lines.append(f"Section: {chunk.section_id}")
            blocks.append("\n".join([*lines, "", chunk.text]))
        return "\n---\n".join(blocks)

    def provenance(self) -> dict[str, Any]:
        step = self._llm.get("context_model")
        extra = (
            {"context_calls": step.calls, "context_tokens": step.usage.total_tokens} if step else {}
        )
        return {**super().provenance(), **extra}

    async def aclose(self) -> None:
        await super().aclose()
        await asyncio.gather(*(s.client.aclose() for s in self._llm.values()))
        if self._steps is not None:
            self._steps.close()
