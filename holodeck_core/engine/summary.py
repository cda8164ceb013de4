"""A finished run and its estimate as an orchestrator's UI shows them (docs/dagster.md): numbers
rounded as people read them (holodeck_core/stats/display.py), the per-metric statistics as
rows, the cost breakdown and the estimate as Markdown, and the Markdown report. Outside text
(case ids, headings, versions) is escaped for Markdown."""

from __future__ import annotations

from typing import TYPE_CHECKING

from holodeck_core.defaults import CONFIDENCE, REPORT_LINE_CHARS
from holodeck_core.reports.cost import cost_lines
from holodeck_core.reports.markdown import markdown_text, render_markdown
from holodeck_core.reports.units import SCORE_UNIT, metric_units
from holodeck_core.stats.display import PERCENT_DECIMALS, number, rounded

if TYPE_CHECKING:
    from holodeck_core.engine.plan import CostEstimate
    from holodeck_core.models import EvalRun, ReportSummary
    from holodeck_core.stats import Estimate, RunStatistics

__all__ = [
    "METRIC_COLUMNS",
    "cost_markdown",
    "estimate_markdown",
    "metric_rows",
    "percent",
    "percent_text",
    "render_markdown",
    "rounded",
    "usd_text",
]

INTERVAL = f"{CONFIDENCE:.0%} CI"
METRIC_COLUMNS = ("metric", "unit", "mean", INTERVAL, "n", "cases passing", "interval method")
PERCENT = "%"
MetricRow = dict[str, str | int]


def percent(rate: float) -> float:
    """A pass rate in percent as the UI shows it (``91.7``)."""
    return round(rate, PERCENT_DECIMALS)


def percent_text(fraction: float) -> str:
    """``91.7%``: a fraction in percent, as the gate and the run tags show it."""
    return f"{fraction * 100:.{PERCENT_DECIMALS}f}%"


def usd_text(usd: float | None) -> str:
    """Dollars for a tag or a table: four significant digits (``0.003608``), or unknown."""
    return "unknown" if usd is None else number(usd)


def cost_markdown(summary: ReportSummary) -> str | None:
    """The run's cost breakdown, a line per heading (None: no cost recorded)."""
    if summary.cost is None:
        return None
    lines = cost_lines(summary.cost, summary.passed)
    return "\n".join(markdown_text(line, REPORT_LINE_CHARS) for line in lines)


def estimate_markdown(estimate: CostEstimate) -> str:
    """``holodeck plan``'s estimate of a run as a sentence and a table by heading."""
    rows = [
        f"| {markdown_text(heading)} | {c.calls} | {c.tokens} | {usd_text(c.usd)} |"
        for heading, c in estimate.headings.items()
    ]
    return (
        f"Estimate of prompt {markdown_text(estimate.prompt_version)}: {estimate.cases} cases x "
        f"{estimate.trials} trial(s), from {markdown_text(estimate.source)}; total "
        f"{usd_text(estimate.total_usd)} USD\n\n| heading | calls | tokens | USD |\n"
        "|---|---|---|---|\n" + "\n".join(rows)
    )


def metric_rows(run: EvalRun) -> list[MetricRow]:
    """One row for the pass rate (and pass@k with trials), then one per metric, by
    :data:`METRIC_COLUMNS`."""
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
    return rows


def _rate_rows(stats: RunStatistics, passed: str) -> list[MetricRow]:
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
) -> MetricRow:
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
