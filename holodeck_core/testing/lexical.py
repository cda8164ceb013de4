"""Deterministic embeddings with real lexical similarity, for the loopback server.

A text becomes hashed features: its words (stop words dropped), word bigrams and character
3-grams of each word, weighted by sublinear term frequency, signed-hashed into the vector
(feature hashing) and L2-normalised. Texts that share words are close; unrelated texts are
nearly orthogonal, so in tests and the demo the relevant chunk really ranks first.

One component is common to every vector so that cosine = BASELINE + (1 − BASELINE) × lexical
cosine: unrelated texts score about 0.7 and identical ones 1.0, the range real embedding
models give, so ``min_similarity_score`` thresholds written for them keep their meaning."""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter

import numpy as np
import numpy.typing as npt

BASELINE = 0.7
DEFAULT_DIMENSIONS = 1536
MODEL_DIMENSIONS = {
    "text-embedding-3-large": 3072,
    "nomic-embed-text": 768,
    "nomic-embed-text:latest": 768,
    "mxbai-embed-large": 1024,
    "snowflake-arctic-embed": 1024,
}
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by can do does for from how i in is it its me my of on or our "
    "that the this to was what when where which who why will with you your".split()
)
_WEIGHTS = {"w": 1.0, "b": 0.6, "c": 0.25}


def dimensions_for(model: str, requested: int | None) -> int:
    if requested is not None:
        return requested
    return MODEL_DIMENSIONS.get(model, DEFAULT_DIMENSIONS)


def _features(text: str) -> Counter[str]:
    words = [w for w in _WORD.findall(text.lower()) if w not in _STOP]
    features: Counter[str] = Counter(f"w:{w}" for w in words)
    features.update(f"b:{a} {b}" for a, b in zip(words, words[1:], strict=False))
    for word in words:
        padded = f"#{word}#"
        features.update(f"c:{padded[i : i + 3]}" for i in range(len(padded) - 2))
    return features


def embed(text: str, dimensions: int) -> npt.NDArray[np.float32]:
    """The unit vector of ``text`` in ``dimensions`` (at least 2) dimensions."""
    if dimensions < 2:
        raise ValueError("dimensions must be at least 2")
    lexical = np.zeros(dimensions - 1, dtype=np.float64)
    for feature, count in _features(text).items():
        h = zlib.crc32(feature.encode())
        slot = h % (2 * (dimensions - 1))
        sign = 1.0 if slot % 2 == 0 else -1.0
        lexical[slot // 2] += sign * _WEIGHTS[feature[0]] * (1.0 + math.log(count))
    norm = float(np.linalg.norm(lexical))
    vector = np.empty(dimensions, dtype=np.float64)
    vector[0] = math.sqrt(BASELINE)
    vector[1:] = lexical * (math.sqrt(1.0 - BASELINE) / norm) if norm else 0.0
    if not norm:
        vector[0] = 1.0
    return vector.astype(np.float32)
