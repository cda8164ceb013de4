"""LLM-judge metrics (G-Eval, RAG, legacy 1-5), the judge cache and rescore, through the
loopback model server and the real openai / anthropic SDK clients."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.calls.scheduler import CallScheduler, RetryPolicy
from holodeck_core.metrics import REGISTRY, EvalContext, MetricInput, aevaluate_metrics
from holodeck_core.metrics.judge import JudgeServices, default_judge_model, judge_services
from holodeck_core.metrics.judge_cache import JudgeCache
from holodeck_core.metrics.judge_metrics import register_judge_metrics, with_judge_metrics
from holodeck_core.metrics.judge_parse import NumberToken, first_json_object, weighted_score
from holodeck_core.metrics.judge_prompts import load_prompt, packaged_prompt_ids
from holodeck_core.metrics.rag import ranked_precision
from holodeck_core.metrics.registry import AnyMetric, MetricRegistry
from holodeck_core.metrics.rescore import rescore_results
from holodeck_core.models import LLMProvider
from holodeck_core.models.agent import Agent
from holodeck_core.models.evaluation import GEvalMetric, RAGMetric, StandardMetric
from holodeck_core.models.results import (
    MetricResult,
    ReportSummary,
    Status,
    TestResult,
    TurnResult,
)
from holodeck_core.testing import ModelServer, run_model_server

JUDGED = with_judge_metrics()
STEPS = ["Check that the answer is polite", "Check that the answer is correct"]
TS = "2026-05-01T00:00:00+00:00"


# --- helpers ---------------------------------------------------------------------------------


def openai_judge(server: ModelServer, name: str = "judge", **extra: Any) -> LLMProvider:
    return LLMProvider.model_validate(
        {
            "provider": "openai",
            "name": name,
            "endpoint": server.openai_base_url,
            "api_key": "sk-test",
            **extra,
        }
    )


def anthropic_judge(server: ModelServer) -> LLMProvider:
    return LLMProvider.model_validate(
        {
            "provider": "anthropic",
            "name": "claude-judge",
            "endpoint": server.anthropic_base_url,
            "api_key": "sk-ant-test",
        }
    )


def scheduler() -> CallScheduler:
    # Four attempts per call at the scheduler level: the judge must not let it retry.
    return CallScheduler(8, RetryPolicy(max_attempts=4, base_delay=0.01, timeout=5))


def rule(name: str, task: str, **action: Any) -> dict[str, Any]:
    return {"name": name, "match": {"user": task}, **action}


STEPS_RULE = rule("steps", "Task: write G-Eval evaluation steps", json={"steps": STEPS})


def score_rule(score: int, name: str = "score", pattern: str = "", **extra: Any) -> dict[str, Any]:
    task = "Task: score a test case" + (f"[\\s\\S]*{pattern}" if pattern else "")
    return rule(name, task, json={"score": score, "reason": f"scored {score}"}, **extra)


def geval(**options: Any) -> GEvalMetric:
    return GEvalMetric.model_validate({"name": "Politeness", "criteria": "polite", **options})


def rag(metric_type: str, **options: Any) -> RAGMetric:
    return RAGMetric.model_validate({"metric_type": metric_type, **options})


def case(output: str = "Thanks, it is Paris.", **fields: Any) -> MetricInput:
    return MetricInput(input="What is the capital of France?", actual_output=output, **fields)


async def evaluate_all(
    services: JudgeServices,
    metrics: Sequence[AnyMetric],
    cases: Sequence[MetricInput],
    registry: MetricRegistry = JUDGED,
) -> list[list[MetricResult]]:
    ctx = services.context()
    return list(
        await asyncio.gather(
            *(aevaluate_metrics(metrics, c, context=ctx, registry=registry) for c in cases)
        )
    )


def judge_run(
    server: ModelServer,
    metrics: Sequence[AnyMetric],
    cases: Sequence[MetricInput],
    *,
    cache: JudgeCache | None = None,
    model: LLMProvider | None = None,
) -> tuple[list[list[MetricResult]], JudgeServices]:
    async def go() -> tuple[list[list[MetricResult]], JudgeServices]:
        services = JudgeServices(
            scheduler(), default_model=model or openai_judge(server), cache=cache
        )
        async with services:
            return await evaluate_all(services, metrics, cases), services

    return asyncio.run(go())


def one(server: ModelServer, metric: AnyMetric, inputs: MetricInput, **kw: Any) -> MetricResult:
    results, _ = judge_run(server, [metric], [inputs], **kw)
    assert len(results[0]) == 1
    return results[0][0]


def by_rule(server: ModelServer) -> dict[str, int]:
    return dict(server.stats()["by_rule"])


# --- G-Eval ----------------------------------------------------------------------------------


def test_geval_steps_are_generated_once_for_50_cases_and_kept_in_details() -> None:
    rules = {"rules": [STEPS_RULE, score_rule(7, pattern="Check that the answer is polite")]}
    with run_model_server(rules) as server:
        cases = [case(f"Answer number {i}.") for i in range(50)]
        results, services = judge_run(server, [geval()], cases)
        assert by_rule(server) == {"steps": 1, "score": 50}  # steps once, a score per case
    assert services.stats.requests == 51 and services.scheduler.stats.calls == 51
    for (result,) in results:
        assert result.error is None, result.error
        assert (result.score, result.raw_score, result.passed) == (0.7, 7, True)
        assert result.kind == "geval" and result.threshold == 0.5 and result.retry_count == 0
        assert result.model_used == "judge" and result.reasoning == "scored 7"
        assert result.details["evaluation_steps"] == STEPS
        assert result.details["steps_source"] == "generated"
        assert result.details["score_source"] == "judge"  # the rule gives no logprobs
    assert {"geval_steps@1", "geval_score@1"} <= set(services.provenance()["judge_prompts"])


def test_logprob_weighted_score_is_the_probability_weighted_mean() -> None:
    distribution = {"8": 0.6, "7": 0.3, "9": 0.1}
    rules = {"rules": [STEPS_RULE, score_rule(8, logprobs=distribution)]}
    with run_model_server(rules) as server:
        result = one(server, geval(), case())
    expected = 8 * 0.6 + 7 * 0.3 + 9 * 0.1  # 7.8 on 0..10
    assert result.raw_score == pytest.approx(expected, abs=1e-9)
    assert result.score == pytest.approx(expected / 10, abs=1e-9)
    assert result.details["judge_score"] == 8 and result.details["score_source"] == "logprobs"
    assert result.details["system_fingerprint"] == "fp_holodeck_loopback"


def test_logprob_tokens_outside_the_scale_are_ignored() -> None:
    rules = {"rules": [STEPS_RULE, score_rule(4, logprobs={"4": 0.5, "5": 0.25, "7": 0.25})]}
    with run_model_server(rules) as server:
        result = one(server, geval(scale=5), case())
    expected = (4 * 0.5 + 5 * 0.25) / 0.75  # "7" is outside 0..5
    assert result.raw_score == pytest.approx(expected, abs=1e-9)
    assert result.score == pytest.approx(expected / 5, abs=1e-9)


def test_geval_through_the_anthropic_protocol_uses_the_integer_score() -> None:
    rules = {"rules": [STEPS_RULE, score_rule(8, logprobs={"8": 0.6, "7": 0.4})]}
    with run_model_server(rules) as server:
        result = one(server, geval(), case(), model=anthropic_judge(server))
        stats = server.stats()
    assert stats["by_route"] == {"messages": 2}
    assert (result.score, result.raw_score, result.model_used) == (0.8, 8, "claude-judge")
    assert result.details["score_source"] == "judge"
    assert result.details["judge"] == {"provider": "anthropic", "name": "claude-judge"}


def test_strict_mode_is_binary() -> None:
    rules = {
        "rules": [
            STEPS_RULE,
            score_rule(10, name="perfect", pattern="Actual output:\\nPerfect"),
            score_rule(9, name="almost"),
        ]
    }
    with run_model_server(rules) as server:
        (perfect,), (almost,) = judge_run(
            server, [geval(strict_mode=True)], [case("Perfect."), case("Almost.")]
        )[0]
    assert (perfect.score, perfect.passed, perfect.threshold) == (1.0, True, 1)
    assert (almost.score, almost.raw_score, almost.passed) == (0.0, 0.0, False)
    assert almost.details["judge_score"] == 9


def test_evaluation_params_decide_what_the_judge_sees() -> None:
    rules = {
        "rules": [
            STEPS_RULE,
            score_rule(0, name="saw_ground_truth", pattern="GT-MARKER-42"),
            score_rule(10, name="output_only"),
        ]
    }
    inputs = case("Paris.", expected_output="GT-MARKER-42")
    with run_model_server(rules) as server:
        hidden = one(server, geval(evaluation_params=["input", "actual_output"]), inputs)
        assert by_rule(server).get("saw_ground_truth") is None
        shown = one(server, geval(evaluation_params=["actual_output", "expected_output"]), inputs)
        assert by_rule(server)["saw_ground_truth"] == 1
        missing = one(server, geval(evaluation_params=["expected_output"]), case())
    assert hidden.score == 1.0 and shown.score == 0.0
    assert missing.passed is None
    assert missing.error == (
        "metric 'Politeness' needs a ground_truth (evaluation_params lists expected_output); "
        "this case has none"
    )


def test_custom_prompt_replaces_the_default_template() -> None:
    custom = "Custom rubric Z42: is {actual_output} polite? Steps: {{steps}}"
    rules = {
        "rules": [
            STEPS_RULE,
            rule("custom", "^Custom rubric Z42: is Thanks a lot! polite", json={"score": 3}),
            score_rule(10, name="template"),
        ]
    }
    with run_model_server(rules) as server:
        result = one(server, geval(custom_prompt=custom), case("Thanks a lot!"))
        assert by_rule(server) == {"steps": 1, "custom": 1}
    assert result.score == 0.3
    assert any(p.startswith("geval_score@1+custom@") for p in result.details["judge_prompts"])


def test_configured_evaluation_steps_skip_generation() -> None:
    with run_model_server({"rules": [STEPS_RULE, score_rule(6)]}) as server:
        result = one(server, geval(evaluation_steps=["Is it polite?"]), case())
        assert by_rule(server) == {"score": 1}
    assert result.details["evaluation_steps"] == ["Is it polite?"]
    assert result.details["steps_source"] == "config" and result.score == 0.6


def test_an_empty_response_fails_without_a_judge_call() -> None:
    with run_model_server({"rules": [STEPS_RULE, score_rule(10)]}) as server:
        result = one(server, geval(), case(""))
        assert server.stats()["total_calls"] == 0
    assert (result.score, result.passed, result.reasoning) == (0.0, False, "the response is empty")


# --- retries, timeouts, invalid replies ------------------------------------------------------


def test_a_judge_failing_twice_succeeds_with_retry_on_failure_3_and_records_2_retries() -> None:
    flaky = score_rule(8, fault={"kind": "500", "first": 2})
    with run_model_server({"rules": [flaky]}) as server:
        steps = {"evaluation_steps": STEPS}
        ok = one(server, geval(retry_on_failure=3, **steps), case("first case"))
        assert by_rule(server) == {"score": 3}
        too_few = one(server, geval(retry_on_failure=1, **steps), case("second case"))
        # exactly 1 + retry_on_failure requests, although the scheduler allows 4 attempts
        assert by_rule(server) == {"score": 5}
    assert (ok.score, ok.retry_count, ok.error, ok.passed) == (0.8, 2, None, True)
    assert too_few.passed is None and too_few.retry_count == 1
    assert too_few.error is not None and "server_error 500" in too_few.error
    assert too_few.error.startswith("judge 'judge' failed:")
    assert "2 attempts, retry_on_failure 1" in too_few.error
    assert too_few.model_used == "judge"


def test_a_slow_judge_hits_timeout_ms_and_is_an_error_result() -> None:
    rules = {"rules": [score_rule(8, name="slow", pattern="slow case", latency=1.0), score_rule(8)]}
    with run_model_server(rules) as server:
        metric = geval(timeout_ms=150, retry_on_failure=1, evaluation_steps=STEPS)
        (slow,), (fast,) = judge_run(server, [metric], [case("slow case"), case("fast case")])[0]
        assert by_rule(server) == {"slow": 2, "score": 1}
    assert slow.error is not None and "timeout" in slow.error and "0.15 s" in slow.error
    assert slow.passed is None and slow.retry_count == 1
    assert fast.error is None and fast.score == 0.8


def test_fail_on_error_makes_a_judge_error_fail_the_metric() -> None:
    with run_model_server({"rules": [score_rule(8, fault={"kind": "500"})]}) as server:
        result = one(
            server, geval(retry_on_failure=1, fail_on_error=True, evaluation_steps=STEPS), case()
        )
    assert result.error is not None and result.passed is False and result.fail_on_error


def test_invalid_judge_json_is_asked_again_once() -> None:
    repair, task = "Task: repair your reply", "Task: score a test case"
    rules = {
        "rules": [
            rule("prose", f"{task}[\\s\\S]*Actual output:\\nA\\b", reply="Eight out of ten."),
            rule("repair_prose", f"{repair}[\\s\\S]*Eight out of ten", json={"score": 8}),
            rule("stubborn", f"{task}[\\s\\S]*Actual output:\\nB\\b", reply="No."),
            rule("repair_stubborn", f"{repair}[\\s\\S]*No\\.", reply="Still no."),
            score_rule(15, name="out_of_range", pattern="Actual output:\\nC\\b"),
            rule("repair_range", f"{repair}[\\s\\S]*from 0 to 10", json={"score": 9}),
        ]
    }
    with run_model_server(rules) as server:
        metric = geval(evaluation_steps=STEPS)
        (a,), (b,), (c,) = judge_run(server, [metric], [case("A"), case("B"), case("C")])[0]
        counts = by_rule(server)
    assert counts == {
        "prose": 1,
        "repair_prose": 1,
        "stubborn": 1,
        "repair_stubborn": 1,
        "out_of_range": 1,
        "repair_range": 1,
    }
    assert a.score == 0.8 and a.details["judge_requests"] == 2 and a.retry_count == 0
    assert c.score == 0.9
    assert b.passed is None and b.error is not None
    assert "unusable after one repair request" in b.error and "no JSON object" in b.error


# --- enabled: false, judge model ---------------------------------------------------------------


def test_disabled_judge_metrics_run_nothing() -> None:
    metrics: list[AnyMetric] = [
        geval(enabled=False),
        rag("faithfulness", enabled=False),
        StandardMetric(metric="fluency", enabled=False),
    ]
    with run_model_server({"rules": [STEPS_RULE, score_rule(8)]}) as server:
        results, services = judge_run(server, metrics, [case(retrieval_context=("x",))])
        assert server.stats()["total_calls"] == 0
    assert results == [[]] and services.stats.requests == 0


def test_judge_model_precedence_and_no_silent_default(tmp_path: Path) -> None:
    with run_model_server({"rules": [STEPS_RULE, score_rule(5)]}) as server:
        chosen = one(server, geval(model=openai_judge(server, "metric-judge")), case())
        default = one(server, geval(), case())

        async def no_default() -> MetricResult:
            async with JudgeServices(scheduler()) as services:
                return (await evaluate_all(services, [geval()], [case()]))[0][0]

        orphan = asyncio.run(no_default())
    assert chosen.model_used == "metric-judge" and default.model_used == "judge"
    assert orphan.error is not None and "no judge model" in orphan.error

    base = {
        "name": "a",
        "instructions": {"inline": "x"},
        "model": {"provider": "openai", "name": "agent-model"},
    }
    assert default_judge_model(Agent.model_validate(base)).name == "agent-model"
    judged = {
        **base,
        "evaluations": {
            "model": {"provider": "openai", "name": "eval-judge"},
            "metrics": [{"type": "geval", "name": "g", "criteria": "c"}],
        },
    }
    assert default_judge_model(Agent.model_validate(judged)).name == "eval-judge"
    services = JudgeServices.for_agent(
        Agent.model_validate(judged), scheduler(), cache_dir=tmp_path, use_cache=False
    )
    assert services.default_model is not None and services.default_model.name == "eval-judge"
    assert services.cache.directory == tmp_path and services.cache.enabled is False


def test_judge_metrics_need_judge_services() -> None:
    result = asyncio.run(
        aevaluate_metrics([geval()], case(), context=EvalContext(), registry=JUDGED)
    )[0]
    assert result.error is not None and "JudgeServices" in result.error
    with pytest.raises(Exception, match="JudgeServices"):
        judge_services(EvalContext())


# --- RAG ---------------------------------------------------------------------------------------

NODE = "Task: judge the relevance of a retrieved context node"
CONTEXT = ("Paris is the capital of France. It has two million people.", "Bananas are yellow.")


def verdicts(*values: str, key: str | None = None) -> dict[str, Any]:
    items = [
        {**({key: f"{key} {i}"} if key else {}), "verdict": v, "reason": f"because {i}"}
        for i, v in enumerate(values, 1)
    ]
    return {"verdicts": items}


RAG_RULES = {
    "rules": [
        rule("claims", "Task: extract the claims", json={"claims": ["c1", "c2", "c3"]}),
        rule("faith", "Task: check claims", json=verdicts("yes", "no", "idk")),
        rule("stmts", "Task: split a response", json={"statements": ["s1", "s2", "s3", "s4"]}),
        rule(
            "relevant",
            "Task: judge the relevance of statements",
            json=verdicts("yes", "yes", "no", "idk"),
        ),
        rule(
            "node_paris",
            f"{NODE}[\\s\\S]*Paris is the capital",
            json=verdicts("yes", "no", key="statement"),
        ),
        rule("node_banana", f"{NODE}[\\s\\S]*Bananas", json=verdicts("no", key="statement")),
        rule("precision", "Task: judge ranked context nodes", json=verdicts("yes", "no", "yes")),
        rule(
            "recall",
            "Task: attribute the expected output",
            json=verdicts("yes", "no", "yes", "yes", key="sentence"),
        ),
    ]
}


def test_each_rag_metric_produces_the_scripted_score() -> None:
    inputs = case(
        expected_output="Paris is the capital.",
        retrieval_context=(*CONTEXT, "France is in Europe."),
    )
    metrics = [
        rag("faithfulness"),
        rag("answer_relevancy"),
        rag("contextual_precision"),
        rag("contextual_recall"),
    ]
    with run_model_server(RAG_RULES) as server:
        (results,), _ = judge_run(server, metrics, [inputs])
        relevancy = one(server, rag("contextual_relevancy"), case(retrieval_context=CONTEXT))
        counts = by_rule(server)
    faith, answer, precision, recall = results
    assert faith.score == pytest.approx(2 / 3) and faith.passed is True  # idk is not a "no"
    assert faith.reasoning is not None and faith.reasoning.startswith("2 of 3 claims")
    assert [v["verdict"] for v in faith.details["verdicts"]] == ["yes", "no", "idk"]
    assert answer.score == 0.75
    assert precision.score == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert recall.score == 0.75
    assert relevancy.score == pytest.approx(1 / 3) and relevancy.passed is False
    assert {r.kind for r in [*results, relevancy]} == {"rag"}
    assert all(r.retry_count == 0 and r.model_used == "judge" for r in [*results, relevancy])
    assert counts == {
        "claims": 1,
        "faith": 1,
        "stmts": 1,
        "relevant": 1,
        "precision": 1,
        "recall": 1,
        "node_paris": 1,
        "node_banana": 1,
    }


def test_rag_definitions_edge_cases() -> None:
    assert ranked_precision([False, True]) == 0.5
    assert ranked_precision([False, False]) == 0.0
    rules = {
        "rules": [
            rule("claims", "Task: extract the claims", json={"claims": []}),
            rule("miscount", "Task: judge ranked context nodes", json=verdicts("yes")),
            rule(
                "recount",
                "Task: repair your reply[\\s\\S]*expected 2 verdicts",
                json=verdicts("no", "yes"),
            ),
        ]
    }
    with run_model_server(rules) as server:
        no_claims = one(
            server, rag("faithfulness", include_reason=False), case(retrieval_context=CONTEXT)
        )
        repaired = one(
            server,
            rag("contextual_precision"),
            case(expected_output="Paris", retrieval_context=CONTEXT),
        )
        assert by_rule(server) == {"claims": 1, "miscount": 1, "recount": 1}
        missing = one(server, rag("faithfulness"), case())
        empty = one(
            server, rag("contextual_recall"), case(expected_output="x", retrieval_context=("  ",))
        )
        blank = one(server, rag("answer_relevancy"), case("   "))
        assert server.stats()["total_calls"] == 3  # none for the last three
    assert no_claims.score == 1.0 and no_claims.reasoning is None  # include_reason: false
    assert repaired.score == 0.5
    assert missing.passed is None and missing.error is not None
    assert "needs a retrieval_context" in missing.error
    assert empty.error is not None and "needs a retrieval_context" in empty.error
    assert (blank.score, blank.passed) == (0.0, False)


# --- legacy 1-5 metrics -------------------------------------------------------------------------


def test_legacy_metrics_normalize_1_to_5_before_the_threshold() -> None:
    rules = {
        "rules": [
            rule("fluency", "Task: rate fluency", json={"score": 4, "reason": "fine"}),
            rule("relevance", "Task: rate relevance", json={"score": 3, "reason": "partly"}),
            rule(
                "grounded",
                "Task: rate groundedness[\\s\\S]*Paris is the capital",
                json={"score": 5},
            ),
        ]
    }
    with run_model_server(rules) as server:
        fluency = one(server, StandardMetric(metric="fluency"), case())
        relevance = one(server, StandardMetric(metric="relevance", threshold=0.7), case())
        grounded = one(
            server, StandardMetric(metric="groundedness"), case(retrieval_context=CONTEXT)
        )
        ungrounded = one(server, StandardMetric(metric="groundedness"), case())
        assert server.stats()["total_calls"] == 3
    assert (fluency.score, fluency.raw_score, fluency.passed) == (0.75, 4, True)
    # HoloDeck compared 3 >= 0.7 and passed; (3 - 1) / 4 = 0.5 < 0.7 fails.
    assert (relevance.score, relevance.raw_score, relevance.passed) == (0.5, 3, False)
    assert relevance.kind == "standard" and relevance.threshold == 0.7
    assert (grounded.score, grounded.raw_score) == (1.0, 5)
    assert ungrounded.error is not None and "retrieval_context or a context" in ungrounded.error


# --- judge cache ---------------------------------------------------------------------------------


def test_judge_cache_second_run_makes_no_calls_and_config_changes_make_new_ones(
    tmp_path: Path,
) -> None:
    cache_dir = tmp_path / "judge-cache"
    cases = [case(f"Answer {i}.") for i in range(3)]
    with run_model_server({"rules": [STEPS_RULE, score_rule(7)]}) as server:
        first, services = judge_run(server, [geval()], cases, cache=JudgeCache(cache_dir))
        assert by_rule(server) == {"steps": 1, "score": 3}
        assert services.cache.stats.writes == 4 and services.cache.entry_count() == 4

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
        assert failed.error is not None and JudgeCache(cache).entry_count() == 0
        server.set_rules({"rules": [score_rule(8)]})
        server.reset()
        healed = one(server, metric, case(), cache=JudgeCache(cache))
        assert by_rule(server) == {"score": 1}
    assert healed.error is None and healed.score == 0.8
    assert JudgeCache(cache).entry_count() == 1


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
    ids = packaged_prompt_ids()
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
