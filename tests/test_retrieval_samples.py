"""Retrieval tools on real agents (docs/agent-yaml.md): every corpus sample with a vectorstore or
hierarchical_document tool runs end to end offline against the loopback server, with its own
``data/`` and no mock on its retrieval tools; the tool results hold its documents' text, the RAG
metrics score those chunks, and a second run embeds nothing. Two samples run in the default suite
(Markdown and JSON records, on OpenAI and on Ollama); the rest (PDFs through hierarchical_document,
Azure, Anthropic with an ``embedding_provider``, the 470 KB financial PDF) are marked slow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from holodeck_core.cli.main import main
from holodeck_core.testing import run_model_server
from tests.conftest import corpus_path
from tests.holodeck_requests_samples import claude_path, claude_rules
from tests.retrieval_samples import (
    RETRIEVAL_TYPES,
    prepare_sample,
    retrieval_samples,
    rules_for,
    set_sample_env,
)

FAST = {"customer-support/openai", "ticket-routing/ollama"}


def _name(agent: Path) -> str:
    return f"{agent.parent.parent.name}/{agent.parent.name}"


def _params() -> list[Any]:
    return [
        pytest.param(p, id=_name(p), marks=() if _name(p) in FAST else pytest.mark.slow)
        for p in retrieval_samples()
    ]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [str(value)]


def _from_its_documents(chunk: dict[str, Any], folder: Path) -> bool:
    """The chunk's text comes from the file it names (for records: a field of the file)."""
    source = folder / chunk["source"]
    if source.suffix == ".pdf":
        return bool(chunk["text"].strip())  # converted text; its source file is checked above
    raw = source.read_text()
    if source.suffix == ".json":
        return chunk["text"].split("\n")[0] in _strings(json.loads(raw))
    return " ".join(chunk["text"].split()[:12]) in " ".join(raw.split())


def test_every_retrieval_sample_is_covered() -> None:
    corpus_path("holodeck", "samples")  # skips with the reason when ../shared is absent
    assert len(retrieval_samples()) == 11


@pytest.mark.parametrize("sample", _params())
def test_sample_answers_from_its_own_documents(
    sample: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = yaml.safe_load(sample.read_text())
    names = [t["name"] for t in doc["tools"] if t["type"] in RETRIEVAL_TYPES]
    metrics = (doc.get("evaluations") or {}).get("metrics") or []
    rag = {m["metric_type"] for m in metrics if m.get("type") == "rag"}
    rules = rules_for(names)
    if claude_path(sample):  # the CLI's title request, its reminders, its tools' names
        rules = claude_rules(rules, doc.get("response_format"))
    with run_model_server(rules) as server:
        agent, _ = prepare_sample(sample, tmp_path / "sample", server.url)
        set_sample_env(agent, monkeypatch)
        code = main(["test", str(agent), "--limit", "2"])
        err = capsys.readouterr().err
        assert code in (0, 1), err
        assert "Traceback" not in err
        assert server.stats()["by_route"]["embeddings"] > 0
        path = sorted((agent.parent / "results").glob("*/holodeck-pipelines/*.json"))[-1]
        results = json.loads(path.read_text())["report"]["results"]
        for result in results:
            calls = [
                c
                for turn in result.get("turns") or [result]
                for c in turn["tool_invocations"]
                if c["name"] in {f"{n}_search" for n in names}
            ]
            assert {c["name"] for c in calls} == {f"{n}_search" for n in names}
            chunks = [chunk for c in calls for chunk in c["chunks"] or []]
            assert chunks, f"{result['test_name']}: no tool returned a chunk"
            for chunk in chunks:
                assert chunk["text"] in json.dumps([c["result"] for c in calls]) or chunk[
                    "text"
                ] in "".join(c["result"] for c in calls)
                assert _from_its_documents(chunk, agent.parent), chunk
            scored = [
                m
                for turn in result.get("turns") or [result]
                for m in turn["metric_results"]
                if m["metric_name"] in rag
            ]
            assert {m["metric_name"] for m in scored} == rag
            assert all(m["error"] is None and m["score"] is not None for m in scored), scored
            for m in scored:
                if m["metric_name"] == "contextual_relevancy":  # judged node by node
                    first = chunks[0]["text"].split("\n")[0][:40]
                    assert first in json.dumps(m["details"]), (first, m["details"])

        server.reset()
        assert main(["test", str(agent), "--limit", "2"]) in (0, 1)
        assert server.stats()["by_route"].get("embeddings", 0) == 0
