"""The showcase example (examples/acme-support) runs offline end to end through the real CLI.

The loopback model server plays the agent's model and the judge from the example's own
``model-rules.yaml``; both prompt versions run against a copy of the example in ``tmp_path``
(EvalRuns land in ``<copy>/results/``, so the repository tree stays clean).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from holodeck_core.cli.main import main
from holodeck_core.history.ingest import ingest_run
from holodeck_core.models import EvalRun, MetricResult, Status, TestResult
from holodeck_core.testing import ModelServer, load_rules, run_model_server
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "acme-support"
FILE_TYPES = {"pdf", "excel", "word", "powerpoint", "csv", "text"}
METRIC_KINDS = {"standard", "rag", "geval", "code"}
MULTI_TURN = "cancel-conversation"


@dataclass(frozen=True)
class ExampleRuns:
    v1: EvalRun
    v2: EvalRun
    exit_codes: tuple[int, int]
    config: dict[str, Any]
    judge_rules_used: dict[str, int]


def _all_metrics(result: TestResult) -> list[MetricResult]:
    turns = result.turns or []
    return [*result.metric_results, *(m for turn in turns for m in turn.metric_results)]


def _pass_rate(run: EvalRun) -> float:
    return run.report.summary.pass_rate


def _run_version(agent: Path, *extra: str) -> tuple[int, EvalRun]:
    results = agent.parent / "results" / "acme-support" / "holodeck-pipelines"
    before = set(results.glob("*.json")) if results.is_dir() else set()
    code = main(["test", str(agent), "-q", *extra])
    written = sorted(set(results.glob("*.json")) - before)
    assert len(written) == 1, f"expected one new EvalRun, found {written}"
    return code, EvalRun.model_validate_json(written[0].read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with run_model_server(load_rules(EXAMPLE / "model-rules.yaml")) as running:
        yield running


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, server: ModelServer) -> ExampleRuns:
    """Both prompt versions, once for the module: v1 first (it registers the variant too)."""
    tmp = tmp_path_factory.mktemp("example")
    copy = tmp / "acme-support"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns(".holodeck", "results"))
    agent = copy / "agent.yaml"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOLODECK_HOME", str(tmp / "holodeck-home"))
        patch.setenv("HOLODECK_MODEL_ENDPOINT", server.openai_base_url)
        for name in ("HOLODECK_HISTORY_DB", "HOLODECK_AGENTS", "OPENAI_API_KEY"):
            patch.delenv(name, raising=False)
        patch.chdir(tmp)
        code_v1, v1 = _run_version(agent)
        code_v2, v2 = _run_version(agent, "--prompt-version", "v2")
    by_rule = server.stats()["by_rule"]
    return ExampleRuns(
        v1=v1,
        v2=v2,
        exit_codes=(code_v1, code_v2),
        config=yaml.safe_load(agent.read_text(encoding="utf-8")),
        judge_rules_used={k: v for k, v in by_rule.items() if k.startswith("judge-")},
    )


def test_example_runs_offline_and_v2_beats_v1(runs: ExampleRuns) -> None:
    v1, v2 = runs.v1, runs.v2
    assert v1.metadata.prompt_version.version == "v1"
    assert v2.metadata.prompt_version.version == "v2"
    assert len(v1.report.results) >= 20 and len(v2.report.results) == len(v1.report.results)

    for run in (v1, v2):
        errored = [r.test_id for r in run.report.results if r.status is Status.ERROR]
        assert errored == [] and run.report.summary.errored == 0
        metric_errors = [
            (r.test_id, m.metric_name, m.error)
            for r in run.report.results
            for m in _all_metrics(r)
            if m.error is not None or m.passed is None
        ]
        assert metric_errors == []

    # v2's prompt holds the policy facts: it is clearly better, and only v1 fails the gate.
    assert 60.0 <= _pass_rate(v1) <= 75.0, _pass_rate(v1)
    assert _pass_rate(v2) >= 90.0 and _pass_rate(v2) > _pass_rate(v1)
    assert runs.exit_codes == (1, 0)
    v1_failed = {r.test_id for r in v1.report.results if r.status is Status.FAIL}
    assert {"return-window", "shipping-cost", "price-match", MULTI_TURN} <= v1_failed


def test_example_exercises_every_attachment_type(runs: ExampleRuns) -> None:
    processed = [f for r in runs.v1.report.results for f in r.processed_files]
    assert {f.original.type for f in processed} == FILE_TYPES
    assert all(f.error is None and f.markdown_content.strip() for f in processed)
    assert any(f.original.pages for f in processed if f.original.type == "pdf")
    assert any(f.original.pages for f in processed if f.original.type == "powerpoint")
    assert any(f.original.sheet and f.original.range for f in processed)
    # The files are the project's own (make_files.py), small and committed.
    files = sorted((EXAMPLE / "files").iterdir())
    assert {f.suffix for f in files} == {".pdf", ".xlsx", ".docx", ".pptx", ".csv", ".txt"}
    assert sum(f.stat().st_size for f in files) < 100_000


def test_example_scores_every_metric_kind(runs: ExampleRuns) -> None:
    for run in (runs.v1, runs.v2):
        metrics = [m for r in run.report.results for m in _all_metrics(r)]
        assert {m.kind for m in metrics} == METRIC_KINDS
        for kind in METRIC_KINDS:
            scored = [m for m in metrics if m.kind == kind]
            assert scored and all(m.raw_score is not None for m in scored), kind
        names = {m.metric_name for m in metrics}
        assert {"equality", "numeric", "rouge", "bleu", "contains", "regex", "latency"} <= names
        assert {"faithfulness", "contextual_relevancy", "Policy accuracy"} <= names
        latency = [m for m in metrics if m.metric_name == "latency"]
        assert all(m.unit == "ms" and m.score is None for m in latency)
    geval = [m for r in runs.v2.report.results for m in r.metric_results if m.kind == "geval"]
    assert all(m.details["score_source"] == "logprobs" for m in geval)
    assert all(m.details["evaluation_steps"] for m in geval)
    # Every judge step was answered by a judge rule, none fell through to an agent rule.
    assert {
        "judge-geval-steps",
        "judge-faithfulness-claims",
        "judge-faithfulness-supported",
        "judge-context-relevant",
        "judge-context-irrelevant",
    } <= set(runs.judge_rules_used)


def test_example_tool_matchers_and_multi_turn(runs: ExampleRuns) -> None:
    results = {r.test_id: r for r in runs.v2.report.results}
    assert all(r.tools_matched is not False for r in results.values())
    assert [i.name for i in results["two-orders"].tool_invocations] == ["order_status"] * 2
    refund = results["refund-request"].tool_invocations[0]
    assert refund.name == "refund_quote" and refund.args["order_id"] == "A-1003"

    cases = {c["name"]: c for c in runs.config["test_cases"]}  # ids: the sidecar's
    expected_inputs = [turn["input"] for turn in cases["Cancel an order in three turns"]["turns"]]
    for run, turn_1_passes in ((runs.v1, False), (runs.v2, True)):
        case = next(r for r in run.report.results if r.test_id == MULTI_TURN)
        assert case.turns is not None
        assert [t.turn_index for t in case.turns] == [0, 1, 2]
        assert [t.input for t in case.turns] == expected_inputs
        assert [t.tool_calls for t in case.turns] == [["order_status"], [], ["cancel_order"]]
        assert case.turns[0].response == "Order A-1002 is being processed."
        assert (case.turns[2].response or "").startswith("Order A-1002 has been cancelled")
        assert [t.passed for t in case.turns] == [True, turn_1_passes, True]


def test_multi_turn_tool_calls_are_stored_once_with_their_turn(
    runs: ExampleRuns, tmp_path: Path
) -> None:
    """The case-level roll-up of a multi-turn case repeats its turns' calls: the history keeps
    one ``tool_invocations`` row per call (docs/history.md), with its ``turn_index``."""
    db = tmp_path / "history.duckdb"
    ingest_run(db, runs.v2)
    [case] = [r for r in runs.v2.report.results if r.test_id == MULTI_TURN]
    expected = [(t.turn_index, i.call_id) for t in case.turns or [] for i in t.tool_invocations]
    assert expected and all(call_id for _, call_id in expected)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT turn_index, call_id FROM tool_invocations WHERE case_id = ? "
            "ORDER BY call_index",
            [MULTI_TURN],
        ).fetchall()
    assert rows == expected


def test_validate_lists_the_metrics_the_run_reports(
    runs: ExampleRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    """`holodeck validate` counts case- and turn-level metrics too, as `holodeck test` runs
    them (it used to say "2 standard (equality, latency)" for this agent's 14)."""
    assert main(["validate", str(EXAMPLE / "agent.yaml")]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if "metrics:" in line]
    listed = line.split(": ", 2)[2].split(", ")
    reported = {m.metric_name for r in runs.v1.report.results for m in _all_metrics(r)}
    assert sorted(listed) == sorted(reported)
    assert line.split(": ", 2)[1].strip().startswith(f"{len(reported)} (")
