"""What keeps judging cheap and honest: the judge cache (a second run makes no calls, config
changes and errors are never served from it, unreadable entries are misses), judge errors
counted apart in the summary, ``rescore`` paying only for what the cache cannot answer, and the
building blocks (JSON and score-token parsing, packaged prompts, idempotent registration)."""

from __future__ import annotations

import asyncio
import math
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.metrics import REGISTRY, EvalContext
from holodeck_core.metrics.judge import JudgeServices
from holodeck_core.metrics.judge_cache import JudgeCache
from holodeck_core.metrics.judge_metrics import register_judge_metrics
from holodeck_core.metrics.judge_parse import NumberToken, first_json_object, weighted_score
from holodeck_core.metrics.judge_prompts import load_prompt
from holodeck_core.metrics.registry import AnyMetric, MetricRegistry
from holodeck_core.metrics.rescore import rescore_results
from holodeck_core.models.agent import Agent
from holodeck_core.models.results import ReportSummary, Status, TestResult, TurnResult
from holodeck_core.testing import ModelServer, run_model_server
from tests.judge_helpers import (
    CONTEXT,
    JUDGED,
    RAG_RULES,
    STEPS,
    STEPS_RULE,
    by_rule,
    cache_entries,
    case,
    geval,
    judge_run,
    one,
    openai_judge,
    scheduler,
    score_rule,
    with_judge_metrics,
)

TS = "2026-05-01T00:00:00+00:00"


# --- judge cache ---------------------------------------------------------------------------------


def test_judge_cache_second_run_makes_no_calls_and_config_changes_make_new_ones(
    tmp_path: Path,
) -> None:
    cache_dir = tmp_path / "judge-cache"
    cases = [case(f"Answer {i}.") for i in range(3)]
    with run_model_server({"rules": [STEPS_RULE, score_rule(7)]}) as server:
        first, services = judge_run(server, [geval()], cases, cache=JudgeCache(cache_dir))
        assert by_rule(server) == {"steps": 1, "score": 3}
        assert services.cache.stats.writes == 4 and cache_entries(cache_dir) == 4

        server.reset()
        other_key = openai_judge(server, api_key="sk-other")  # key/endpoint not in the cache key
        second, services = judge_run(
            server, [geval()], cases, cache=JudgeCache(cache_dir), model=other_key
        )
        assert server.stats()["total_calls"] == 0
        assert (services.cache.stats.hits, services.cache.stats.misses) == (4, 0)
        assert [r[0].score for r in second] == [r[0].score for r in first] == [0.7] * 3
        assert all(r[0].details["judge_cache_hits"] >= 1 for r in second)
        assert second[0][0].details["evaluation_steps"] == STEPS

        judge_run(server, [geval(threshold=0.9)], cases, cache=JudgeCache(cache_dir))
        assert server.stats()["total_calls"] == 0  # a threshold is not something the judge sees

        judge_run(server, [geval(criteria="concise")], cases, cache=JudgeCache(cache_dir))
        assert by_rule(server) == {"steps": 1, "score": 3}

        server.reset()
        judge_run(server, [geval()], cases, cache=JudgeCache(cache_dir, enabled=False))
        assert by_rule(server) == {"steps": 1, "score": 3}  # --no-judge-cache

        server.reset()
        hotter = openai_judge(server, temperature=0.9)  # a different judge configuration
        judge_run(server, [geval()], cases[:1], cache=JudgeCache(cache_dir), model=hotter)
        assert by_rule(server) == {"steps": 1, "score": 1}


def test_judge_errors_are_never_cached(tmp_path: Path) -> None:
    cache = tmp_path / "judge-cache"
    metric = geval(retry_on_failure=1, evaluation_steps=STEPS)
    with run_model_server({"rules": [score_rule(8, fault={"kind": "500"})]}) as server:
        failed = one(server, metric, case(), cache=JudgeCache(cache))
        assert failed.error is not None and cache_entries(cache) == 0
        server.set_rules({"rules": [score_rule(8)]})
        server.reset()
        healed = one(server, metric, case(), cache=JudgeCache(cache))
        assert by_rule(server) == {"score": 1}
    assert healed.error is None and healed.score == 0.8
    assert cache_entries(cache) == 1


def test_an_unreadable_cache_entry_is_a_miss(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path)
    cache.put("ab" + "0" * 62, {"data": {}, "text": ""})
    assert cache.get("ab" + "0" * 62) == {"data": {}, "text": ""}
    cache.path_for("cd" + "0" * 62).parent.mkdir(parents=True)
    cache.path_for("cd" + "0" * 62).write_text("{truncated")
    assert cache.get("cd" + "0" * 62) is None
    assert (cache.stats.hits, cache.stats.misses, cache.stats.unreadable) == (1, 1, 1)
    assert not list(tmp_path.glob("**/.tmp-*"))


# --- aggregation and rescore ---------------------------------------------------------------------


def test_an_errored_judge_metric_is_counted_apart_in_the_summary() -> None:
    rules = {
        "rules": [score_rule(6, pattern="good"), score_rule(6, name="down", fault={"kind": "500"})]
    }
    with run_model_server(rules) as server:
        metric = geval(retry_on_failure=1, evaluation_steps=STEPS)
        (good,), (bad,) = judge_run(server, [metric], [case("good"), case("bad")])[0]
    results = [
        TestResult(
            test_input="q",
            agent_response="good",
            metric_results=[good],
            passed=True,
            status=Status.PASS,
            execution_time_ms=1,
            timestamp=TS,
        ),
        TestResult(
            test_input="q",
            agent_response="bad",
            metric_results=[bad],
            passed=False,
            status=Status.FAIL,
            execution_time_ms=1,
            timestamp=TS,
        ),
    ]
    summary = ReportSummary.from_results(results)
    assert summary.metrics_errored == {"Politeness": 1}
    assert summary.metrics_evaluated == {"Politeness": 1}
    assert summary.average_scores == {"Politeness": 0.6}
    assert summary.metric_pass_rates == {"Politeness": 1.0}


def stored(output: str, name: str, **extra: Any) -> TestResult:
    fields: dict[str, Any] = {
        "test_id": name,
        "test_name": name,
        "test_input": "What is the capital of France?",
        "agent_response": output,
        "passed": True,
        "status": Status.PASS,
        "execution_time_ms": 5,
        "timestamp": TS,
    }
    return TestResult.model_validate({**fields, **extra})


def test_rescore_pays_only_for_what_the_cache_cannot_answer(tmp_path: Path) -> None:
    cache_dir = tmp_path / "judge-cache"
    results = [stored("Thanks, Paris.", "polite"), stored("Paris.", "terse")]
    rules = {"rules": [STEPS_RULE, score_rule(9, pattern="Thanks"), score_rule(4, name="terse")]}
    registry = with_judge_metrics()

    def rescore(metrics: Agent | list[AnyMetric]) -> list[TestResult]:
        async def go() -> list[TestResult]:
            services = JudgeServices(
                scheduler(), default_model=openai_judge(server), cache=JudgeCache(cache_dir)
            )
            async with services:
                return await rescore_results(
                    results, metrics, context=services.context(), registry=registry
                )

        return asyncio.run(go())

    with run_model_server(rules) as server:
        first = rescore([geval()])
        assert by_rule(server) == {"steps": 1, "score": 1, "terse": 1}
        server.reset()
        again = rescore([geval()])
        assert server.stats()["total_calls"] == 0
        stricter = rescore([geval(threshold=0.8)])
        assert server.stats()["total_calls"] == 0
        rescore([geval(criteria="concise")])
        assert by_rule(server) == {"steps": 1, "score": 1, "terse": 1}

        server.reset()
        agent = Agent.model_validate(
            {
                "name": "a",
                "instructions": {"inline": "x"},
                "model": {"provider": "openai", "name": "agent-model"},
                "evaluations": {
                    "metrics": [{"type": "geval", "name": "Politeness", "criteria": "polite"}]
                },
                "test_cases": [
                    {"id": "polite", "input": "What is the capital of France?"},
                    {
                        "id": "terse",
                        "input": "What is the capital of France?",
                        "retrieval_context": list(CONTEXT),
                        "evaluations": [{"type": "rag", "metric_type": "contextual_relevancy"}],
                    },
                ],
            }
        )
        server.set_rules({"rules": [*rules["rules"], *RAG_RULES["rules"]]})
        by_agent = rescore(agent)
        assert by_rule(server) == {"node_paris": 1, "node_banana": 1}  # G-Eval from the cache
    assert [r.metric_results[0].score for r in first] == [0.9, 0.4]
    assert [r.status for r in first] == [Status.PASS, Status.FAIL]
    assert [r.metric_results[0].score for r in again] == [0.9, 0.4]
    assert [r.status for r in stricter] == [Status.PASS, Status.FAIL]
    assert stricter[0].metric_results[0].threshold == 0.8
    assert by_agent[0].metric_results[0].metric_name == "Politeness"
    assert by_agent[1].metric_results[0].metric_name == "contextual_relevancy"  # case > agent
    assert by_agent[1].metric_results[0].score == pytest.approx(1 / 3)
    assert results[1].metric_results == []  # the inputs are never mutated


def test_rescore_keeps_cases_that_never_got_a_response() -> None:
    broken = TestResult(
        test_input="q",
        agent_response=None,
        passed=False,
        status=Status.ERROR,
        execution_time_ms=1,
        timestamp=TS,
        errors=["timeout"],
    )
    out = asyncio.run(rescore_results([broken], [geval()], context=EvalContext(), registry=JUDGED))
    assert out == [broken]


def test_rescore_heals_an_evaluation_error_and_scores_every_turn() -> None:
    strict = geval(fail_on_error=True, retry_on_failure=1, evaluation_steps=STEPS)
    errored = stored(
        "Paris.",
        "flaky",
        passed=False,
        status=Status.ERROR,
        error_source="evaluation",
        errors=["metric Politeness: judge 'judge' failed: server_error 500"],
    )
    turns = [
        TurnResult(turn_index=0, input="hi", response="Hello there!", passed=True),
        TurnResult(turn_index=1, input="bye", response="Whatever.", passed=True),
    ]
    multi = stored("Hello there!\n---\nWhatever.", "multi", turns=turns)
    rules = {"rules": [score_rule(8, pattern="Hello|Paris"), score_rule(2, name="rude")]}

    async def go(server: ModelServer) -> list[TestResult]:
        async with JudgeServices(scheduler(), default_model=openai_judge(server)) as services:
            return await rescore_results(
                [errored, multi], [strict], context=services.context(), registry=JUDGED
            )

    with run_model_server(rules) as server:
        healed, scored = asyncio.run(go(server))
    assert healed.status is Status.PASS and healed.error_source is None and healed.errors == []
    assert scored.status is Status.FAIL and scored.turns is not None
    assert [t.metric_results[0].score for t in scored.turns] == [0.8, 0.2]
    assert [t.passed for t in scored.turns] == [True, False]


# --- building blocks ---------------------------------------------------------------------


def test_first_json_object_is_found_in_prose_and_fences() -> None:
    assert first_json_object('Sure!\n```json\n{"score": 7, "reason": "ok"}\n```') == {
        "score": 7,
        "reason": "ok",
    }
    assert first_json_object('{bad} then {"a": {"b": 1}} and {"c": 2}') == {"a": {"b": 1}}
    assert first_json_object("[1, 2] no object") is None


def test_weighted_score_reads_the_token_after_the_score_key() -> None:
    tokens = [
        NumberToken('{"steps": 3, "x": ', 3, {3: 1.0}),
        NumberToken('{"score": ', 8, {8: 0.5, 6: 0.5}),
    ]
    assert weighted_score(tokens, 8, 0, 10) == 7.0
    assert weighted_score(tokens, 9, 0, 10) is None  # the parsed score must match the token
    assert weighted_score(None, 8, 0, 10) is None
    assert math.isclose(weighted_score(tokens[1:], 8, 0, 7) or 0, 6.0)


def test_every_packaged_prompt_has_a_version_and_both_sections() -> None:
    folder = resources.files("holodeck_core.metrics").joinpath("prompts")
    ids = [p.name.removesuffix(".txt") for p in folder.iterdir() if p.name.endswith(".txt")]
    assert {"geval_steps", "geval_score", "json_repair", "faithfulness_claims"} <= set(ids)
    for prompt_id in ids:
        prompt = load_prompt(prompt_id)
        assert prompt.version and prompt.user, prompt_id


def test_registration_is_idempotent_and_global() -> None:
    registry = MetricRegistry()
    register_judge_metrics(registry)
    register_judge_metrics(registry)
    keys = {spec.key for spec in registry.specs()}
    assert ("geval", "geval") in keys and ("standard", "fluency") in keys
    assert {("rag", m) for m in ("faithfulness", "contextual_recall")} <= keys
    assert REGISTRY.get("geval", "geval") is not None  # registered when metrics is imported
    assert JUDGED.get("standard", "bleu") is not None  # with_judge_metrics keeps the others
