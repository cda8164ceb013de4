"""The per-metric statistics of a run as one Dagster table (docs/dagster.md): the pass rate,
pass@k and each metric, its unit, mean, 95% interval, n and method, rounded as people read
them (holodeck_core/stats/display.py)."""

from __future__ import annotations

import dagster as dg

from holodeck_core.defaults import CONFIDENCE
from holodeck_core.models import EvalRun
from holodeck_core.reports.units import SCORE_UNIT, metric_units
from holodeck_core.stats import Estimate, RunStatistics
from holodeck_core.stats.display import PERCENT_DECIMALS, number

INTERVAL = f"{CONFIDENCE:.0%} CI"
COLUMNS = ("metric", "unit", "mean", INTERVAL, "n", "cases passing", "interval method")
PERCENT = "%"


def metric_table(run: EvalRun) -> dg.TableMetadataValue:
    """One row for the pass rate (and pass@k with trials), then one per metric."""
    summary = run.report.summary
    stats = summary.statistics
    units = metric_units(run.report)
    passed = f"{summary.passed} of {summary.total_tests}"
    rows = _rate_rows(stats, passed) if stats is not None else []
    for name in sorted(set(summary.average_scores) | set(stats.metrics if stats else {})):
        estimate = stats.metrics.get(name) if stats is not None else None
        passing = summary.metric_pass_rates.get(name)
        rows.append(
            _row(
                name,
                units[name],
                estimate,
                mean=summary.average_scores.get(name),
                passing="" if passing is None else percent_text(passing),
            )
        )
    return dg.MetadataValue.table(
        records=[dg.TableRecord(row) for row in rows],
        schema=dg.TableSchema(
            columns=[dg.TableColumn(name, "int" if name == "n" else "string") for name in COLUMNS]
        ),
    )


def _rate_rows(stats: RunStatistics, passed: str) -> list[dict[str, str | int]]:
    """The pass rate, and with trials pass@1, pass@k and pass^k (no interval: one number)."""
    rows = [_row("pass rate", PERCENT, stats.pass_rate, passing=passed)]
    k = stats.trials
    if stats.pass_at_k and stats.pass_hat_k and k > 1:
        for label, value in (
            ("pass@1", stats.pass_at_k[1]),
            (f"pass@{k}", stats.pass_at_k[k]),
            (f"pass^{k}", stats.pass_hat_k[k]),
        ):
            rows.append(_row(label, PERCENT, None, mean=value, n=stats.cases))
    return rows


def _row(
    name: str,
    unit: str,
    estimate: Estimate | None,
    *,
    mean: float | None = None,
    n: int | None = None,
    passing: str = "",
) -> dict[str, str | int]:
    shown = "" if unit == SCORE_UNIT else unit

    def text(value: float | None) -> str:
        if value is None:
            return ""
        return percent_text(value) if unit == PERCENT else number(value, unit=shown)

    low = estimate.low if estimate is not None else None
    high = estimate.high if estimate is not None else None
    return {
        "metric": name,
        "unit": unit,
        "mean": text(estimate.mean if estimate is not None else mean),
        INTERVAL: f"{text(low)} to {text(high)}" if low is not None and high is not None else "",
        "n": estimate.n if estimate is not None else (n or 0),
        "cases passing": passing,
        "interval method": estimate.method_name if estimate is not None else "",
    }


def percent_text(fraction: float) -> str:
    """``91.7%``: a fraction in percent, as the gate and the run tags show it."""
    return f"{fraction * 100:.{PERCENT_DECIMALS}f}%"
