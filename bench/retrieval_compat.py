"""Compatibility of the vectorstore tool with HoloDeck 0.7.1: overlap@k of the chunks both
return for the same queries (docs/agent-yaml.md; a bench script, never CI).

For every vectorstore and hierarchical_document tool of the corpus samples, the queries are
the sample's test-case inputs. Both engines embed through the same loopback server (lexical
vectors), so every difference comes from chunking or scoring. Records (``vector_field``) are
compared by id; document chunks by content (a peer chunk and one of ours are the same when
their word sets overlap by half or more, Jaccard >= 0.5; hierarchical chunks, cut as HoloDeck
cuts them, only when equal).

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
from holodeck.models.config import ExecutionConfig
from holodeck.models.tool import HierarchicalDocumentToolConfig, VectorstoreTool
from holodeck.tools.hierarchical_document_tool import HierarchicalDocumentTool
from holodeck.tools.vectorstore_tool import VectorStoreTool

async def main():
    job = json.load(sys.stdin)
    out = {}
    for item in job["tools"]:
        if item["config"]["type"] == "hierarchical_document":
            config = HierarchicalDocumentToolConfig.model_validate(item["config"])
            slow = ExecutionConfig(file_timeout=1800)  # a long PDF on a loaded machine
            tool = HierarchicalDocumentTool(config, base_dir=item["dir"], execution_config=slow)
        else:
            config = VectorstoreTool.model_validate(item["config"])
            tool = VectorStoreTool(config, base_dir=item["dir"])
        spec = LiteLLMModelSpec(model="openai/" + item["model"], api_key="sk-compat",
                                api_base=job["base_url"])
        tool.set_embedding_service(LiteLLMEmbeddingService(spec))
        await tool.initialize(force_ingest=True, provider_type="openai")
        found = [await tool.search(q) for q in item["queries"]]
        if item["config"]["type"] == "hierarchical_document":
            found = [[r.content for r in results] for results in found]
        out[item["key"]] = found
    json.dump(out, sys.stdout)

asyncio.run(main())
"""

MAX_QUERIES = 12
"""A tool's queries: its sample's first case and turn inputs."""
_RECORD = re.compile(r"^\[\d+\] ID: (.*?) \| Score: [\d.]+$", re.MULTILINE)
_DOC = re.compile(r"^\[\d+\] Score: [\d.]+ \| Source: .*$", re.MULTILINE)
_WORD = re.compile(r"[a-z0-9]+")


def peer_items(text: str | list[str], structured: bool) -> list[str]:
    """What HoloDeck's result lists: record ids, or chunk contents."""
    if isinstance(text, list):  # hierarchical_document: the results' contents
        return text
    if text.startswith("No relevant results"):
        return []
    if structured:
        return _RECORD.findall(text)
    return [part.strip() for part in _DOC.split(text)[1:]]


def _same(a: str, b: str) -> bool:
    wa, wb = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    return bool(wa | wb) and len(wa & wb) / len(wa | wb) >= 0.5


def overlap(ours: list[str], peer: list[str], k: int, exact: bool) -> float | None:
    if not ours and not peer:
        return None  # both found nothing above the threshold: nothing to compare
    hits = (
        len(set(ours) & set(peer)) if exact else sum(any(_same(p, o) for o in ours) for p in peer)
    )
    return hits / max(1, min(k, max(len(ours), len(peer))))


def tools() -> list[dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for agent in sorted(SAMPLES.glob("*/*/agent.yaml")):
        doc = yaml.safe_load(agent.read_text())
        cases = doc.get("test_cases") or []
        listing = agent.parent / str(doc.get("test_cases_file"))
        if doc.get("test_cases_file") and listing.is_file():  # financial-assistant's turns
            listed = yaml.safe_load(listing.read_text())
            cases = listed.get("test_cases", listed) if isinstance(listed, dict) else listed
        turns = [t for c in cases for t in [c, *(c.get("turns") or [])]]
        queries = [t["input"] for t in turns if t.get("input")][:MAX_QUERIES]
        for tool in doc.get("tools") or []:
            if tool["type"] not in ("vectorstore", "hierarchical_document") or not queries:
                continue
            dropped = {"database", "keyword_index", "context_model", "reranker_model"}
            config = {k: v for k, v in tool.items() if k not in dropped}
            if tool["type"] == "hierarchical_document":  # no LLM step: the chunks themselves
                config["contextual_embeddings"] = False
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


def tiktoken_cache(peer: Path) -> Path:
    """The ``cl100k_base`` file LiteLLM ships in HoloDeck's venv (its structure chunker's
    tiktoken would download it)."""
    found = sorted(peer.glob("lib/python*/site-packages/litellm/litellm_core_utils/tokenizers"))
    if not found:
        sys.exit(f"no LiteLLM tokenizers under {peer} (HoloDeck's venv installs LiteLLM)")
    return found[0]


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
            env={
                **os.environ,
                **OFFLINE,
                "HOME": scratch,
                "TIKTOKEN_CACHE_DIR": str(tiktoken_cache(peer)),
            },
            check=False,
        )
    if proc.returncode != 0:
        sys.exit(f"the peer failed:\n{proc.stderr[-3000:]}")
    theirs = json.loads(proc.stdout)
    rows = []
    for item in items:
        structured = item["config"].get("vector_field") is not None
        exact = structured or item["config"]["type"] == "hierarchical_document"
        k = int(item["config"].get("top_k", 5))
        queries = []
        for query, output, text in zip(
            item["queries"], mine[item["key"]], theirs[item["key"]], strict=True
        ):
            ids = [c.chunk_id if structured else c.text for c in output.chunks or []]
            peer_ids = peer_items(text, structured)
            score = overlap(ids, peer_ids, k, exact)
            queries.append({"query": query, "ours": ids, "holodeck": peer_ids, "overlap": score})
        scores = [q["overlap"] for q in queries if q["overlap"] is not None]
        mean = sum(scores) / len(scores) if scores else None
        rows.append(
            {
                "tool": item["key"],
                "samples": item["samples"],
                "k": k,
                "structured": structured,
                "exact": exact,
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
