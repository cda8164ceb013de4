"""HoloDeck's own samples with their MCP servers started as the samples start them
(``npx -y @modelcontextprotocol/server-filesystem ./data``, ``npx -y
@modelcontextprotocol/server-memory``), on temporary copies whose models point at the loopback
server. The vectorstore tools stay mocked (retrieval tools are the next issue), so the copies
keep the metrics that need no retrieval context."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from holodeck_core.cli.main import main
from holodeck_core.models import EvalRun
from holodeck_core.testing import run_model_server
from tests.conftest import corpus_path
from tests.test_mcp_tools import server_pids, wait_until

PACKAGES = ("@modelcontextprotocol/server-filesystem", "@modelcontextprotocol/server-memory")
JUDGE_RULES: list[dict[str, Any]] = [
    {"match": {"user": "^# Task: write G-Eval evaluation steps"}, "json": {"steps": ["Judge."]}},
    {"match": {"user": "^# Task: score a test case"}, "json": {"score": 8, "reason": "Fine."}},
]


@pytest.fixture(scope="module")
def npx() -> str:
    """npx, with both server packages in its cache (a first download can take a while)."""
    found = shutil.which("npx")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("npx is missing on CI: install Node.js (apt-get install nodejs npm)")
        pytest.skip("npx (Node.js) is not installed")
    for package in PACKAGES:  # stdin at EOF: each server starts, then exits
        subprocess.run(
            [found, "-y", package, "/tmp"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=300,
        )
    return found


def localize(sample: Path, folder: Path, base_url: str) -> tuple[Path, dict[str, Any]]:
    """A copy of ``sample`` whose models are the loopback server, with its vectorstores mocked
    and its retrieval-context metrics dropped."""
    shutil.copytree(sample, folder)
    agent = folder / "agent.yaml"
    data = yaml.safe_load(agent.read_text())
    for model in (data["model"], data["evaluations"]["model"]):
        model.update(endpoint=base_url, api_key="sk-test-key-1234")
    for tool in data["tools"]:
        if tool["type"] == "vectorstore":
            tool["mock"] = {"result": f"(no {tool['name']} match)"}
            tool.pop("database", None)  # the sample's config.yaml names no real store here
    (folder / "config.yaml").unlink(missing_ok=True)  # its ${OPENAI_API_KEY}: not set here
    metrics = data["evaluations"]["metrics"]
    data["evaluations"]["metrics"] = [m for m in metrics if m["type"] != "rag"]
    agent.write_text(yaml.safe_dump(data, sort_keys=False))
    return agent, data


def eval_run(folder: Path) -> EvalRun:
    [path] = sorted((folder / "results").rglob("holodeck-pipelines/*.json"))
    return EvalRun.model_validate_json(path.read_text())


def tool_rule(user: str, calls: list[dict[str, Any]], reply: Any) -> dict[str, Any]:
    return {"match": {"user": user}, "tool_calls": calls, **reply}


def test_legal_summarization_reads_its_real_files_through_the_filesystem_server(
    npx: str, tmp_path: Path
) -> None:
    sample = corpus_path("holodeck", "samples", "legal-summarization", "openai")
    analysis = {
        "summary": "{tool_results}",
        "document_type": "NDA",
        "parties": [],
        "key_clauses": [],
        "key_dates": [],
        "risks_identified": [],
    }
    read = {"name": "read_text_file", "arguments": {"path": "legal_templates.md"}}
    rules = {
        "default": {"reply": "I don't know."},
        "rules": [
            *JUDGE_RULES,
            tool_rule("Summarize the following NDA", [read], {"json": analysis}),
            tool_rule(
                "key risks",
                [
                    {
                        "name": "read_multiple_files",
                        "arguments": {"paths": ["sample_contracts.json"]},
                    }
                ],
                {"json": analysis},
            ),
            tool_rule(
                "standard clauses",
                [{"name": "legal_templates", "arguments": {"query": "license"}}, read],
                {"json": analysis},
            ),
        ],
    }
    folder = tmp_path / "legal"
    with run_model_server(rules) as server:
        agent, _ = localize(sample, folder, server.openai_base_url)
        code = main(["test", str(agent), "-q"])
    assert code in (0, 1)
    run = eval_run(folder)
    templates = (folder / "data" / "legal_templates.md").read_text()
    contracts = (folder / "data" / "sample_contracts.json").read_text()
    nda, risks, clauses = run.report.results
    assert [(t.name, t.result) for t in nda.tool_invocations] == [("read_text_file", templates)]
    [multiple] = risks.tool_invocations
    assert multiple.error is None and contracts.strip() in multiple.result
    assert [t.name for t in clauses.tool_invocations] == ["legal_templates", "read_text_file"]
    assert clauses.tool_invocations[1].result == templates
    assert wait_until(lambda: server_pids(folder / "data") == [], 5)


def test_customer_support_remembers_across_cases_through_the_memory_server(
    npx: str, tmp_path: Path
) -> None:
    sample = corpus_path("holodeck", "samples", "customer-support", "openai")
    remember = {
        "name": "create_entities",
        "arguments": {
            "entities": [
                {"name": "customer", "entityType": "person", "observations": ["forgot password"]}
            ]
        },
    }
    rules = {
        "default": {"reply": "I don't know."},
        "rules": [
            *JUDGE_RULES,
            tool_rule("reset my password", [remember], {"reply": "Noted: {tool_result}"}),
            tool_rule(
                "cancel my subscription",
                [{"name": "read_graph", "arguments": {}}],
                {"reply": "I remember: {tool_result}"},
            ),
        ],
    }
    folder = tmp_path / "support"
    with run_model_server(rules) as server:
        agent, data = localize(sample, folder, server.openai_base_url)
        [memory] = [t for t in data["tools"] if t["type"] == "mcp"]
        memory["env"] = {"MEMORY_FILE_PATH": str(folder / "memory.jsonl")}  # not the npx cache
        agent.write_text(yaml.safe_dump(data, sort_keys=False))
        code = main(["test", str(agent), "-q", "--parallel", "1"])
    assert code in (0, 1)
    results = eval_run(folder).report.results
    [created] = results[0].tool_invocations
    [graph] = results[1].tool_invocations
    assert created.name == "create_entities" and "forgot password" in created.result
    assert graph.name == "read_graph" and "forgot password" in graph.result  # one shared session
    assert "forgot password" in (results[1].agent_response or "")
    assert wait_until(lambda: server_pids(folder) == [], 5)


def test_kill_9_of_the_cli_stops_the_npx_filesystem_server(npx: str, tmp_path: Path) -> None:
    sample = corpus_path("holodeck", "samples", "legal-summarization", "openai")
    folder = tmp_path / "legal"
    with run_model_server({"default": {"reply": "late", "latency": 120}}) as server:
        agent, _ = localize(sample, folder, server.openai_base_url)
        proc = subprocess.Popen(
            [sys.executable, "-m", "holodeck_core.cli", "test", str(agent), "-q"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:  # the model call hangs: the server is up, the run is mid-flight
            assert wait_until(lambda: server.stats()["in_flight"] >= 1, 120)
            assert server_pids(folder / "data")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    assert wait_until(lambda: server_pids(folder / "data") == [], 5)
