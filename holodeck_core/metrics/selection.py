"""Which metrics a suite scores, as ``holodeck validate`` lists them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from holodeck_core.metrics.registry import AnyMetric, select_metrics
from holodeck_core.models.test_case import TestCaseModel


def suite_metrics(
    agent_metrics: Sequence[AnyMetric] | None, cases: Iterable[TestCaseModel]
) -> list[AnyMetric]:
    """Every metric a run of ``cases`` scores, precedence applied per case and turn (what
    ``holodeck test`` reports, case- and turn-level ones included), once each, in the order
    first used; disabled ones left out."""
    chosen: dict[str, AnyMetric] = {}
    for case in cases:
        lists = (
            [select_metrics(agent_metrics, case.evaluations, t.evaluations) for t in case.turns]
            if case.turns
            else [select_metrics(agent_metrics, case.evaluations)]
        )
        for metric in (m for metrics in lists for m in metrics if m.enabled):
            chosen.setdefault(metric.display_name, metric)
    return list(chosen.values())
