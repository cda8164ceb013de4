"""G-Eval and the judge call behind every judged metric, through the loopback model server and the
real openai / anthropic SDK clients: steps generated once and kept, the logprob-weighted score,
strict mode, what the judge sees, custom prompts and configured steps; retries, timeouts and
invalid replies; disabled metrics calling nothing; and which judge model is used."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from holodeck_core.metrics import EvalContext, aevaluate_metrics
from holodeck_core.metrics.judge import JudgeServices, default_judge_model, judge_services
from holodeck_core.metrics.registry import AnyMetric
from holodeck_core.models import LLMProvider
from holodeck_core.models.agent import Agent
from holodeck_core.models.evaluation import StandardMetric
from holodeck_core.models.results import MetricResult
from holodeck_core.testing import ModelServer, run_model_server
from tests.judge_helpers import (
    JUDGED,
    STEPS,
    STEPS_RULE,
    by_rule,
    case,
    evaluate_all,
    geval,
    judge_run,
    one,
    openai_judge,
    rag,
    rule,
    scheduler,
    score_rule,
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
