"""Embeddings through the provider's own API (the official ``openai`` SDK serves OpenAI,
Azure OpenAI and Ollama's OpenAI-compatible route), batched, every request through the one
call scheduler, every vector checked (finite, one width) and cached on disk per text
(docs/agent-yaml.md): key = provider kind + endpoint + model + dimensions + sha256(text)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from holodeck_core.calls.classify import classify
from holodeck_core.calls.errors import CallErrorKind, ModelCallError
from holodeck_core.calls.scheduler import CallScheduler, endpoint_key
from holodeck_core.models import TokenUsage
from holodeck_core.models.outside import call_usage
from holodeck_core.providers.charges import embedding_charge
from holodeck_core.tools.retrieval.settings import EmbeddingSpec
from holodeck_core.tools.retrieval.store import KeyValueStore

Vectors = npt.NDArray[np.float32]
MAX_BATCH_TEXTS = 256
MAX_BATCH_CHARS = 200_000  # well under OpenAI's 300k tokens per request


@dataclass
class EmbedStats:
    """What embedding cost: requests sent, texts embedded (cache misses), tokens."""

    requests: int = 0
    texts: int = 0
    cached: int = 0
    usage: TokenUsage = field(default_factory=TokenUsage)

    def add(self, other: EmbedStats) -> None:
        self.requests += other.requests
        self.texts += other.texts
        self.cached += other.cached
        self.usage = self.usage + other.usage


def text_key(spec: EmbeddingSpec, text: str) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()
    return hashlib.sha256(f"{spec.namespace}\n{digest}".encode()).hexdigest()


def _batches(texts: list[str]) -> list[list[str]]:
    batches: list[list[str]] = []
    current: list[str] = []
    chars = 0
    for text in texts:
        if current and (len(current) >= MAX_BATCH_TEXTS or chars + len(text) > MAX_BATCH_CHARS):
            batches.append(current)
            current, chars = [], 0
        current.append(text)
        chars += len(text)
    if current:
        batches.append(current)
    return batches


class Embedder:
    """Embeds texts with one model. Cache hits cost nothing; misses are deduplicated,
    batched and sent concurrently (the scheduler bounds how many run at once)."""

    def __init__(
        self,
        spec: EmbeddingSpec,
        scheduler: CallScheduler,
        store: KeyValueStore,
        client: Any,
        *,
        timeout: float | None = None,
    ) -> None:
        self.spec = spec
        self._scheduler = scheduler
        self._store = store
        self._client = client
        self._timeout = timeout
        self.dimensions: int | None = spec.dimensions

    async def embed(self, texts: list[str]) -> tuple[Vectors, EmbedStats]:
        """One row per text, L2-normalised. Raises ModelCallError when the API fails after
        the scheduler's retries."""
        stats = EmbedStats()
        keys = [text_key(self.spec, text) for text in texts]
        found = await asyncio.to_thread(self._store.get_many, sorted(set(keys)))
        missing: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in found:
                missing.setdefault(key, text)
        stats.cached = len(texts) - sum(1 for k in keys if k not in found)
        if missing:
            fresh = await self._fetch(list(missing.values()), stats)
            items = [
                (key, vector.astype(np.float32).tobytes())
                for key, vector in zip(missing, fresh, strict=True)
            ]
            del fresh  # the bytes are all that is kept: one copy besides the matrix
            await asyncio.to_thread(self._store.put_many, items)
            found.update(items)
        if not keys:
            return np.zeros((0, self.dimensions or 0), dtype=np.float32), stats
        # filled and normalised in place: the matrix is the one copy of every vector (a
        # stack, a quotient and a cast made three more: docs/agent-yaml.md)
        matrix = np.empty((len(keys), len(found[keys[0]]) // 4), dtype=np.float32)
        for row, key in enumerate(keys):
            matrix[row] = np.frombuffer(found[key], dtype=np.float32)
        found.clear()
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        matrix /= norms
        return matrix, stats

    async def _fetch(self, texts: list[str], stats: EmbedStats) -> list[Vectors]:
        parts = await asyncio.gather(*(self._request(batch, stats) for batch in _batches(texts)))
        vectors = [vector for part in parts for vector in part]
        widths = {len(v) for v in vectors}
        if len(widths) > 1 or (self.dimensions is not None and widths != {self.dimensions}):
            raise ModelCallError(
                CallErrorKind.BAD_REQUEST,
                f"the embeddings of {self.spec.model} have {sorted(widths)} dimensions"
                + (f", not the configured {self.dimensions}" if self.dimensions else "")
                + " (set embedding_dimensions to what the model returns)",
            )
        self.dimensions = widths.pop() if widths else self.dimensions
        return vectors

    async def _request(self, batch: list[str], stats: EmbedStats) -> list[Vectors]:
        request: dict[str, Any] = {"model": self.spec.model, "input": batch}
        if self.spec.dimensions is not None:
            request["dimensions"] = self.spec.dimensions
        # what the SDK sends anyway, said explicitly so it hands the base64 back undecoded:
        # its own decoding makes a list of Python floats, 8 times the bytes of the vector,
        # for every batch in flight (docs/agent-yaml.md)
        request["encoding_format"] = "base64"

        async def call() -> tuple[Any, list[Vectors]]:
            try:
                response = await self._client.embeddings.create(**request, timeout=self._timeout)
            except Exception as exc:
                raise classify(exc) from exc
            _usage(response)  # a count past any plausible one fails the call
            return response, self._vectors(response, len(batch))  # retried when malformed

        model = self.spec.endpoint.model_copy(update={"name": self.spec.model})
        response, vectors = await self._scheduler.call(
            call,
            endpoint=endpoint_key(self.spec.endpoint),
            timeout=self._timeout,
            charge=embedding_charge(model, batch, usage=_usage),
        )
        stats.requests += 1
        stats.texts += len(batch)
        stats.usage = stats.usage + _usage(response)
        return vectors

    def _vectors(self, response: Any, expected: int) -> list[Vectors]:
        """The response's vectors, each checked before anything caches it (docs/agent-yaml.md): one
        per text, numbers, finite, not empty, all of one width."""
        data = sorted(getattr(response, "data", None) or [], key=lambda d: d.index)
        if len(data) != expected:
            raise ModelCallError(
                CallErrorKind.MALFORMED,
                f"the embeddings response holds {len(data)} vectors for {expected} texts",
            )
        try:
            vectors = [_vector(item.embedding) for item in data]
        except (TypeError, ValueError) as exc:
            raise ModelCallError(
                CallErrorKind.MALFORMED, f"the embeddings of {self.spec.model} are not numbers"
            ) from exc
        for vector in vectors:
            if vector.ndim != 1 or vector.size == 0 or not np.isfinite(vector).all():
                raise ModelCallError(
                    CallErrorKind.MALFORMED,
                    f"the embeddings of {self.spec.model} hold an empty vector or values that "
                    "are not finite (NaN or infinity); nothing was cached",
                )
        return vectors

    async def aclose(self) -> None:
        await self._client.close()


def _vector(embedding: Any) -> Vectors:
    """One embedding as float32: base64 of little-endian float32s (what was asked), or the
    list of numbers a server that ignores ``encoding_format`` sends."""
    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding, validate=True), dtype="<f4").astype(
            np.float32
        )
    return np.asarray(embedding, dtype=np.float32)


def _usage(response: Any) -> TokenUsage:
    usage = getattr(response, "usage", None)
    return call_usage(
        "usage",
        prompt_tokens=getattr(usage, "prompt_tokens", 0),
        total_tokens=getattr(usage, "total_tokens", 0),
    )
