"""Compatibility of the vectorstore tool with HoloDeck 0.7.1: overlap@k of the chunks both
return for the same queries (issue 14; a bench script, never CI).

For every vectorstore tool of the corpus samples, the queries are the sample's test-case
inputs. Both engines embed through the same loopback server (lexical vectors), so every
difference comes from chunking or scoring. Records (``vector_field``) are compared by id;
document chunks by content (a peer chunk and one of ours are the same when their word sets
overlap by half or more, Jaccard >= 0.5, since the two chunkers cut at different places).

    bash bench/peer_setup.sh
    .venv/bin/python bench/retrieval_compat.py --peer bench/.peer-venv
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from retrieval_bench import context, runtime

from holodeck_core.testing import run_model_server

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO.parent / "shared" / "corpus" / "holodeck" / "samples"
OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "NO_PROXY": "*"}

# Runs inside the peer venv: HoloDeck's own VectorStoreTool with its embeddings at the server.
PEER = r"""
import asyncio, json, sys
from holodeck.lib.litellm_support import LiteLLMEmbeddingService, LiteLLMModelSpec
from holodeck.models.tool import VectorstoreTool
from holodeck.tools.vectorstore_tool import VectorStoreTool

async def main():
    job = json.load(sys.stdin)
    out = {}
    for item in job["tools"]:
        tool = VectorStoreTool(VectorstoreTool.model_validate(item["config"]), base_dir=item["dir"])
        spec = LiteLLMModelSpec(model="openai/" + item["model"], api_key="sk-compat",
                                api_base=job["base_url"])
        tool.set_embedding_service(LiteLLMEmbeddingService(spec))
        await tool.initialize(force_ingest=True, provider_type="openai")
        out[item["key"]] = [await tool.search(q) for q in item["queries"]]
    json.dump(out, sys.stdout)

asyncio.run(main())
"""

_RECORD = re.compile(r"^\[\d+\] ID: (.*?) \| Score: [\d.]+$", re.MULTILINE)
_DOC = re.compile(r"^\[\d+\] Score: [\d.]+ \| Source: .*$", re.MULTILINE)
_WORD = re.compile(r"[a-z0-9]+")


def peer_items(text: str, structured: bool) -> list[str]:
    """What HoloDeck's result text lists: record ids, or chunk contents."""
    if text.startswith("No relevant results"):
        return []
    if structured:
        return _RECORD.findall(text)
    return [part.strip() for part in _DOC.split(text)[1:]]


def _same(a: str, b: str) -> bool:
    wa, wb = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    return bool(wa | wb) and len(wa & wb) / len(wa | wb) >= 0.5


def overlap(ours: list[str], peer: list[str], k: int, structured: bool) -> float | None:
    if not ours and not peer:
        return None  # both found nothing above the threshold: nothing to compare
    hits = (
        len(set(ours) & set(peer))
        if structured
        else sum(any(_same(p, o) for o in ours) for p in peer)
    )
    return hits / max(1, min(k, max(len(ours), len(peer))))


def tools() -> list[dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for agent in sorted(SAMPLES.glob("*/*/agent.yaml")):
        doc = yaml.safe_load(agent.read_text())
        queries = [c["input"] for c in doc.get("test_cases") or [] if c.get("input")]
        for tool in doc.get("tools") or []:
            if tool["type"] != "vectorstore" or not queries:
                continue
            config = {k: v for k, v in tool.items() if k != "database"}
            key = json.dumps({"dir": str(agent.parent.parent), "config": config}, sort_keys=True)
            entry = found.setdefault(
                key,
                {
                    "key": f"{agent.parent.parent.name}/{agent.parent.name}/{tool['name']}",
                    "samples": [],
                    "config": config,
                    "dir": str(agent.parent),
                    "queries": queries,
                    "model": tool.get("embedding_model") or "text-embedding-3-small",
                },
            )
            entry["samples"].append(agent.parent.name)
    return list(found.values())


async def ours(items: list[dict[str, Any]], server: Any, root: Path) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for item in items:
        ctx = replace(context(Path(item["dir"]), server), cache_dir=root / "cache")
        rt = runtime({**item["config"], "embedding_model": item["model"]}, ctx)
        await rt.open()
        out[item["key"]] = [await rt.call(rt.function, {"query": q}) for q in item["queries"]]
        await rt.aclose()
    return out


def compare(peer: Path) -> list[dict[str, Any]]:
    """Per corpus vectorstore tool: its key, samples, k, and per query the items both return
    (record ids or chunk texts) and their overlap@k; the mean over queries as ``overlap``."""
    items = tools()
    with run_model_server() as server, tempfile.TemporaryDirectory() as scratch:
        mine = asyncio.run(ours(items, server, Path(scratch)))
        job = {"base_url": server.openai_base_url, "tools": items}
        proc = subprocess.run(
            [str(peer / "bin" / "python"), "-c", PEER],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            timeout=1800,
            env={**os.environ, **OFFLINE, "HOME": scratch},
            check=False,
        )
    if proc.returncode != 0:
        sys.exit(f"the peer failed:\n{proc.stderr[-3000:]}")
    theirs = json.loads(proc.stdout)
    rows = []
    for item in items:
        structured = item["config"].get("vector_field") is not None
        k = int(item["config"].get("top_k", 5))
        queries = []
        for query, output, text in zip(
            item["queries"], mine[item["key"]], theirs[item["key"]], strict=True
        ):
            ids = [c.chunk_id if structured else c.text for c in output.chunks or []]
            peer_ids = peer_items(text, structured)
            score = overlap(ids, peer_ids, k, structured)
            queries.append({"query": query, "ours": ids, "holodeck": peer_ids, "overlap": score})
        scores = [q["overlap"] for q in queries if q["overlap"] is not None]
        mean = sum(scores) / len(scores) if scores else None
        rows.append(
            {
                "tool": item["key"],
                "samples": item["samples"],
                "k": k,
                "structured": structured,
                "overlap": mean,
                "queries": queries,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", required=True, help="the peer venv (bench/peer_setup.sh)")
    args = parser.parse_args()
    print("| tool (samples) | k | queries | overlap@k | returned, ours / HoloDeck |")
    print("|---|---|---|---|---|")
    for row in compare(Path(args.peer)):
        mean = "n/a" if row["overlap"] is None else f"{row['overlap']:.2f}"
        returned = " ".join(f"{len(q['ours'])}/{len(q['holodeck'])}" for q in row["queries"])
        samples = ", ".join(row["samples"])
        n = len(row["queries"])
        print(f"| {row['tool']} ({samples}) | {row['k']} | {n} | {mean} | {returned} |")


if __name__ == "__main__":
    main()
