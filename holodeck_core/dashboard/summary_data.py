"""The Summary's data: the filtered runs (every one, for the tiles, the table and the CSV) and,
for the charts, each agent's newest :data:`CHART_RUNS` of them with their intervals, paired
regressions and metric means. What is computed from case, trial or metric rows is computed for
the charted runs only: at 10,000 runs the charts show what a plot 1,000 pixels wide can draw,
and an older run is charted by narrowing the date range (docs/dashboard.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from holodeck_core.dashboard import configs
from holodeck_core.dashboard.data import (
    FILTERED_RUNS,
    Filters,
    Options,
    connect,
    options,
    require_runs,
)
from holodeck_core.dashboard.stats import INFRASTRUCTURE_ERROR_SHARE, with_intervals
from holodeck_core.defaults import FAILED_RUNS_SHOWN
from holodeck_core.history.queries import list_failed_runs
from holodeck_core.history.store import History
from holodeck_core.history.tabular import literal
from holodeck_core.stats.intervals import WILSON_CC

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]

CHART_RUNS = 300
"""Runs of each agent the Summary's charts draw, the newest (the table lists every run)."""

RANKED = """
SELECT f.*, row_number() OVER (PARTITION BY f.agent_name
                               ORDER BY f.finished_at DESC, f.run_id DESC) <= {limit} AS charted
FROM ({runs}) f
"""
"""The filtered runs, each marked ``charted`` when it is one of its agent's newest
:data:`CHART_RUNS`."""

RUN_INTERVALS = """
SELECT s.run_id, s.ci95_low, s.ci95_high, s.cases, s.method FROM v_run_stats s
WHERE s.run_id IN ({ids})
  AND s.run_id IN (SELECT DISTINCT run_id FROM case_trials WHERE trial > 0 AND run_id IN ({ids}))
"""
"""The clustered interval of the charted runs with K > 1 trials (docs/cli.md); with one
trial per case, ``v_run_stats``' interval is the Wilson interval of passed / total, computed
here without reading the trial rows. The runs are named as literals: DuckDB then reads only
their rows (a bound list or a subquery is not pushed below the view's grouping)."""

REGRESSIONS = """
SELECT c.head_run_id FROM holodeck_run_comparisons({since}) c
JOIN eval_runs e ON e.run_id = c.head_run_id
WHERE c.verdict = 'regression' AND c.head_run_id IN ({ids})
  AND e.errored <= {share} * e.total_tests
"""
"""Charted runs whose paired comparison with the previous run of their configuration is a
significant drop (docs/architecture.md); an infrastructure failure (docs/cli.md) is marked as one
instead. Only the comparisons of the heads since the oldest charted run's day are computed (schema
10's macro, whole ticks)."""

METRICS = """
SELECT m.run_id, r.agent_name, r.prompt_version, r.model_candidate, r.finished_at,
       m.metric_name,
       any_value(m.kind) AS kind, any_value(m.unit) AS unit,
       avg(coalesce(m.score, m.raw_score)) AS mean, max(m.threshold) AS threshold,
       count(*) FILTER (WHERE m.passed) AS passed,
       count(*) FILTER (WHERE m.passed = false) AS failed,
       count(*) FILTER (WHERE m.error IS NOT NULL) AS errors
FROM metric_results m JOIN eval_runs r USING (run_id)
WHERE m.run_id IN ({ids})
GROUP BY ALL
ORDER BY r.finished_at, m.run_id, m.metric_name
"""
"""Per charted run and metric: the mean score (raw value for ms and USD), its threshold and
how many cases (or turns) passed it (the latest run's also its interval, ``ci_*``)."""


@dataclass
class SummaryData:
    runs: pd.DataFrame
    """Filtered runs, oldest first; ``charted`` marks each agent's newest :data:`CHART_RUNS`,
    which have ``ci_low``/``ci_high`` (fractions), the interval's ``ci_n`` and ``ci_method``
    (None on the others)."""
    metrics: pd.DataFrame
    """Per charted run and metric (:data:`METRICS`)."""
    options: Options
    failures: pd.DataFrame
    """The infrastructure failures the filters left out, shown apart (newest first)."""
    regressions: set[str] = field(default_factory=set)
    """The charted runs marked as regressions."""
    failed_runs: list[dict[str, Any]] = field(default_factory=list)
    """The newest orchestrated runs that failed before writing an EvalRun (``failed_runs``,
    :func:`~holodeck_core.history.queries.list_failed_runs`), whatever the filters."""

    @property
    def charted(self) -> pd.DataFrame:
        """The runs the charts draw, oldest first."""
        return self.runs[self.runs["charted"]]

    @property
    def colours(self) -> dict[configs.Config, str]:
        """A colour per configuration of the filtered runs, the same on every chart."""
        return configs.palette(
            configs.of(row) for row in self.runs[configs.COLUMNS].to_dict("records")
        )


def summary(db: History, filters: Filters) -> SummaryData:
    where, params = filters.where()
    ranked = RANKED.format(runs=f"{FILTERED_RUNS}{where}", limit=CHART_RUNS)
    intervals: dict[str, tuple[Any, ...]] = {}
    regressions: set[str] = set()
    with connect(db) as con:
        require_runs(con, db)
        runs = con.execute(f"{ranked} ORDER BY f.finished_at, f.run_id", params).df()
        charted = runs[runs["charted"]]
        ids = ", ".join(literal(str(i)) for i in charted["run_id"])
        metrics = con.execute(METRICS.format(ids=ids or "NULL")).df()
        if ids:
            found_intervals = con.execute(RUN_INTERVALS.format(ids=ids)).fetchall()
            intervals = {str(r[0]): r[1:] for r in found_intervals}
            since = literal(charted["finished_at"].min().to_pydatetime())
            sql = REGRESSIONS.format(since=since, ids=ids, share=INFRASTRUCTURE_ERROR_SHARE)
            regressions = {str(r[0]) for r in con.execute(sql).fetchall()}
            metrics = with_intervals(con, metrics, str(runs["run_id"].iloc[-1]))
        failures = con.execute(
            "SELECT r.run_id, r.finished_at, r.agent_name, r.prompt_version, r.errored, "
            "r.total_tests FROM v_runs r JOIN v_run_health h USING (run_id) "
            "WHERE h.infrastructure_failure AND NOT ? ORDER BY r.finished_at DESC, r.run_id",
            [filters.include_failed],
        ).df()
        found = options(con)
        failed_runs = list_failed_runs(con, limit=FAILED_RUNS_SHOWN)
    bounds = [
        (intervals.get(str(i)) or (*wilson_bounds(int(p), int(n)), int(n), WILSON_CC))
        if shown else (None, None, None, None)
        for i, p, n, shown in zip(runs["run_id"], runs["passed"], runs["total_tests"],
                                  runs["charted"], strict=True)
    ]  # fmt: skip
    columns = ("ci_low", "ci_high", "ci_n", "ci_method")
    runs = runs.assign(**{c: [b[i] for b in bounds] for i, c in enumerate(columns)})
    return SummaryData(
        runs=runs,
        metrics=metrics,
        options=found,
        failures=failures,
        regressions=regressions,
        failed_runs=failed_runs,
    )


def wilson_bounds(passed: int, total: int) -> tuple[float, float]:
    from holodeck_core.dashboard.stats import wilson

    return wilson(passed, total) or (0.0, 0.0)
