"""Tool matching and ``tool_correctness`` (HoloDeck's own verdicts on the shared corpus, argument
matchers, counts, extra calls), the operational metrics ``latency`` and ``cost`` (price table,
cache tokens, override), and the registry rules every metric runs under: registration and
direction, disabled metrics, sync metrics off the event loop, errors that never abort the other
metrics, and metric lists chosen turn over case over agent."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from holodeck_core.calls.prices import PRICES_ENV, packaged_price_table
from holodeck_core.metrics import (
    REGISTRY,
    EvalContext,
    MetricError,
    MetricInput,
    MetricRegistry,
    Score,
    ThresholdPolicy,
    aevaluate_metrics,
    evaluate_metric,
    evaluate_metrics,
    match_expected_tools,
    select_metrics,
)
from holodeck_core.metrics import text as text_metrics
from holodeck_core.models.evaluation import (
    LEGACY_JUDGE_METRICS,
    Direction,
    GEvalMetric,
    StandardMetric,
    StandardMetricName,
)
from holodeck_core.models.results import TokenUsage, ToolInvocation
from holodeck_core.models.test_case import ExpectedTool
from tests.conftest import SHARED, no_shared
from tests.metrics_helpers import TICKET_SCHEMA, call, run, std

TOOL_CORPUS = SHARED / "corpus" / "holodeck" / "generated" / "tool_calls"


# --- tool matching and tool_correctness ----------------------------------------------------


def _corpus_cases() -> list[tuple[str, list[Any], list[ToolInvocation], dict[str, Any]]]:
    agent = yaml.safe_load((TOOL_CORPUS / "agent.yaml").read_text())
    report = json.loads((TOOL_CORPUS / "report.json").read_text())
    by_name = {result["test_name"]: result for result in report["results"]}
    cases = []
    for case in agent["test_cases"]:
        expected = [e if isinstance(e, str) else ExpectedTool(**e) for e in case["expected_tools"]]
        outcome = by_name[case["name"]]
        calls = [ToolInvocation.model_validate(i) for i in outcome["tool_invocations"]]
        cases.append((case["name"], expected, calls, outcome))
    return cases


@pytest.mark.skipif(not TOOL_CORPUS.is_dir(), reason=no_shared(TOOL_CORPUS))
def test_tool_matcher_reproduces_holodeck_verdicts_on_the_corpus() -> None:
    cases = _corpus_cases()
    assert [name for name, *_ in cases] == [
        "weather_ok",
        "weather_wrong_arg",
        "weather_legacy_name_only",
    ]
    for _name, expected, calls, outcome in cases:
        report = match_expected_tools(expected, calls)
        assert report.matched is outcome["tools_matched"]
        assert report.missing == outcome["errors"]
    wrong = match_expected_tools(cases[1][1], cases[1][2])
    assert wrong.missing == [
        "expected get_weather(city~^Rome$): arg 'city' mismatch: expected regex '^Rome$', "
        "got 'Paris'"
    ]


def test_tool_names_match_by_case_sensitive_substring() -> None:
    calls = [call("mcp__tools__get_weather", city="Paris")]
    assert match_expected_tools(["weather"], calls).matched
    assert match_expected_tools([ExpectedTool(name="get_weather")], calls).matched
    missing = match_expected_tools(["Weather"], calls)
    assert not missing.matched and missing.missing == [
        "expected Weather: no call to 'Weather' found"
    ]


@pytest.mark.parametrize(
    ("matcher", "value", "matched"),
    [
        (1, 1.0, True),
        (True, 1, False),
        ("Paris", "paris", False),
        ([1, 2], [1.0, 2], True),
        ({"unit": "C"}, {"unit": "C"}, True),
        (None, None, True),
        ({"fuzzy": "paris"}, "Paris", True),
        ({"fuzzy": "paris"}, "Paris, France", True),
        ({"fuzzy": "paris"}, "Pariss", True),
        ({"fuzzy": "paris"}, "Rome", False),
        ({"fuzzy": "1,234"}, 1234, True),
        ({"fuzzy": "5%"}, "0.05", True),
        ({"fuzzy": "12345"}, "12346", False),  # numbers compare numerically, not by similarity
        ({"regex": "^Rome$"}, "Rome", True),
        ({"regex": "Rome"}, "Rome, Italy", False),  # fullmatch, as HoloDeck 0.7.1
        ({"regex": "Rome.*"}, "Rome, Italy", True),
        ({"regex": r"\d+"}, 42, True),
    ],
)
def test_argument_matchers(matcher: Any, value: Any, matched: bool) -> None:
    expected = ExpectedTool(name="lookup", args={"x": matcher})
    assert match_expected_tools([expected], [call("lookup", x=value)]).matched is matched


def test_count_is_a_minimum_and_missing_args_are_named() -> None:
    twice = ExpectedTool(name="divide", args={"b": 2}, count=2)
    calls = [call("divide", a=4, b=2), call("divide", a=9, b=3), call("divide", a=8, b=2)]
    assert match_expected_tools([twice], calls).matched
    three = ExpectedTool(name="divide", args={"b": 2}, count=3)
    report = match_expected_tools([three], calls)
    assert report.missing == ["expected divide(b=2) x3: expected 3 matching call(s), got 2"]
    no_arg = match_expected_tools([ExpectedTool(name="divide", args={"c": 1})], calls)
    assert no_arg.missing == ["expected divide(c=1): arg 'c' missing"]


def test_extra_calls_are_reported_and_do_not_fail() -> None:
    calls = [call("search", q="x"), call("get_weather", city="Paris"), call("log")]
    report = match_expected_tools([ExpectedTool(name="get_weather", args={"city": "Paris"})], calls)
    assert report.matched and report.extra_calls == (0, 2)
    rows = report.arg_match_details()
    assert rows == [
        {
            "expected_tool": "get_weather",
            "args_asserted": {"city": "Paris"},
            "matched_call_index": 1,
            "unmatched_reason": None,
        }
    ]


def test_tool_correctness_scores_the_share_of_expectations_met() -> None:
    expected = (
        ExpectedTool(name="get_weather", args={"city": {"fuzzy": "paris"}}),
        "convert",
        "book",
    )
    calls = (call("get_weather", city="Paris"), call("convert_units", v=1), call("search"))
    result = run(std("tool_correctness"), expected_tools=expected, tool_invocations=calls)
    assert result.score == pytest.approx(2 / 3)
    assert result.passed is False  # binary without a threshold
    assert result.details["missing"] == ["expected book: no call to 'book' found"]
    assert result.details["extra_calls"] == [{"index": 2, "name": "search", "args": {}}]
    partial = run(
        std("tool_correctness", threshold=0.6), expected_tools=expected, tool_invocations=calls
    )
    assert partial.passed is True
    extra_only = run(std("tool_correctness"), expected_tools=expected[:1], tool_invocations=calls)
    assert extra_only.passed is True and extra_only.score == 1.0


def test_tool_correctness_without_expected_tools_is_an_error() -> None:
    result = run(std("tool_correctness"), tool_invocations=(call("x"),))
    assert result.passed is None and "expected_tools" in (result.error or "")


# --- latency and cost ----------------------------------------------------------------------


def test_latency_threshold_is_a_maximum_in_ms() -> None:
    fast = run(std("latency", threshold=500), latency_ms=300)
    slow = run(std("latency", threshold=500), latency_ms=800)
    assert fast.passed is True and slow.passed is False
    for result in (fast, slow):
        assert result.score is None and result.unit == "ms" and result.scale is None
        assert result.direction is Direction.LOWER_IS_BETTER
    assert (fast.raw_score, slow.raw_score, fast.threshold) == (300.0, 800.0, 500.0)
    missing = run(std("latency", threshold=500))
    assert missing.passed is None and "latency" in (missing.error or "")


def test_cost_with_a_known_price() -> None:
    usage = TokenUsage(prompt_tokens=1000, completion_tokens=500, total_tokens=1500)
    result = run(std("cost", threshold=0.001), token_usage=usage, model="gpt-4o-mini")
    assert result.raw_score == pytest.approx((1000 * 0.15 + 500 * 0.60) / 1e6)
    assert result.unit == "USD" and result.score is None and result.passed is True
    assert result.details["price_table_version"] == packaged_price_table().version
    assert not run(std("cost", threshold=0.0001), token_usage=usage, model="gpt-4o-mini").passed
    dated = run(std("cost", threshold=1), token_usage=usage, model="gpt-4o-mini-2024-07-18")
    assert dated.details["price_key"] == "gpt-4o-mini"


def test_cost_counts_anthropic_cache_tokens() -> None:
    usage = TokenUsage(
        prompt_tokens=100, completion_tokens=10, cache_read_tokens=1000, cache_creation_tokens=200
    )
    result = run(std("cost", threshold=1), token_usage=usage, model="claude-sonnet-4-5-20250929")
    assert result.raw_score == pytest.approx((100 * 3 + 10 * 15 + 1000 * 0.30 + 200 * 3.75) / 1e6)


def test_cost_unknown_model_is_an_error_naming_it() -> None:
    result = run(std("cost", threshold=1), token_usage=TokenUsage(), model="my-finetune")
    assert result.passed is None
    assert "'my-finetune'" in (result.error or "") and PRICES_ENV in (result.error or "")
    not_a_snapshot = run(std("cost", threshold=1), token_usage=TokenUsage(), model="gpt-4o-mini-v2")
    assert "'gpt-4o-mini-v2'" in (not_a_snapshot.error or "")


def test_cost_price_table_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("version: team-7\nmodels:\n  my-finetune: {input: 10, output: 20}\n")
    monkeypatch.setenv(PRICES_ENV, str(prices))
    usage = TokenUsage(prompt_tokens=100_000, completion_tokens=50_000)
    result = run(std("cost", threshold=5), token_usage=usage, model="my-finetune")
    assert result.raw_score == pytest.approx(2.0)
    assert result.details["price_table_version"] == "team-7"
    assert run(std("cost", threshold=5), token_usage=usage, model="gpt-4o").error is None


# --- registry rules ------------------------------------------------------------------------


def test_every_non_judge_standard_metric_is_registered_with_consistent_direction() -> None:
    names = set(StandardMetricName.__args__) - set(LEGACY_JUDGE_METRICS)
    for name in names:
        spec = REGISTRY.get("standard", name)
        assert spec is not None, name
        threshold = 1.0 if name in ("latency", "cost") else None
        direction = std(name, threshold=threshold, pattern="x", json_schema={}).direction
        assert (spec.policy is ThresholdPolicy.MAXIMUM) == (direction is Direction.LOWER_IS_BETTER)
    assert REGISTRY.get("code", "code") is not None
    for name in LEGACY_JUDGE_METRICS:
        spec = REGISTRY.get("standard", name)  # judged on 1-5 by the judge metrics
        assert spec is not None and spec.kind == "standard"


def test_disabled_metrics_are_not_run() -> None:
    calls: list[str] = []
    registry = MetricRegistry()

    @registry.metric("equality", kind="standard", requires=())
    def spy(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
        calls.append(metric.display_name)
        return Score(score=1.0)

    metrics = [std("equality", enabled=False), std("equality", name="on")]
    results = evaluate_metrics(metrics, MetricInput(), registry=registry)
    assert [r.metric_name for r in results] == ["on"] and calls == ["on"]
    assert evaluate_metric(std("bleu", enabled=False), MetricInput()) is None
    assert asyncio.run(aevaluate_metrics([std("bleu", enabled=False)], MetricInput())) == []


def test_synchronous_metrics_run_off_the_event_loop() -> None:
    """A CPU-bound metric (METEOR's corpus load, a user's grader) must not stall the model
    calls in flight on the loop: sync metrics run on the metric thread."""
    threads: list[str] = []
    registry = MetricRegistry()

    @registry.metric("equality", kind="standard", requires=())
    def where(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
        threads.append(threading.current_thread().name)
        return Score(score=1.0)

    async def score() -> list[Any]:
        return await aevaluate_metrics([std("equality")], MetricInput(), registry=registry)

    [result] = asyncio.run(score())
    assert result.passed is True
    assert threads and threads[0].startswith("holodeck-metric")


def test_light_metrics_are_scored_on_the_loop_and_the_others_on_the_metric_thread() -> None:
    """A check linear in the response with no user pattern or code in it costs less than the
    hand-off to the metric thread (docs/benchmarks.md): it is scored on the loop. BLEU and
    METEOR (CPU), a user's regular expression (it may backtrack for long) and the code graders
    stay off it."""
    threads: list[str] = []
    registry = MetricRegistry()

    def where(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
        threads.append(threading.current_thread().name)
        return Score(score=1.0)

    registry.metric("equality", kind="standard", requires=(), inline=True)(where)
    registry.metric("regex", kind="standard", requires=())(where)

    async def score() -> list[Any]:
        metrics = [std("equality"), std("regex", pattern="x")]
        return await aevaluate_metrics(metrics, MetricInput(), registry=registry)

    assert [r.passed for r in asyncio.run(score())] == [True, True]
    assert threads[0] == threading.current_thread().name
    assert threads[1].startswith("holodeck-metric")
    light = {spec.name for spec in REGISTRY.specs() if spec.inline}
    assert light == {"equality", "exact_match", "numeric", "contains", "json_valid"}


def test_missing_ground_truth_is_an_error_result() -> None:
    result = run(std("bleu"), actual_output="Paris")
    assert result.passed is None and result.fail_on_error is False
    assert result.error == "metric 'bleu' needs a ground_truth; this case has none"
    strict = run(std("equality", fail_on_error=True), actual_output="Paris")
    assert strict.passed is False and strict.fail_on_error is True and strict.error


def test_no_response_at_all_is_an_error_and_an_empty_response_fails() -> None:
    assert run(std("equality"), expected_output="Paris").passed is None
    checks = [
        std("bleu"),
        std("rouge"),
        std("meteor"),
        std("equality"),
        std("exact_match"),
        std("numeric"),
        std("contains", pattern="Paris"),
        std("regex", pattern=r"\w"),
        std("json_valid"),
        std("json_schema", json_schema=TICKET_SCHEMA),
        std("numeric", name="numeric_path", response_path="answer"),
    ]
    results = evaluate_metrics(checks, MetricInput(actual_output="", expected_output="42"))
    assert len(results) == len(checks)
    for result in results:
        assert result.error is None, result
        assert result.passed is False, result.metric_name
        assert result.details.get("empty_response") is True or "response_error" in result.details


def test_a_raising_metric_never_aborts_the_others() -> None:
    registry = MetricRegistry()

    @registry.metric("equality", kind="standard", requires=())
    def boom(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
        raise ZeroDivisionError("division by zero")

    @registry.metric("contains", kind="standard", requires=())
    def fine(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
        return Score(score=1.0)

    results = evaluate_metrics(
        [std("equality"), std("contains", pattern="x")], MetricInput(), registry=registry
    )
    assert results[0].error == "ZeroDivisionError: division by zero" and results[0].passed is None
    assert results[1].passed is True
    assert all(isinstance(r.evaluation_time_ms, int) and r.evaluation_time_ms >= 0 for r in results)


def test_unregistered_and_async_metrics_in_the_sync_entry_point_are_errors() -> None:
    registry = MetricRegistry()

    @registry.metric(
        "geval",
        kind="geval",
        requires=("actual_output",),
        policy=ThresholdPolicy.DEFAULT,
        default_threshold=0.5,
    )
    async def judged(metric: GEvalMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
        return Score(score=0.7, raw_score=7, model_used="judge-1", retry_count=2)

    geval = GEvalMetric(name="Helpfulness", criteria="helpful")
    sync = evaluate_metrics([geval, std("bleu")], MetricInput(actual_output="x"), registry=registry)
    assert "aevaluate_metrics" in (sync[0].error or "")
    assert "no evaluator is registered for standard metric 'bleu'" in (sync[1].error or "")
    results = asyncio.run(
        aevaluate_metrics(
            [geval, std("equality")], MetricInput(actual_output="x", expected_output="x")
        )
    )
    assert "judge" in (results[0].error or "")  # registered, but no judge services given
    judged_results = asyncio.run(
        aevaluate_metrics([geval], MetricInput(actual_output="x"), registry=registry)
    )
    assert judged_results[0].kind == "geval" and judged_results[0].score == 0.7
    assert judged_results[0].raw_score == 7 and judged_results[0].retry_count == 2
    assert judged_results[0].model_used == "judge-1" and judged_results[0].passed is True
    assert judged_results[0].threshold == 0.5


def test_aevaluate_runs_sync_metrics_in_order() -> None:
    metrics = [std("equality"), std("contains", pattern="Par"), std("bleu")]
    inputs = MetricInput(actual_output="Paris", expected_output="Paris")
    results = asyncio.run(aevaluate_metrics(metrics, inputs))
    assert [r.metric_name for r in results] == ["equality", "contains", "bleu"]
    timing = {"evaluation_time_ms"}
    assert [r.model_dump(exclude=timing) for r in results] == [
        r.model_dump(exclude=timing) for r in evaluate_metrics(metrics, inputs)
    ]


def test_metric_error_carries_retries_and_model() -> None:
    registry = MetricRegistry()

    @registry.metric("relevance", kind="standard", requires=())
    def judge(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
        raise MetricError("judge failed after 3 attempts", retry_count=3, model_used="gpt-4o")

    result = evaluate_metrics([std("relevance")], MetricInput(), registry=registry)[0]
    assert (result.error, result.retry_count, result.model_used) == (
        "judge failed after 3 attempts",
        3,
        "gpt-4o",
    )


def test_duplicate_registration_is_refused() -> None:
    registry = MetricRegistry()
    registry.metric("bleu", kind="standard", requires=())(text_metrics.bleu)
    with pytest.raises(ValueError, match="already registered"):
        registry.metric("bleu", kind="standard", requires=())(text_metrics.bleu)


def test_precedence_turn_over_case_over_agent() -> None:
    agent, case, turn = [std("bleu")], [std("rouge")], [std("equality")]
    assert select_metrics(agent, case, turn) == turn
    assert select_metrics(agent, case, None) == case
    assert select_metrics(agent, None, None) == agent
    assert select_metrics(agent, [], None) == []  # an empty narrower list still replaces
    assert select_metrics(None, None, None) == []
