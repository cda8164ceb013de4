"""The search legs over one index and their fusion.

* semantic: cosine similarity of L2-normalised vectors (a matrix product), clamped to 0..1 as
  HoloDeck does;
* keyword: BM25 as HoloDeck 0.7.1 scores it (``rank_bm25``'s ``BM25Okapi``, k1 = 1.5,
  b = 0.75, its top ``limit`` by ``argsort``, zero scores dropped) over lowercase alphanumeric
  tokens of each chunk's text, heading path (twice) and section id (twice), HoloDeck's field
  boosts;
* exact: chunks that contain the query, or one of its quoted phrases, verbatim (case-folded),
  ranked by how often; HoloDeck 0.7.1 accepts ``exact_weight`` but has no such leg;
* hybrid: weighted reciprocal-rank fusion, ``Σ wᵢ / (rrf_k + rankᵢ)``, normalised so that a
  chunk ranked first by every leg scores 1.0 (HoloDeck's normalisation); when BM25 finds
  nothing (and no exact leg is weighted) the semantic results with their own scores, as
  HoloDeck falls back (:func:`hybrid`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from holodeck_core.tools.retrieval.embeddings import Vectors

Ranked = list[tuple[int, float]]
_WORD = re.compile(r"[a-z0-9]+")
_QUOTED = re.compile(r"\"([^\"]+)\"|'([^']+)'")


def tokenize(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def semantic(matrix: Vectors, query: Vectors, limit: int) -> Ranked:
    if matrix.shape[0] == 0:
        return []
    scores = np.clip(matrix @ query, 0.0, 1.0)
    return _top(scores, limit)


def _top(scores: npt.NDArray[Any], limit: int) -> Ranked:
    """The ``limit`` best (index, score) pairs, best first (ties by index)."""
    if limit < len(scores):
        candidates = np.argpartition(-scores, limit - 1)[:limit]
        order = candidates[np.lexsort((candidates, -scores[candidates]))]
    else:
        order = np.argsort(-scores, kind="stable")
    return [(int(i), float(scores[i])) for i in order]


class KeywordIndex:
    """BM25 over the chunks, built in memory when the index opens, so only the vectors need
    storing."""

    def __init__(self, documents: Sequence[str]) -> None:
        from rank_bm25 import BM25Okapi

        self._size = len(documents)
        tokens = [tokenize(d) for d in documents]
        self._bm25 = BM25Okapi(tokens, k1=1.5, b=0.75) if any(tokens) else None

    def search(self, query: str, limit: int) -> Ranked:
        tokens = tokenize(query)
        if not tokens or self._bm25 is None:
            return []
        scores = self._bm25.get_scores(tokens)
        top = scores.argsort()[-limit:][::-1]  # HoloDeck's order, ties included
        return [(int(i), float(scores[i])) for i in top if scores[i] > 0]


def fold(text: str) -> str:
    """Lowercase with runs of whitespace made one space: what the exact leg compares."""
    return " ".join(text.lower().split())


def exact(folded_texts: Sequence[str], query: str, limit: int) -> Ranked:
    """``folded_texts`` are the chunks' :func:`fold`, computed once per index."""
    phrases = [a or b for a, b in _QUOTED.findall(query)] or [query]
    needles = [fold(p) for p in phrases if p.strip()]
    counts: list[tuple[int, float]] = []
    for i, folded in enumerate(folded_texts):
        hits = sum(folded.count(n) for n in needles)
        if hits:
            counts.append((i, float(hits)))
    counts.sort(key=lambda item: -item[1])
    return counts[:limit]


def max_normalized(ranked: Ranked) -> Ranked:
    """Keyword-only scores divided by the best one (HoloDeck's keyword mode)."""
    best = max((s for _, s in ranked), default=0.0)
    return [(i, s / best if best > 0 else 0.0) for i, s in ranked]


def hybrid(
    semantic: Ranked, keyword: Ranked, exact: Ranked, weights: Sequence[float], k: int
) -> Ranked:
    """HoloDeck's hybrid mode: the fused legs, or the semantic ones alone when BM25 found
    nothing (the exact leg, ours, takes part when weighted)."""
    if not keyword and not (exact and weights[2] > 0):
        return semantic
    return reciprocal_rank_fusion([semantic, keyword, exact], weights, k)


def reciprocal_rank_fusion(legs: Sequence[Ranked], weights: Sequence[float], k: int) -> Ranked:
    pairs = [(leg, w) for leg, w in zip(legs, weights, strict=True) if w > 0 and leg]
    total = sum(w for _, w in pairs)
    if total <= 0:
        return []
    scores: dict[int, float] = {}
    for leg, weight in pairs:
        for rank, (i, _) in enumerate(leg, start=1):
            scores[i] = scores.get(i, 0.0) + (weight / total) / (k + rank)
    best_possible = 1.0 / (k + 1)
    fused = sorted(scores.items(), key=lambda item: -item[1])
    return [(i, s / best_possible) for i, s in fused]
