"""Text and numbers from outside made valid once at the edge (docs/history.md, "Text and
numbers from outside"): a lone surrogate in a model reply (every protocol) or a target's
output is replaced with U+FFFD and noted, never a crash of the journal; a token count past
MAX_CALL_TOKENS is the case's ERROR naming it; ``history sync`` ingests every good EvalRun and
names each file it refuses."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.history import holodeck_import
from holodeck_core.models import EvalRun, Status
from holodeck_core.testing import run_model_server
from tests.hostile import no_traceback, run_cli
from tests.test_hardening_json import count_runs, good_run  # noqa: F401 (a fixture)

LONE = "\ud800"
PROVIDERS = {
    "openai": "provider: openai, name: m, api_key: sk-test-1234",  # Responses
    "ollama": "provider: ollama, name: m",  # Chat Completions
    "anthropic": "provider: anthropic, name: m, api_key: sk-ant-test-1234",  # Messages
}


def agent(folder: Path, model: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "agent.yaml"
    path.write_text(
        textwrap.dedent(f"""\
            name: outside
            model: {{{model}}}
            instructions: {{inline: "Answer."}}
            {"" if "openai" in model else "execution: {anthropic_path: direct}"}
            evaluations:
              metrics:
                - {{type: standard, metric: equality}}
            test_cases:
              - {{input: one, ground_truth: ok}}
              - {{input: two, ground_truth: ok}}
            """)
    )
    return path


def the_run(folder: Path) -> EvalRun:
    [path] = sorted((folder / "results").glob("*/holodeck-pipelines/*.json"))
    return EvalRun.model_validate_json(path.read_bytes())


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_a_lone_surrogate_in_a_model_reply_is_replaced_and_noted(
    tmp_path: Path, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = {
        "rules": [{"match": {"user": "one"}, "reply": f"ok{LONE}"}],
        "default": {"reply": f"{LONE}\udc00 \udfff{LONE}"},
    }
    with run_model_server(rules) as server:
        base = server.anthropic_base_url if provider == "anthropic" else server.openai_base_url
        path = agent(tmp_path, f"{PROVIDERS[provider]}, endpoint: {base}")
        db = tmp_path / "h.duckdb"
        monkeypatch.setenv("HOLODECK_HISTORY_DB", str(db))
        proc = run_cli(["test", str(path), "-q"])
    no_traceback(proc)
    assert proc.returncode == 1, proc.stderr  # answers that fail equality, not a crash (3)
    run = the_run(tmp_path)
    responses = sorted(r.agent_response or "" for r in run.report.results)
    assert responses == ["ok\ufffd", "\U00010000 \ufffd\ufffd"], responses  # a pair stays one
    for result in run.report.results:
        assert result.status is Status.FAIL
        assert result.notes and "lone surrogate" in result.notes[0], result.notes
    assert count_runs(db) == 1


TARGET = """\
from holodeck_core.agents.targets.python import TargetReply, TargetToolCall, TargetUsage


def answer(case):
    if case.input == "huge":
        return TargetReply("ok", usage=TargetUsage(10**29, 1))
    call = TargetToolCall("look\\ud800", {"k\\udfff": ["v\\ud800"]}, result={"r\\ud800": 1})
    return TargetReply("ok\\ud800", [call], TargetUsage(3, 2))
"""


def test_a_target_s_text_is_made_valid_and_its_huge_usage_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = agent(tmp_path, "provider: openai, name: m, api_key: sk-test-1234")
    path.write_text(
        path.read_text().replace(
            "{input: two, ground_truth: ok}", "{input: huge, ground_truth: ok}"
        )
    )
    (tmp_path / "my_target.py").write_text(TARGET)
    target = '{python: {callable: "my_target:answer"}}'
    monkeypatch.setenv("HOLODECK_HISTORY_DB", str(tmp_path / "h.db"))
    proc = run_cli(["test", str(path), "-q", "--target", target])
    no_traceback(proc)
    assert proc.returncode == 3, proc.stderr  # the huge count is an execution error
    by_input = {r.test_input: r for r in the_run(tmp_path).report.results}
    valid = by_input["one"]
    assert valid.agent_response == "ok\ufffd" and valid.status is Status.FAIL
    [call] = valid.tool_invocations
    assert (call.name, call.args, call.result) == (
        "look\ufffd",
        {"k\ufffd": ["v\ufffd"]},
        {"r\ufffd": 1},
    )
    assert valid.notes and "the target's reply" in valid.notes[0]
    huge = by_input["huge"]
    assert huge.status is Status.ERROR
    assert "usage.prompt_tokens" in huge.errors[0] and "MAX_CALL_TOKENS" in huge.errors[0]
    assert count_runs(tmp_path / "h.db") == 1


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(run: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = run
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        node[last] = value

    return change


BAD: dict[str, Callable[[dict[str, Any]], None]] = {
    "case-tokens-1e29": _set("report.results.0.token_usage.prompt_tokens", 10**29),
    "run-tokens-1e19": _set("report.summary.token_usage.total_tokens", 10**19),
    "negative-tokens": _set("report.results.0.token_usage.completion_tokens", -5),
    "time-1e25": _set("report.results.0.execution_time_ms", 10**25),
    "nan-score": _set("report.results.0.metric_results.0.score", "NaN"),
    "inf-cost": _set("report.summary.cost_usd", "inf"),
    "nan-in-metadata": _set("report.results.0.metadata", {"x": float("nan")}),
    "int-in-metadata": _set("report.results.0.metadata", {"x": 10**30}),
    "surrogate-name": _set("report.results.0.test_name", f"case {LONE}"),
    "surrogate-key": _set("report.results.0.metadata", {f"k{LONE}": 1}),
    "surrogate-response": _set("report.results.0.agent_response", f"{LONE}"),
}


def sync_folder(tmp_path: Path, good_run: Path, bad: list[str]) -> Path:  # noqa: F811
    run = json.loads(good_run.read_text())
    folder = tmp_path / "results" / "outside"
    folder.mkdir(parents=True)
    for index in range(3):
        good = json.loads(json.dumps(run))
        good["metadata"]["run_id"] = f"good-{index}"
        (folder / f"good-{index}.json").write_text(json.dumps(good))
    for shape in bad:
        broken = json.loads(json.dumps(run))
        broken["metadata"]["run_id"] = f"bad-{shape}"
        BAD[shape](broken)
        (folder / f"bad-{shape}.json").write_text(json.dumps(broken))  # surrogates escaped
    return folder


def test_sync_ingests_every_good_run_and_names_each_refused_file(
    tmp_path: Path,
    good_run: Path,  # noqa: F811
) -> None:
    folder = sync_folder(tmp_path, good_run, list(BAD))
    db = tmp_path / "h.duckdb"
    proc = run_cli(["history", "sync", str(folder.parent), "--db", str(db)])
    no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert "synced 3 run(s)" in proc.stderr, proc.stderr
    refused = [line for line in proc.stderr.splitlines() if "bad-" in line]
    for shape in BAD:
        assert sum(f"bad-{shape}.json" in line for line in refused) == 1, (shape, proc.stderr)
    assert count_runs(db) == 3
    imported = run_cli(
        ["history", "import", str(folder / "bad-surrogate-key.json"), "--db", str(db)]
    )
    assert imported.returncode == 2 and "not valid Unicode" in imported.stderr, imported.stderr


def test_a_value_the_history_refuses_names_its_file_and_spares_the_batch(
    tmp_path: Path,
    good_run: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the checks at reading (turned off here), DuckDB's own refusal of one run's value
    is that file's problem; the others of its batch are still written."""
    monkeypatch.setattr(holodeck_import, "invalid_at", lambda value: None)
    folder = sync_folder(tmp_path, good_run, ["time-1e25"])
    db = tmp_path / "h.duckdb"
    proc = run_cli(["history", "sync", str(folder.parent), "--db", str(db)])
    no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert "bad-time-1e25.json: not ingested" in proc.stderr, proc.stderr
    assert count_runs(db) == 3
