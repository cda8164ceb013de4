"""A case's status from its scores: the one rule the runner and ``rescore`` share."""

from __future__ import annotations

from collections.abc import Sequence

from holodeck_core.metrics.base import EVALUATION_DATA
from holodeck_core.models import MetricResult, Status

EMPTY_RESPONSE_ERROR = "empty response and nothing to evaluate it with"
METRIC_ERROR_PREFIX = "metric "
NO_VERDICT_ERROR = "no metric could be evaluated"


def case_status(
    metrics: Sequence[MetricResult],
    tools_matched: bool | None,
    response: str | None,
    errors: list[str],
) -> Status:
    """ERROR when a ``fail_on_error`` metric could not run, or when no metric could give a
    verdict (a judge that is down must not read as a pass); FAIL when a metric or a tool
    expectation missed, or the response is empty with nothing to judge it by; else PASS.
    Errored metrics without ``fail_on_error`` are otherwise left out of the verdict. Appends
    the messages it implies to ``errors``."""
    blocking = [m for m in metrics if m.error is not None and m.fail_on_error]
    if blocking:
        errors.extend(f"{METRIC_ERROR_PREFIX}{m.metric_name}: {m.error}" for m in blocking)
        return Status.ERROR
    if metrics and tools_matched is None and all(m.passed is None for m in metrics):
        messages = [f"{METRIC_ERROR_PREFIX}{m.metric_name}: {m.error}" for m in metrics]
        # the metrics' own words first where the test case's data is the problem
        errors.extend(messages if _data_errors(metrics) else [NO_VERDICT_ERROR, *messages])
        return Status.ERROR
    if any(m.passed is False for m in metrics) or tools_matched is False:
        return Status.FAIL
    if not metrics and tools_matched is None and not (response or "").strip():
        errors.append(EMPTY_RESPONSE_ERROR)
        return Status.FAIL
    return Status.FAIL if errors else Status.PASS


def error_source(metrics: Sequence[MetricResult], status: Status) -> str | None:
    """Why an ERROR verdict: a ``fail_on_error`` metric, or metrics that could not read the
    evaluation's own data (a ground truth that is not a number), are an evaluation error
    (exit 4); a judge that gave no verdict at all is the infrastructure failing (exit 3)."""
    if status is not Status.ERROR:
        return None
    errored = [m for m in metrics if m.error is not None]
    blocking = any(m.fail_on_error for m in errored)
    return "evaluation" if blocking or _data_errors(errored) else "execution"


def _data_errors(metrics: Sequence[MetricResult]) -> bool:
    """Every one of ``metrics`` (at least one) errored on the evaluation's own data."""
    return bool(metrics) and all(m.details.get("error_source") == EVALUATION_DATA for m in metrics)


def turns_verdict(turns: Sequence[tuple[Status, str | None]]) -> tuple[Status, str | None]:
    """A multi-turn case's (status, error source) from its turns' (status, error source):
    the worst status; an ERROR is an evaluation error only when every errored turn's is."""
    statuses = [status for status, _ in turns]
    worst = next((s for s in (Status.ERROR, Status.FAIL) if s in statuses), Status.PASS)
    if worst is not Status.ERROR:
        return worst, None
    sources = {source for status, source in turns if status is Status.ERROR}
    return worst, "evaluation" if sources == {"evaluation"} else "execution"
