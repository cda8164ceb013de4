"""Code graders (``type: code``): a user's Python function as a metric. The return shapes it may
give, its problems as error results that stop no other metric, the HoloDeck context it sees,
two agents' grader modules kept apart, a HoloDeck sample grader run unchanged, and a grader
reference checked at load without running user code."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.config.graders import check_grader_reference
from holodeck_core.metrics import (
    EvalContext,
    GraderContext,
    GraderResult,
    MetricInput,
    evaluate_metrics,
)
from holodeck_core.models.evaluation import CodeMetric
from holodeck_core.models.results import MetricResult, ToolInvocation
from tests.conftest import SHARED, no_shared
from tests.metrics_helpers import call, std

FINANCE_SAMPLE = SHARED / "corpus" / "holodeck" / "samples" / "financial-assistant" / "claude"


# --- code graders --------------------------------------------------------------------------

GRADERS = """
from holodeck_core.metrics import GraderResult

def yes(ctx):
    return True

def no(ctx):
    return False

def seven_tenths(ctx):
    return 0.7

def structured(ctx):
    return GraderResult(score=0.2, passed=True, reason="lenient", details={"k": 1})

def as_dict(ctx):
    return {"score": 0.9, "reason": "dict"}

class Verdict:
    score = 0.1
    reason = "object"

def as_object(ctx):
    return Verdict()

def boom(ctx):
    raise ValueError("grader exploded")

def out_of_range(ctx):
    return 1.7

def wrong_type(ctx):
    return "yes"

def echo(ctx):
    return GraderResult(score=1.0, details={
        "input": ctx.turn_input, "response": ctx.agent_response, "truth": ctx.ground_truth,
        "tools": [t.name for t in ctx.tool_invocations], "retrieval": list(ctx.retrieval_context),
        "turn": ctx.turn_index, "case": ctx.test_case_name, "config": ctx.turn_config,
    })
"""


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    (tmp_path / "graders").mkdir()
    (tmp_path / "graders" / "__init__.py").write_text("")
    (tmp_path / "graders" / "checks.py").write_text(GRADERS)
    return tmp_path


def grade(agent_dir: Path, function: str, **options: Any) -> MetricResult:
    metric = CodeMetric(grader=f"graders.checks:{function}", **options)
    inputs = MetricInput(input="q", actual_output="a", expected_output="a")
    return evaluate_metrics([metric], inputs, context=EvalContext(base_dir=agent_dir))[0]


@pytest.mark.parametrize(
    ("function", "options", "score", "passed", "threshold"),
    [
        ("yes", {}, 1.0, True, 0.5),
        ("no", {}, 0.0, False, 0.5),
        ("seven_tenths", {}, 0.7, True, 0.5),  # HoloDeck: a bare float passes at >= 0.5
        ("seven_tenths", {"threshold": 0.8}, 0.7, False, 0.8),
        ("structured", {"threshold": 0.8}, 0.2, True, 0.8),  # the grader's passed wins
        ("as_dict", {}, 0.9, True, 0.5),
        ("as_object", {}, 0.1, False, 0.5),
    ],
)
def test_grader_return_shapes(
    agent_dir: Path,
    function: str,
    options: dict[str, Any],
    score: float,
    passed: bool,
    threshold: float,
) -> None:
    result = grade(agent_dir, function, **options)
    assert result.error is None and result.kind == "code"
    assert (result.score, result.passed, result.threshold) == (score, passed, threshold)
    assert result.metric_name == function


def test_grader_reason_and_details_are_kept(agent_dir: Path) -> None:
    result = grade(agent_dir, "structured")
    assert result.reasoning == "lenient"
    assert result.details == {"grader": "graders.checks:structured", "grader_details": {"k": 1}}


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("boom", "grader 'graders.checks:boom' raised ValueError: grader exploded"),
        ("out_of_range", "grader score 1.7 is not a number in 0-1"),
        ("wrong_type", "grader returned str"),
        ("absent", "has no callable 'absent'"),
    ],
)
def test_grader_problems_are_error_results(agent_dir: Path, function: str, message: str) -> None:
    result = grade(agent_dir, function)
    assert result.passed is None and message in (result.error or "")


def test_a_raising_grader_does_not_stop_the_other_metrics(agent_dir: Path) -> None:
    metrics = [
        CodeMetric(grader="graders.checks:boom"),
        std("equality"),
        CodeMetric(grader="graders.checks:yes"),
    ]
    inputs = MetricInput(input="q", actual_output="a", expected_output="a")
    results = evaluate_metrics(metrics, inputs, context=EvalContext(base_dir=agent_dir))
    assert [r.passed for r in results] == [None, True, True]
    strict = CodeMetric(grader="graders.checks:boom", fail_on_error=True)
    assert (
        evaluate_metrics([strict], inputs, context=EvalContext(base_dir=agent_dir))[0].passed
        is False
    )


def test_a_grader_that_cannot_be_imported_names_module_and_callable(tmp_path: Path) -> None:
    result = grade(tmp_path, "anything")
    assert result.passed is None
    assert "'graders.checks'" in (result.error or "") and "not found" in (result.error or "")
    (tmp_path / "broken.py").write_text("import not_a_module_anywhere\n")
    broken = evaluate_metrics(
        [CodeMetric(grader="broken:fn")],
        MetricInput(actual_output="a"),
        context=EvalContext(base_dir=tmp_path),
    )[0]
    assert "cannot import grader module 'broken' for 'broken:fn'" in (broken.error or "")
    assert "not_a_module_anywhere" in (broken.error or "")


def test_grader_sees_the_holodeck_context(agent_dir: Path) -> None:
    inputs = MetricInput(
        input="Weather?",
        actual_output="Sunny",
        expected_output="Sunny",
        tool_invocations=(call("get_weather", city="Paris"),),
        retrieval_context=("doc",),
        turn_index=2,
        test_case_name="weather",
        turn_config={"turn_program": "add(1, 2)"},
    )
    metric = CodeMetric(grader="graders.checks:echo")
    result = evaluate_metrics([metric], inputs, context=EvalContext(base_dir=agent_dir))[0]
    assert result.details["grader_details"] == {
        "input": "Weather?",
        "response": "Sunny",
        "truth": "Sunny",
        "tools": ["get_weather"],
        "retrieval": ["doc"],
        "turn": 2,
        "case": "weather",
        "config": {"turn_program": "add(1, 2)"},
    }
    with pytest.raises(AttributeError):
        GraderContext("q", "a", None, (), None, 0, None).turn_index = 1  # type: ignore[misc]


def test_two_agents_with_the_same_grader_module_stay_apart(tmp_path: Path) -> None:
    for name, value in (("a", "True"), ("b", "False")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "grading.py").write_text(f"def check(ctx):\n    return {value}\n")
    verdicts = [
        evaluate_metrics(
            [CodeMetric(grader="grading:check")],
            MetricInput(actual_output="x"),
            context=EvalContext(base_dir=tmp_path / name),
        )[0].passed
        for name in ("a", "b")
    ]
    assert verdicts == [True, False]


@pytest.mark.skipif(not FINANCE_SAMPLE.is_dir(), reason=no_shared(FINANCE_SAMPLE))
def test_a_holodeck_grader_runs_unchanged() -> None:
    # The sample imports holodeck.lib.test_runner.code_grader; we provide its two classes.
    program = "subtract(206588, 181001), divide(#0, 181001)"
    calls = (
        ToolInvocation(name="subtract", args={"a": "206588", "b": "181001"}, result="25587"),
        ToolInvocation(name="divide", args={"a": "25587", "b": "181001"}, result="0.14136"),
    )
    metric = CodeMetric(grader="graders.turn_program_equivalence:turn_program_equivalence")
    context = EvalContext(base_dir=FINANCE_SAMPLE)

    def verdict(invocations: tuple[ToolInvocation, ...]) -> MetricResult:
        inputs = MetricInput(
            input="q",
            actual_output="0.14136",
            tool_invocations=invocations,
            turn_config={"turn_program": program},
        )
        return evaluate_metrics([metric], inputs, context=context)[0]

    good = verdict(calls)
    assert good.error is None and good.passed is True and good.score == 1.0
    bad = verdict(calls[:1])
    assert bad.passed is False and "expected 2 arithmetic call(s)" in (bad.reasoning or "")
    assert "holodeck" not in __import__("sys").modules  # the shim is gone after import


def test_check_grader_reference_without_running_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    (tmp_path / "graders").mkdir()
    (tmp_path / "graders" / "checks.py").write_text(
        textwrap.dedent(f"""
        from pathlib import Path
        Path({str(marker)!r}).write_text("executed")
        raise SystemExit("must not run")

        def exact(ctx):
            return True

        try:
            from fast import quick
        except ImportError:
            quick = None
        alias = exact
    """)
    )
    (tmp_path / "bad.py").write_text("def broken(:\n")
    assert check_grader_reference("graders.checks:exact", tmp_path) is None
    assert check_grader_reference("graders.checks:quick", tmp_path) is None
    assert check_grader_reference("graders.checks:alias", tmp_path) is None
    assert not marker.exists()
    missing_name = check_grader_reference("graders.checks:fuzzy", tmp_path)
    assert missing_name is not None and "no top-level 'fuzzy'" in missing_name
    missing_module = check_grader_reference("graders.nope:exact", tmp_path)
    assert missing_module is not None and "module 'graders.nope' not found" in missing_module
    syntax = check_grader_reference("bad:broken", tmp_path)
    assert syntax is not None and "syntax error at line 1" in syntax
    assert check_grader_reference("no-colon", tmp_path) is not None
    assert check_grader_reference("json:dumps", tmp_path) is None  # found on sys.path
    assert check_grader_reference("json:not_there", tmp_path) is not None


def test_grader_result_is_exported_for_user_code() -> None:
    assert GraderResult(score=0.5).passed is None
