"""``POST /v1/embeddings`` (and Azure's ``/openai/deployments/{d}/embeddings``, Ollama's native
``/api/embed``): vectors with real lexical similarity, from :func:`embed`.

A text becomes hashed features: its words (stop words dropped), word bigrams and character
3-grams of each word, weighted by sublinear term frequency, signed-hashed into the vector
(feature hashing) and L2-normalised. Texts that share words are close; unrelated texts are
nearly orthogonal, so in tests and the demo the relevant chunk really ranks first.

One component is common to every vector, so cosine = BASELINE + (1 - BASELINE) x lexical
cosine: unrelated texts score about 0.7 and identical ones 1.0, the range real embedding
models give, so ``min_similarity_score`` thresholds written for them keep their meaning.

The call is counted (route ``embeddings``; the request key hashes the input texts) and
faulted by the rules like any other; ``dimensions`` is honoured, else the model's usual size.
"""

from __future__ import annotations

import base64
import itertools
import math
import re
import zlib
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from holodeck_core.defaults import MODEL_SERVER_EMBEDDING_DIMENSIONS
from holodeck_core.testing.server.requests import BadRequest, Conversation

BASELINE = 0.7
MODEL_DIMENSIONS = {
    "text-embedding-3-large": 3072,
    "nomic-embed-text": 768,
    "nomic-embed-text:latest": 768,
    "mxbai-embed-large": 1024,
    "snowflake-arctic-embed": 1024,
}
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "that",
        "the",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)
_WEIGHTS = {"w": 1.0, "b": 0.6, "c": 0.25}


def _features(text: str) -> Counter[str]:
    words = [w for w in _WORD.findall(text.lower()) if w not in _STOP]
    features: Counter[str] = Counter(f"w:{w}" for w in words)
    features.update(f"b:{a} {b}" for a, b in itertools.pairwise(words))
    for word in words:
        padded = f"#{word}#"
        features.update(f"c:{padded[i : i + 3]}" for i in range(len(padded) - 2))
    return features


def embed(text: str, dimensions: int) -> npt.NDArray[np.float32]:
    """The unit vector of ``text`` in ``dimensions`` (at least 2) dimensions."""
    lexical = np.zeros(dimensions - 1, dtype=np.float64)
    for feature, count in _features(text).items():
        slot = zlib.crc32(feature.encode()) % (2 * (dimensions - 1))
        sign = 1.0 if slot % 2 == 0 else -1.0
        lexical[slot // 2] += sign * _WEIGHTS[feature[0]] * (1.0 + math.log(count))
    norm = float(np.linalg.norm(lexical))
    vector = np.zeros(dimensions, dtype=np.float64)
    if norm:
        vector[0] = math.sqrt(BASELINE)
        vector[1:] = lexical * (math.sqrt(1.0 - BASELINE) / norm)
    else:
        vector[0] = 1.0
    return vector.astype(np.float32)


def _inputs(body: Mapping[str, Any]) -> list[str]:
    raw = body.get("input")
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise BadRequest("'input' must be a non-empty string or a list of strings")
    if any(not t for t in texts):
        raise BadRequest("'input' cannot contain an empty string")
    return texts


def parse_embeddings(body: Mapping[str, Any]) -> Conversation:
    texts = _inputs(body)
    return Conversation(
        route="embeddings",
        model=str(body.get("model") or "loopback-embedding"),
        user_text="\n".join(texts),
        prompt_texts=texts,
    )


def embeddings_body(body: Mapping[str, Any], conv: Conversation) -> dict[str, Any]:
    dimensions = body.get("dimensions")
    if dimensions is not None and (not isinstance(dimensions, int) or dimensions < 2):
        raise BadRequest("'dimensions' must be an integer of at least 2")
    size = dimensions or MODEL_DIMENSIONS.get(conv.model, MODEL_SERVER_EMBEDDING_DIMENSIONS)
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for index, text in enumerate(conv.prompt_texts):
        vector = embed(text, size)
        value: Any = (
            base64.b64encode(vector.astype("<f4").tobytes()).decode()
            if as_base64
            else [float(x) for x in vector]
        )
        data.append({"object": "embedding", "index": index, "embedding": value})
    tokens = conv.prompt_tokens
    return {
        "object": "list",
        "data": data,
        "model": conv.model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def ollama_embed_body(openai: Mapping[str, Any]) -> dict[str, Any]:
    """Ollama's native ``POST /api/embed`` reply (what LiteLLM's ``ollama/`` models call) of the
    same vectors as :func:`embeddings_body`'s."""
    return {
        "model": openai["model"],
        "embeddings": [item["embedding"] for item in openai["data"]],
        "prompt_eval_count": openai["usage"]["prompt_tokens"],
    }
