"""Retrieval tools: index build (time, embedding requests) and query latency per tool call.

Corpora, generated deterministically: 1,000 Markdown pages (a heading, two sections of prose,
about 250 words each) and 10,000 JSON records (a question, an answer, a category). Each is
indexed by a vectorstore tool against the loopback model server's embeddings route (lexical
vectors, 1536 dimensions) three ways: cold (nothing cached), with warm embeddings (index
deleted, per-text cache kept: what a changed chunking option costs) and warm (the stored
index is loaded: every run after the first). Then 200 tool calls measure query latency
(embedding the query, which the server answers, plus the search) for the vectorstore tools
and a hybrid hierarchical_document tool over the pages.

    .venv/bin/python bench/retrieval_bench.py [--pages 1000] [--records 10000] [--queries 200]

Nothing here is timed in tests; the figures go to docs/benchmarks.md."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from holodeck_core.calls.scheduler import CallScheduler
from holodeck_core.models import LLMProvider, Tool
from holodeck_core.providers.factory import make_client
from holodeck_core.testing import ModelServer, run_model_server
from holodeck_core.tools.registry import runtime_for
from holodeck_core.tools.retrieval.runtime import RetrievalRuntime
from holodeck_core.tools.runtime import ToolContext

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine_line

TOPICS = [
    "returns", "shipping", "warranty", "billing", "passwords", "accounts", "invoices",
    "blenders", "toasters", "kettles", "subscriptions", "refunds", "exchanges", "coupons",
    "delivery", "tracking", "repairs", "batteries", "filters", "cables",
]  # fmt: skip
WORDS = [
    "customer",
    "order",
    "policy",
    "days",
    "receipt",
    "store",
    "online",
    "support",
    "team",
    "product",
    "item",
    "price",
    "standard",
    "express",
    "free",
    "fee",
    "label",
    "carrier",
    "package",
    "box",
    "damage",
    "replace",
    "repair",
    "request",
    "email",
    "phone",
    "chat",
    "hours",
    "week",
    "month",
    "year",
    "plan",
    "upgrade",
    "downgrade",
    "cancel",
    "renew",
]


def _prose(rng: random.Random, topic: str, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    for i in range(0, n, 12):
        words[i] = topic
    sentences = [" ".join(words[i : i + 12]).capitalize() + "." for i in range(0, n, 12)]
    return " ".join(sentences)


def write_corpora(root: Path, pages: int, records: int) -> None:
    rng = random.Random(14)
    (root / "pages").mkdir(parents=True)
    for i in range(pages):
        topic = TOPICS[i % len(TOPICS)]
        text = (
            f"# {topic.title()} guide {i}\n\n## Overview\n\n{_prose(rng, topic, 120)}\n\n"
            f"## Details\n\n{_prose(rng, topic, 130)}\n"
        )
        (root / "pages" / f"page-{i:04d}.md").write_text(text)
    rows = [
        {
            "id": f"r{i:05d}",
            "question": f"What about {TOPICS[i % len(TOPICS)]} case {i}?",
            "answer": _prose(rng, TOPICS[i % len(TOPICS)], 40),
            "category": TOPICS[i % len(TOPICS)],
        }
        for i in range(records)
    ]
    (root / "records.json").write_text(json.dumps(rows))


def context(root: Path, server: ModelServer) -> ToolContext:
    model = LLMProvider(
        provider="openai", name="gpt-4o", endpoint=server.openai_base_url, api_key="sk-bench"
    )  # type: ignore[call-arg]
    return ToolContext(
        base_dir=root,
        resolve=lambda p: (root / p).resolve(),
        scheduler=CallScheduler(8),
        agent_model=model,
        client_factory=make_client,
        cache_dir=root / "home" / "cache",
        timeout=120,
    )


def runtime(tool: dict[str, Any], ctx: ToolContext) -> RetrievalRuntime:
    config = TypeAdapter(Tool).validate_python({"description": "bench", **tool})
    built = runtime_for(config, ctx, where=f"tools ({tool['name']})")
    assert isinstance(built, RetrievalRuntime)
    return built


def embedding_requests(server: ModelServer) -> int:
    return int(server.stats()["by_route"].get("embeddings", 0))


async def timed_open(tool: dict[str, Any], ctx: ToolContext, server: ModelServer) -> dict[str, Any]:
    server.reset()
    rt = runtime(tool, ctx)
    started = time.perf_counter()
    await rt.open()
    seconds = time.perf_counter() - started
    chunks = len(rt.index.chunks) if rt.index else 0
    await rt.aclose()
    return {"seconds": seconds, "requests": embedding_requests(server), "chunks": chunks}


async def query_latency(tool: dict[str, Any], ctx: ToolContext, queries: int) -> dict[str, float]:
    rt = runtime(tool, ctx)
    await rt.open()
    rng = random.Random(tool["name"])  # other queries per tool: no query-cache hits
    times: list[float] = []
    for i in range(queries):
        query = f"{rng.choice(TOPICS)} {rng.choice(WORDS)} {rng.choice(WORDS)} question {i}"
        started = time.perf_counter()
        out = await rt.call(rt.function, {"query": query})
        times.append((time.perf_counter() - started) * 1000)
        assert out.error is None and out.chunks, out.error
    await rt.aclose()
    times.sort()
    return {
        "median_ms": statistics.median(times),
        "p95_ms": times[int(len(times) * 0.95) - 1],
    }


async def bench(pages: int, records: int, queries: int) -> None:
    importlib.import_module("openai")  # the agent pays this import anyway: not indexing time
    root = Path(tempfile.mkdtemp(prefix="holodeck-retrieval-bench-"))
    try:
        write_corpora(root, pages, records)
        tools = {
            f"{pages} Markdown pages": {"type": "vectorstore", "name": "pages", "source": "pages"},
            f"{records:,} JSON records": {
                "type": "vectorstore",
                "name": "records",
                "source": "records.json",
                "id_field": "id",
                "vector_field": ["question", "answer"],
                "meta_fields": ["category"],
            },
        }
        hybrid = {
            "type": "hierarchical_document",
            "name": "pages_hybrid",
            "source": "pages",
            "contextual_embeddings": False,
        }
        with run_model_server() as server:
            ctx = context(root, server)
            print(machine_line())
            print("| corpus | chunks | cold build | requests | warm embeddings | warm index |")
            print("|---|---|---|---|---|---|")
            for label, tool in tools.items():
                cold = await timed_open(tool, ctx, server)
                shutil.rmtree(ctx.cache_dir / "indexes")
                rebuilt = await timed_open(tool, ctx, server)
                warm = await timed_open(tool, ctx, server)
                print(
                    f"| {label} | {cold['chunks']:,} | {cold['seconds']:.2f} s | "
                    f"{cold['requests']} | {rebuilt['seconds']:.2f} s ({rebuilt['requests']} "
                    f"requests) | {warm['seconds']:.2f} s ({warm['requests']} requests) |"
                )
            print()
            print("| tool | query latency median | p95 |")
            print("|---|---|---|")
            for label, tool in [*tools.items(), (f"{pages} pages, hybrid hierarchical", hybrid)]:
                lat = await query_latency(tool, ctx, queries)
                print(f"| {label} | {lat['median_ms']:.1f} ms | {lat['p95_ms']:.1f} ms |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--records", type=int, default=10000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(bench(args.pages, args.records, args.queries))


if __name__ == "__main__":
    main()
