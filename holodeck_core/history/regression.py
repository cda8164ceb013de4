"""The ``no_regression`` check's comparison: a run against the previous run of the same
configuration, its agent, prompt and model candidate (or, with ``evaluations.baseline``, the
latest run of that prompt version with the same candidate),
decided exactly as ``holodeck history compare`` decides (docs/architecture.md). Infrastructure
failures are never a baseline, and a run that is one is not compared (docs/cli.md).

The checks of one schedule tick are one family (docs/cli.md): the run's p-value is adjusted
(Benjamini-Hochberg by default) together with those of the other runs of its tick
(``holodeck_tick``: an agent's nightly runs of one UTC day) recorded in
``v_run_comparisons_raw`` so far; the last run of a tick to finish is decided on the whole
family."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from holodeck_core.defaults import ALPHA
from holodeck_core.history.health import failure_reason
from holodeck_core.history.queries import Comparison, compare_runs
from holodeck_core.history.store import History, opened
from holodeck_core.stats.multiple import Adjustment
from holodeck_core.stats.paired import adjust_family

if TYPE_CHECKING:
    import duckdb

TICK_PVALUES = """
WITH head AS (
    SELECT holodeck_tick(agent_slug, trigger, finished_at, run_id) AS tick FROM eval_runs
    WHERE run_id = $run
)
SELECT c.p_value
FROM v_run_comparisons_raw c
JOIN eval_runs e ON e.run_id = c.head_run_id
WHERE holodeck_tick(e.agent_slug, e.trigger, e.finished_at, e.run_id) = (SELECT tick FROM head)
  AND c.head_run_id <> $run AND c.p_value IS NOT NULL
ORDER BY c.head_run_id
"""

PREVIOUS_RUN = """
SELECT prev.run_id
FROM eval_runs cur
JOIN v_counted_runs prev
  ON prev.agent_name = cur.agent_name
 AND prev.prompt_body_hash = cur.prompt_body_hash
 AND prev.model_candidate = cur.model_candidate
 AND prev.run_id <> cur.run_id
 AND prev.finished_at <= cur.finished_at
WHERE cur.run_id = ?
ORDER BY prev.finished_at DESC, prev.run_id DESC
LIMIT 1
"""

BASELINE_RUN = """
SELECT base.run_id
FROM eval_runs cur
JOIN v_counted_runs base
  ON base.agent_slug = cur.agent_slug
 AND (base.prompt_version = ? OR base.prompt_label = ?)
 AND base.model_candidate = coalesce(?, cur.model_candidate)
 AND base.run_id <> cur.run_id
 AND base.trigger IS DISTINCT FROM 'rescore'
WHERE cur.run_id = ?
ORDER BY base.finished_at DESC, base.run_id DESC
LIMIT 1
"""
"""The run a prompt version's baseline is (parameters: the version or label twice, a model
candidate or None for the compared run's own, then the run compared): that version's newest
run of the run's agent and that model candidate, neither an
infrastructure failure nor a rescore. ``holodeck test --baseline VERSION`` and the
``no_regression`` check's ``evaluations.baseline`` both read it."""


@dataclass(frozen=True)
class RegressionCheck:
    previous: str | None = None
    """The run compared against (None: nothing to compare with)."""
    comparison: Comparison | None = None
    not_compared: str | None = None
    """Why the run was not compared (it is an infrastructure failure)."""


def regression_check(
    db_path: History | duckdb.DuckDBPyConnection,
    run_id: str,
    *,
    baseline: str | None = None,
    strict: bool = False,
    alpha: float = ALPHA,
    adjustment: Adjustment = Adjustment.BH,
) -> RegressionCheck:
    with opened(db_path) as con:
        reason = failure_reason(con, run_id)
        if reason is not None:
            return RegressionCheck(not_compared=reason)
        row = (
            con.execute(BASELINE_RUN, [baseline, baseline, None, run_id]).fetchone()
            if baseline is not None
            else con.execute(PREVIOUS_RUN, [run_id]).fetchone()
        )
        if row is None:
            return RegressionCheck()
        comparison = compare_runs(
            con, row[0], run_id, strict=strict, alpha=alpha, adjustment=Adjustment.NONE
        )
        others = [float(r[0]) for r in con.execute(TICK_PVALUES, {"run": run_id}).fetchall()]
    if comparison.paired is not None:
        own = comparison.paired.pass_fraction
        family = [own, *(own.model_copy(update={"p_value": p}) for p in others)]
        comparison.paired = replace(
            comparison.paired, pass_fraction=adjust_family(family, adjustment)[0]
        )
    return RegressionCheck(row[0], comparison)
