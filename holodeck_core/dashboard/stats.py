"""The dashboard's view of the shared statistics (:mod:`holodeck_core.stats`): the Wilson
interval of a run's pass rate and a run's metric intervals (the formulas ``v_run_stats`` and
``v_metric_stats`` use, tested equal; computed here for the one run shown, which the view cannot
do as cheaply) in the shapes the views render. Compare's paired verdicts are ``holodeck history
compare``'s (:func:`holodeck_core.history.queries.compare_runs`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from holodeck_core.defaults import MAX_ERROR_SHARE
from holodeck_core.stats.estimates import mean_estimate
from holodeck_core.stats.estimates import wilson as wilson_estimate

if TYPE_CHECKING:
    import duckdb
    import pandas as pd  # type: ignore[import-untyped]

__all__ = ["INFRASTRUCTURE_ERROR_SHARE", "wilson", "with_intervals"]

CASE_MEANS = """
SELECT metric_name, avg(coalesce(score, raw_score)), bool_or(unit IS NOT NULL)
FROM metric_results
WHERE run_id = ? AND error IS NULL AND coalesce(score, raw_score) IS NOT NULL
GROUP BY metric_name, case_id
"""
"""One run's per-case mean score per metric (``v_metric_stats``' ``per_case``)."""

INFRASTRUCTURE_ERROR_SHARE = MAX_ERROR_SHARE
"""``evaluations.max_error_share``'s default (docs/cli.md, "Errors apart"): a run with more than
this share of its cases ERROR is an infrastructure failure (kept out of regressions; its fewer
failures, tokens and cost are no improvement)."""


def wilson(passed: int, total: int) -> tuple[float, float] | None:
    """The 95% Wilson score interval of ``passed / total`` (None without cases)."""
    if total <= 0:
        return None
    estimate = wilson_estimate(passed, total)
    return estimate.low or 0.0, estimate.high or 0.0


def with_intervals(
    con: duckdb.DuckDBPyConnection, metrics: pd.DataFrame, run_id: str
) -> pd.DataFrame:
    """``metrics`` with ``ci_low``, ``ci_high``, ``ci_n``, ``ci_method`` on ``run_id``'s rows:
    each metric's interval of its per-case means, as ``v_metric_stats`` gives it."""
    values: dict[str, list[float]] = {}
    units: set[str] = set()
    for name, mean, in_unit in con.execute(CASE_MEANS, [run_id]).fetchall():
        values.setdefault(str(name), []).append(float(mean))
        if in_unit:
            units.add(str(name))
    found = {n: mean_estimate(xs, bounded=n not in units) for n, xs in values.items()}
    latest = metrics["run_id"] == run_id
    columns = {"ci_low": "low", "ci_high": "high", "ci_n": "n", "ci_method": "method"}
    return metrics.assign(**{
        column: [getattr(found[m], field) if here and m in found else None
                 for m, here in zip(metrics["metric_name"], latest, strict=True)]
        for column, field in columns.items()
    })  # fmt: skip
