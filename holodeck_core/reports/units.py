"""Units of metric scores, for tables: latency in ms and cost in USD keep their unit
(docs/history.md); every other metric is a normalized score."""

from __future__ import annotations

from collections import defaultdict

from holodeck_core.models import TestReport
from holodeck_core.models.results import all_metric_results

SCORE_UNIT = "score 0-1"
_DIGITS = {"ms": 0, "USD": 4}


def metric_units(report: TestReport) -> defaultdict[str, str]:
    """Each metric's unit (``ms``, ``USD``), else a normalized score in 0-1."""
    units: defaultdict[str, str] = defaultdict(lambda: SCORE_UNIT)
    for result in report.results:
        for metric in all_metric_results(result):
            if metric.unit:
                units[metric.metric_name] = metric.unit
    return units


def format_average(average: float | None, unit: str) -> str:
    return "—" if average is None else f"{average:.{_DIGITS.get(unit, 3)}f}"
