"""The statistical side of ``history compare`` and the ``no_regression`` check (docs/cli.md,
docs/architecture.md): the paired comparison of two runs from their stored trial rows, per-metric
paired comparisons, and which of the shared cases are flaky.

A case is listed as *flaky* rather than as a regression when its trials disagree in either
run, or when the history before the later run already shows its status changing while its
case fingerprint did not: it is known to flip without a cause. ERROR is no verdict, and
infrastructure failures are no history (docs/cli.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from holodeck_core.defaults import ALPHA
from holodeck_core.stats import PairedComparison, Verdict, paired_comparison
from holodeck_core.stats.multiple import Adjustment
from holodeck_core.stats.paired import adjust_family

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class PairedRuns:
    """B (after) against A (before) on their shared cases."""

    pass_fraction: PairedComparison
    metrics: dict[str, PairedComparison] = field(default_factory=dict)
    flaky: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        return self.pass_fraction.verdict


def _fractions(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, tuple[float, int]]:
    rows = con.execute(
        "SELECT case_id, pass_fraction, trials FROM v_case_trials WHERE run_id = ?", [run_id]
    ).fetchall()
    return {str(r[0]): (float(r[1]), int(r[2])) for r in rows}


def _metric_means(
    con: duckdb.DuckDBPyConnection, run_id: str
) -> dict[str, tuple[str, dict[str, float]]]:
    """metric → (direction, case → mean score over trials and turns)."""
    out: dict[str, tuple[str, dict[str, float]]] = {}
    for name, direction, case_id, mean in con.execute(
        """
        SELECT metric_name, any_value(direction), case_id, avg(coalesce(score, raw_score))
        FROM metric_results
        WHERE run_id = ? AND error IS NULL AND coalesce(score, raw_score) IS NOT NULL
        GROUP BY metric_name, case_id
        """,
        [run_id],
    ).fetchall():
        out.setdefault(str(name), (str(direction), {}))[1][str(case_id)] = float(mean)
    return out


FLAKY_BEFORE = """
WITH head AS (SELECT agent_slug, finished_at FROM eval_runs WHERE run_id = $b),
hist AS (
    SELECT e.run_id, e.finished_at, e.prompt_version, e.model_candidate, t.case_id, t.status,
           c.case_fingerprint, c.trials_disagree
    FROM v_counted_runs e
    JOIN head h ON e.agent_slug = h.agent_slug
               AND (e.finished_at < h.finished_at OR e.run_id = $a)
    JOIN test_results t ON t.run_id = e.run_id
    LEFT JOIN v_case_trials c ON c.run_id = t.run_id AND c.case_id = t.case_id
    WHERE e.run_id <> $b AND e.trigger IS DISTINCT FROM 'rescore'
),
lagged AS (
    SELECT *, lag(CASE WHEN status <> 'ERROR'
                       THEN {'status': status, 'fingerprint': case_fingerprint} END
                  IGNORE NULLS) OVER w AS previous
    FROM hist
    WINDOW w AS (PARTITION BY prompt_version, model_candidate, case_id
                 ORDER BY finished_at, run_id)
)
SELECT DISTINCT case_id FROM lagged
WHERE trials_disagree
   OR (status <> 'ERROR' AND previous IS NOT NULL AND previous.status <> status
       AND previous.fingerprint IS NOT DISTINCT FROM case_fingerprint)
UNION
SELECT case_id FROM v_case_trials WHERE run_id = $b AND trials_disagree
"""


def compare_paired(
    con: duckdb.DuckDBPyConnection,
    run_a: str,
    run_b: str,
    *,
    alpha: float = ALPHA,
    adjustment: Adjustment = Adjustment.BH,
) -> PairedRuns:
    """The pass fraction and every shared metric compared, their p-values adjusted together
    (one family, docs/cli.md)."""
    a, b = _fractions(con, run_a), _fractions(con, run_b)
    shared = a.keys() & b.keys()
    binary = all(a[k][1] == 1 and b[k][1] == 1 for k in shared)
    pass_fraction = paired_comparison(
        {k: a[k][0] for k in shared}, {k: b[k][0] for k in shared}, binary=binary, alpha=alpha
    )
    metrics_a, metrics_b = _metric_means(con, run_a), _metric_means(con, run_b)
    metrics = {
        name: paired_comparison(
            scores_a,
            metrics_b[name][1],
            alpha=alpha,
            higher_is_better=direction != "lower_is_better",
        )
        for name, (direction, scores_a) in sorted(metrics_a.items())
        if name in metrics_b
    }
    flaky = sorted(
        str(r[0]) for r in con.execute(FLAKY_BEFORE, {"a": run_a, "b": run_b}).fetchall()
    )
    names = list(metrics)
    pass_fraction, *adjusted = adjust_family([pass_fraction, *metrics.values()], adjustment)
    return PairedRuns(
        pass_fraction=pass_fraction,
        metrics=dict(zip(names, adjusted, strict=True)),
        flaky=[case for case in flaky if case in shared],
    )


def against_one(
    con: duckdb.DuckDBPyConnection,
    base_run: str,
    run_ids: list[str],
    *,
    alpha: float = ALPHA,
    adjustment: Adjustment = Adjustment.BH,
) -> list[PairedComparison]:
    """Each run's pass fraction against ``base_run``'s on their shared cases, the p-values
    adjusted together (one family: the cells of a matrix against its baseline or its best,
    docs/cli.md)."""
    raw = [
        compare_paired(con, base_run, run, alpha=alpha, adjustment=Adjustment.NONE).pass_fraction
        for run in run_ids
    ]
    return adjust_family(raw, adjustment)
