"""Running HoloDeck's corpus samples that have retrieval tools offline: a writable copy of the
sample whose model endpoints point at the loopback server, and the rules that make that server
play the agent (call every retrieval tool with the user's question, answer from the results)
and the judge (the scripted judge of examples/acme-support plus the RAG tasks it lacks).

Retrieval tools keep their config untouched (no mock); tools that need the network (MCP
servers started with npx) get a ``mock:``."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CORPUS, REPO

RETRIEVAL_TYPES = ("vectorstore", "hierarchical_document")
SAMPLES = CORPUS / "holodeck" / "samples"


def retrieval_samples() -> list[Path]:
    return sorted(
        p
        for p in SAMPLES.glob("*/*/agent.yaml")
        if any(f"type: {t}" in p.read_text() for t in RETRIEVAL_TYPES)
    )


def _verdicts(key: str | None, verdict: str, n: int = 1) -> dict[str, Any]:
    item = {**({key: "$1"} if key else {}), "verdict": verdict, "reason": "scripted"}
    return {"verdicts": [item] * n}


def rules_for(tools: list[str]) -> dict[str, Any]:
    """Judge rules first (judge prompts start with ``# Task:``), then the contextual summary
    of hierarchical_document (``<document>``), then the agent."""
    acme = yaml.safe_load((REPO / "examples" / "acme-support" / "model-rules.yaml").read_text())
    judge = [r for r in acme["rules"] if str(r.get("name", "")).startswith("judge-")]
    more = [
        {
            "name": "judge-answer-statements",
            "match": {"user": "^# Task: split a response"},
            "json": {"statements": ["The answer restates the documents."]},
        },
        {
            "name": "judge-answer-relevant",
            "match": {"user": "^# Task: judge the relevance of statements"},
            "json": _verdicts(None, "yes"),
        },
        *(  # one verdict per retrieved node: the prompt states how many it expects
            {
                "name": f"judge-precision-{n}",
                "match": {"user": rf"^# Task: judge ranked context nodes[\s\S]*\({n} verdicts\)"},
                "json": _verdicts(None, "yes" if n % 2 else "no", n),
            }
            for n in range(1, 40)
        ),
        {
            "name": "judge-recall",
            "match": {"user": "^# Task: attribute the expected output"},
            "json": _verdicts("sentence", "yes"),
        },
        {
            "name": "context-summary",
            "match": {"user": "^<document>"},
            "reply": "An excerpt of the source document.",
        },
    ]
    agent = {
        "name": "agent-searches",
        "match": {"user": r"(?s)^(?!# Task:)(.+)"},
        "tool_calls": [{"name": f"{t}_search", "arguments": {"query": "$1"}} for t in tools],
        "reply": "From the documents: {tool_results}",
    }
    return {"default": {"reply": "I don't know."}, "rules": [*judge, *more, agent]}


def prepare_sample(agent_file: Path, dest: Path, server_url: str) -> tuple[Path, list[str]]:
    """A writable copy of the sample in ``dest`` with every model endpoint at the loopback
    server; returns the copied agent.yaml and the names of its retrieval tools."""
    shutil.copytree(agent_file.parent, dest)
    shared = agent_file.parent.parent / "openai" / "data"
    if not (dest / "data").exists() and shared.is_dir():  # financial-assistant/claude's
        shutil.copytree(shared, dest / "data")
    for path in [dest, *dest.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    doc = yaml.safe_load((dest / "agent.yaml").read_text())
    evaluations = doc.get("evaluations") or {}
    blocks = [doc["model"], evaluations.get("model"), doc.get("embedding_provider")]
    tools = doc.get("tools") or []
    for tool in tools:
        blocks += [tool.get("context_model"), tool.get("reranker_model")]
        if tool["type"] == "mcp":
            tool["mock"] = {"result": f"{tool['name']} is not available offline"}
    for block in blocks:
        if block:
            openai = block["provider"] == "openai"
            block["endpoint"] = f"{server_url}/v1" if openai else server_url
    claude = doc.get("claude") or {}
    if claude.get("permission_mode") == "acceptAll":  # HoloDeck and we refuse it without
        claude["i_understand_this_is_unsafe"] = True
    (dest / "agent.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return dest / "agent.yaml", [t["name"] for t in tools if t["type"] in RETRIEVAL_TYPES]


def set_sample_env(agent_yaml: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = agent_yaml.parent / "config.yaml"  # HoloDeck resolves its variables too
    text = agent_yaml.read_text() + (config.read_text() if config.is_file() else "")
    for var in set(re.findall(r"\$\{([A-Z_0-9]+)", text)):
        monkeypatch.setenv(var, f"dummy-{var.lower()}")
    for var in ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(var, "sk-loopback-test")
