"""The data model: HoloDeck 0.7.1 files load, our EvalRun round-trips exactly, invariants hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from holodeck_core.models import (
    Agent,
    EvalRun,
    EvalRunMetadata,
    FileInput,
    LLMProvider,
    MetricResult,
    ReportSummary,
    Status,
    TestReport,
    TestResult,
    TokenUsage,
    ToolInvocation,
    Trigger,
)
from holodeck_core.models.eval_run import PromptVersion
from tests.conftest import corpus_path


def corpus_json_files() -> list[Path]:
    return sorted(corpus_path("holodeck", "generated").rglob("*.json"))


def test_every_holodeck_output_loads() -> None:
    files = corpus_json_files()
    assert len(files) >= 7
    for file in files:
        data = json.loads(file.read_text())
        model = EvalRun if "metadata" in data else TestReport
        loaded = model.model_validate(data)
        report = loaded.report if isinstance(loaded, EvalRun) else loaded
        assert report.summary.total_tests == len(report.results)


def test_holodeck_status_is_inferred_from_its_fields() -> None:
    report = TestReport.model_validate_json(
        corpus_path("holodeck", "generated", "multi_turn_timeout", "report.json").read_text()
    )
    statuses = {r.test_name: r.status for r in report.results}
    # the multi-turn case never got a response: it was not evaluated, so it is an ERROR
    assert statuses == {"single_turn_slow": Status.PASS, "multi_turn_slow": Status.ERROR}
    tools = TestReport.model_validate_json(
        corpus_path("holodeck", "generated", "tool_calls", "report.json").read_text()
    )
    assert [r.status for r in tools.results] == [Status.PASS, Status.FAIL, Status.PASS]
    assert tools.results[0].metric_results[0].scale == "0-1"


def make_run(api_key: str = "sk-not-a-real-key-123") -> EvalRun:
    agent = Agent.model_validate(
        {
            "name": "demo",
            "model": {"provider": "openai", "name": "gpt-4o-mini", "api_key": api_key},
            "instructions": {"inline": "Be brief."},
            "test_cases": [{"name": "Capital", "input": "Capital of France?"}],
        }
    )
    metric = MetricResult(
        metric_name="bleu",
        score=0.1 + 0.2,
        raw_score=30.000000000000004,
        threshold=0.5,
        passed=False,
        evaluation_time_ms=3,
        details={"signature": "nrefs:1|case:mixed"},
    )
    result = TestResult(
        test_id="capital",
        test_name="Capital",
        test_input="Capital of France?",
        agent_response="Paris ✓",
        tool_invocations=[ToolInvocation.of("t", {"a": 1}, {"r": [1.5]})],
        metric_results=[metric],
        passed=False,
        status=Status.FAIL,
        execution_time_ms=12,
        timestamp="2026-11-30T10:00:00.123456+00:00",
        token_usage=TokenUsage(prompt_tokens=3, completion_tokens=4, total_tokens=7),
    )
    report = TestReport(
        agent_name="demo",
        agent_config_path="agent.yaml",
        results=[result],
        summary=ReportSummary.from_results([result], wall_time_ms=15),
        timestamp="2026-11-30T10:00:01.000Z",
        holodeck_version="0.1.0",
    )
    prompt = PromptVersion(version="auto-1a2b3c4d", source="inline", body_hash="a" * 64)
    return EvalRun(
        report=report,
        metadata=EvalRunMetadata(
            agent_config=agent,
            prompt_version=prompt,
            holodeck_version="0.1.0",
            cli_args=["test", "agent.yaml"],
            run_id="r1",
            trigger=Trigger.CLI,
        ),
    )


def test_eval_run_round_trips_byte_for_byte() -> None:
    text = make_run().to_json()
    again = EvalRun.model_validate_json(text)
    assert again.to_json() == text
    assert again == EvalRun.model_validate_json(again.to_json())


def test_corpus_eval_runs_round_trip_through_our_model() -> None:
    for file in corpus_json_files():
        data = json.loads(file.read_text())
        if "metadata" not in data:
            continue
        first = EvalRun.model_validate(data).to_json()
        assert EvalRun.model_validate_json(first).to_json() == first


def test_secret_serializes_as_three_stars() -> None:
    run = make_run(api_key="sk-live-CANARY-0000")
    text = run.to_json()
    assert "CANARY" not in text
    assert json.loads(text)["metadata"]["agent_config"]["model"]["api_key"] == "***"
    model = LLMProvider(provider="openai", name="x", api_key=SecretStr("abc"))
    assert model.api_key is not None and model.api_key.get_secret_value() == "abc"


def test_summary_counts_must_add_up() -> None:
    with pytest.raises(ValidationError, match="must equal total_tests"):
        ReportSummary(total_tests=3, passed=1, failed=1, pass_rate=33.3, total_duration_ms=1)
    ok = ReportSummary(
        total_tests=3, passed=1, failed=1, errored=1, pass_rate=33.3, total_duration_ms=1
    )
    assert ok.errored == 1


def result(status: Status, score: float | None, *, weight: float = 1.0, ms: int = 10) -> TestResult:
    metric = MetricResult(
        metric_name="m",
        score=score,
        passed=None if score is None else score >= 0.5,
        error="judge down" if score is None else None,
    )
    passed = status is Status.PASS
    return TestResult(
        test_input="q",
        metric_results=[metric],
        passed=passed,
        status=status,
        execution_time_ms=ms,
        timestamp="2026-11-30T10:00:00Z",
        weight=weight,
        errors=[] if status is not Status.ERROR else ["model timeout"],
    )


def test_summary_keeps_error_apart_and_averages_zero_scores() -> None:
    results = [
        result(Status.PASS, 1.0, weight=3.0),
        result(Status.FAIL, 0.0),
        result(Status.ERROR, None),
    ]
    summary = ReportSummary.from_results(results, wall_time_ms=11)
    assert (summary.passed, summary.failed, summary.errored) == (1, 1, 1)
    assert summary.pass_rate == pytest.approx(100 / 3)  # ERROR counts in the denominator
    assert summary.weighted_pass_rate == pytest.approx(60.0)
    assert summary.average_scores == {"m": 0.5}  # the zero is averaged, not dropped
    assert summary.metrics_errored == {"m": 1}
    assert summary.metric_pass_rates == {"m": 0.5}
    assert (summary.total_duration_ms, summary.wall_time_ms) == (30, 11)


def test_result_status_must_agree_with_passed() -> None:
    with pytest.raises(ValidationError, match="contradicts"):
        TestResult(
            test_input="q",
            passed=True,
            status=Status.ERROR,
            execution_time_ms=0,
            timestamp="2026-11-30T10:00:00Z",
        )
    with pytest.raises(ValidationError, match="failed metric cannot pass"):
        TestResult(
            test_input="q",
            passed=True,
            status=Status.PASS,
            execution_time_ms=0,
            timestamp="2026-11-30T10:00:00Z",
            metric_results=[MetricResult(metric_name="m", score=0.1, passed=False)],
        )


def test_eval_run_checks_agent_name() -> None:
    run = make_run()
    data = json.loads(run.to_json())
    data["report"]["agent_name"] = "other"
    with pytest.raises(ValidationError, match=r"must equal metadata\.agent_config\.name"):
        EvalRun.model_validate(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"type": "pdf", "path": "a.pdf", "pages": [0]}, "greater than or equal to 1"),
        ({"type": "pdf"}, "exactly one of 'path' or 'url'"),
        ({"type": "pdf", "path": "a", "url": "https://x"}, "exactly one of 'path' or 'url'"),
        ({"type": "csv", "path": "a.csv", "pages": [1]}, "only to type pdf or powerpoint"),
        ({"type": "excel", "path": "a.xlsx", "range": "A1:ZZZZ"}, "should match pattern"),
    ],
)
def test_file_input_rules(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        FileInput.model_validate(data)


def test_prompt_version_rules() -> None:
    with pytest.raises(ValidationError, match="inline prompt has no file_path"):
        PromptVersion(version="v", source="inline", file_path="x", body_hash="a" * 64)
    with pytest.raises(ValidationError, match="needs file_path"):
        PromptVersion(version="v", source="file", body_hash="a" * 64)
    with pytest.raises(ValidationError):
        PromptVersion(version="v", source="inline", body_hash="XYZ")


def test_case_ids_are_stable_and_collisions_are_suffixed() -> None:
    agent = Agent.model_validate(
        {
            "name": "a",
            "model": {"provider": "openai", "name": "m"},
            "instructions": {"inline": "x"},
            "test_cases": [
                {"name": "Order status!", "input": "a"},
                {"name": "order status", "input": "b"},
                {"input": "no name here"},
                {"id": "fixed", "name": "whatever", "input": "c"},
            ],
        }
    )
    ids = [case.id for case in agent.cases]
    assert ids[:2] == ["order-status", "order-status-2"]
    assert len(ids[2] or "") == 12 and ids[3] == "fixed"
    assert any("order-status-2" in w for w in agent.warnings)
