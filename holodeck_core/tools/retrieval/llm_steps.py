"""The two LLM steps of hierarchical_document: contextual summaries (``contextual_embeddings``:
a short note situating each chunk in its document, prepended to the chunk before embedding,
Anthropic's contextual retrieval) and reranking (``enable_reranking``: the model orders the
candidates). Both go through the call scheduler and are cached on disk by model and prompt,
so a rebuilt index or a repeated query pays nothing."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from holodeck_core.calls.scheduler import CallScheduler, endpoint_key
from holodeck_core.models import LLMProvider, TokenUsage
from holodeck_core.models.cost import Heading
from holodeck_core.providers.base import ModelClient
from holodeck_core.providers.charges import chat_charge
from holodeck_core.providers.messages import Message
from holodeck_core.tools.retrieval.chunking import count_tokens
from holodeck_core.tools.retrieval.store import KeyValueStore

MAX_DOCUMENT_TOKENS = 8000
CONTEXT_SYSTEM = (
    "You situate excerpts within their document so that search can find them. Answer with "
    "the context only, in at most {limit} words."
)
CONTEXT_PROMPT = (
    "<document>\n{document}\n</document>\n\nHere is an excerpt of that document:\n"
    "<chunk>\n{chunk}\n</chunk>\n\nGive a short, succinct context that situates this excerpt "
    "within the whole document, to improve search retrieval of the excerpt."
)
RERANK_SYSTEM = (
    "You rank passages by how well they answer a search query. Answer with a JSON array of "
    "passage numbers, most relevant first, and nothing else."
)


@dataclass
class LLMStep:
    """One model used for a step, with its cache; counts the tokens it spent."""

    model: LLMProvider
    client: ModelClient
    scheduler: CallScheduler
    store: KeyValueStore
    heading: Heading
    """Where its spend is booked: ``reranker``, or ``embedding`` for contextual summaries
    (they are part of making the embeddings)."""
    timeout: float | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)
    calls: int = 0

    async def ask(self, system: str, prompt: str) -> tuple[str, TokenUsage]:
        identity = json.dumps(self.model.fingerprint_fields(), sort_keys=True)
        key = hashlib.sha256(f"{identity}\n{system}\n{prompt}".encode()).hexdigest()
        cached = await asyncio.to_thread(self.store.get, key)
        if cached is not None:
            return cached.decode(), TokenUsage()
        reply = await self.scheduler.call(
            lambda: self.client.complete(
                system, [Message(role="user", text=prompt)], timeout=self.timeout
            ),
            endpoint=endpoint_key(self.client.model),
            timeout=self.timeout,
            charge=chat_charge(
                self.heading, self.client.model, system, [Message(role="user", text=prompt)]
            ),
        )
        self.calls += 1
        self.usage = self.usage + reply.usage
        await asyncio.to_thread(self.store.put_many, [(key, reply.text.encode())])
        return reply.text, reply.usage


def _truncate(text: str, max_tokens: int) -> str:
    if count_tokens(text) <= max_tokens:
        return text
    words = text.split()
    return " ".join(words[: int(max_tokens * 0.75)])


async def contextualize(
    step: LLMStep, chunks: list[str], document: str, *, limit: int, concurrency: int
) -> list[str]:
    """``context + "\\n\\n" + chunk`` for each chunk (the text that gets embedded)."""
    gate = asyncio.Semaphore(concurrency)
    doc = _truncate(document, MAX_DOCUMENT_TOKENS)
    system = CONTEXT_SYSTEM.format(limit=limit)

    async def one(chunk: str) -> str:
        async with gate:
            context, _ = await step.ask(system, CONTEXT_PROMPT.format(document=doc, chunk=chunk))
        context = " ".join(context.split())
        return f"{context}\n\n{chunk}" if context else chunk

    return list(await asyncio.gather(*map(one, chunks)))


def parse_order(text: str, count: int) -> list[int]:
    """0-based positions from the model's 1-based numbers; unknown or repeated numbers are
    dropped and missing candidates keep their order at the end."""
    numbers: list[Any]
    try:
        numbers = json.loads(text)
        if not isinstance(numbers, list):
            numbers = []
    except ValueError:
        numbers = re.findall(r"\d+", text)
    order: list[int] = []
    for item in numbers:
        try:
            position = int(item) - 1
        except (TypeError, ValueError):
            continue
        if 0 <= position < count and position not in order:
            order.append(position)
    return order + [i for i in range(count) if i not in order]


async def rerank(step: LLMStep, query: str, passages: list[str]) -> tuple[list[int], TokenUsage]:
    listed = "\n\n".join(f"[{i}] {p}" for i, p in enumerate(passages, start=1))
    prompt = f"Query: {query}\n\nPassages:\n{listed}"
    text, usage = await step.ask(RERANK_SYSTEM, prompt)
    return parse_order(text, len(passages)), usage
