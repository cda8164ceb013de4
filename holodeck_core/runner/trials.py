"""K trials of a case → the case's result (docs/cli.md).

Each trial is scored by today's rules. The case's status is the reducer's verdict over the
trials; its fields come from a trial with that status (so its errors and tool matches explain
the verdict); each of its metric results carries the mean score over the trials where that
metric ran, and passes by the same reducer. ``trials`` keeps every trial's own result."""

from __future__ import annotations

from collections.abc import Sequence

from holodeck_core.models import MetricResult, Status, TestResult, TurnResult
from holodeck_core.stats.trials import Reducer, reduce_status


def combine_trials(trials: Sequence[TestResult], reducer: Reducer) -> TestResult:
    """One result per case; a single trial is returned unchanged (K = 1 is today's run)."""
    if len(trials) == 1:
        return trials[0]
    status = Status(reduce_status([t.status for t in trials], reducer))
    chosen = next(t for t in trials if t.status is status)
    turns = None
    if chosen.turns is not None:
        turns = [
            turn.model_copy(
                update={"metric_results": _averaged(turn.metric_results, trials, reducer, i)}
            )
            for i, turn in enumerate(chosen.turns)
        ]
    usage = None
    for trial in trials:
        if trial.token_usage is not None:
            usage = trial.token_usage if usage is None else usage + trial.token_usage
    return chosen.model_copy(
        update={
            "status": status,
            "passed": status is Status.PASS,
            "metric_results": _averaged(chosen.metric_results, trials, reducer, None),
            "turns": turns,
            "execution_time_ms": sum(t.execution_time_ms for t in trials),
            "model_time_ms": sum(t.model_time_ms or 0 for t in trials),
            "token_usage": usage,
            "trials": list(trials),
        }
    )


def _averaged(
    chosen: list[MetricResult], trials: Sequence[TestResult], reducer: Reducer, turn: int | None
) -> list[MetricResult]:
    out = []
    for metric in chosen:
        same = [
            m
            for trial in trials
            for m in _metrics_at(trial, turn)
            if m.metric_name == metric.metric_name and m.error is None
        ]
        if metric.error is not None or not same:
            out.append(metric)
            continue
        verdict = reduce_status(["PASS" if m.passed else "FAIL" for m in same], reducer)
        out.append(
            metric.model_copy(
                update={
                    "score": _mean([m.score for m in same]),
                    "raw_score": _mean([m.raw_score for m in same]),
                    "passed": verdict == "PASS",
                    "details": {
                        **metric.details,
                        "trial_scores": [
                            m.score if m.score is not None else m.raw_score for m in same
                        ],
                    },
                }
            )
        )
    return out


def _metrics_at(trial: TestResult, turn: int | None) -> list[MetricResult]:
    if turn is None:
        return trial.metric_results
    turns: list[TurnResult] = trial.turns or []
    return turns[turn].metric_results if turn < len(turns) else []


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None
