"""The ``cost_regression`` check (docs/cost.md): a run's cost per passing case against the run
the ``no_regression`` check compares it with (:mod:`holodeck_core.history.regression`), flagged
when it went up by more than ``evaluations.max_cost_increase`` (a fraction). A cost that is
unknown on either side (a model without a price, a run recorded before costs were), or no
baseline yet, is not compared: ``status: skipped`` with the reason, and Dagster shows the check
skipped, as ``no_regression`` with nothing to compare (docs/dagster.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from holodeck_core.history.store import History, opened

if TYPE_CHECKING:
    import duckdb

PER_PASS = "SELECT cost_usd, passed, cost_per_pass FROM v_cost_by_run WHERE run_id = ?"
UNPRICED = """
SELECT heading, CAST(sum(unpriced_calls) AS BIGINT) FROM call_costs
WHERE run_id = ? AND unpriced_calls > 0 GROUP BY heading ORDER BY heading
"""


@dataclass(frozen=True)
class CostCheck:
    limit: float
    """``evaluations.max_cost_increase``: 0.2 allows 20 % more per passing case."""
    baseline: str | None = None
    before: float | None = None
    """USD per passing case of the baseline run."""
    after: float | None = None
    skipped: str | None = None
    """Why the costs were not compared (None: they were, or there is no baseline yet)."""

    @property
    def increase(self) -> float | None:
        """The relative change of the cost per passing case (0.25 = 25 % more)."""
        if self.before is None or self.after is None:
            return None
        if self.before == 0:  # a free baseline (every answer cached): any spend is a rise
            return 0.0 if self.after == 0 else math.inf
        return self.after / self.before - 1

    @property
    def passed(self) -> bool:
        """False only when the cost rose past the limit (a skipped check passes)."""
        increase = self.increase
        return increase is None or increase <= self.limit

    @property
    def status(self) -> Literal["passed", "failed", "skipped"]:
        if self.skipped is not None or self.increase is None:
            return "skipped"
        return "passed" if self.passed else "failed"

    def render(self) -> str:
        if self.skipped is not None:
            return f"skipped: {self.skipped}"
        if self.baseline is None:
            return "skipped: nothing to compare with yet"
        before, after = f"{self.before:.6f}", f"{self.after:.6f}"
        change = self.increase
        moved = "" if change is None else f" ({change:+.1%})"
        verdict = (
            f"up by more than evaluations.max_cost_increase {self.limit:.0%}"
            if not self.passed
            else f"within evaluations.max_cost_increase {self.limit:.0%}"
        )
        return (
            f"cost per passing case {after} USD against {before} USD in run "
            f"{self.baseline[:12]}{moved}: {verdict}"
        )


def cost_check(
    db: History | duckdb.DuckDBPyConnection,
    run_id: str,
    baseline: str | None,
    limit: float,
    *,
    not_compared: str | None,
) -> CostCheck:
    """``run_id``'s cost per passing case against ``baseline``'s (the no_regression check's
    run; None: there is none yet, or ``not_compared`` says why the run is compared with
    none)."""
    if not_compared is not None:
        return CostCheck(limit, skipped=not_compared)
    with opened(db) as con:
        after, why = _per_pass(con, run_id)
        if why is not None:
            return CostCheck(limit, baseline, skipped=why)
        if baseline is None:
            return CostCheck(limit, after=after)
        before, why = _per_pass(con, baseline)
    if why is not None:
        return CostCheck(limit, baseline, after=after, skipped=f"the baseline {why}")
    return CostCheck(limit, baseline, before, after)


def _per_pass(con: duckdb.DuckDBPyConnection, run_id: str) -> tuple[float | None, str | None]:
    """(USD per passing case, None) or (None, why it is not known)."""
    row = con.execute(PER_PASS, [run_id]).fetchone()
    name = f"run {run_id[:12]}"
    if row is None:
        return None, f"{name} recorded no costs (it predates cost tracking or was imported)"
    total, passed, per_pass = row
    if total is None:
        unpriced = con.execute(UNPRICED, [run_id]).fetchall()
        calls = ", ".join(f"{n} {heading}" for heading, n in unpriced) or "some"
        return None, (
            f"{name}'s cost is unknown: {calls} call(s) used a model without a price; give "
            "it one under pricing: in holodeck.yaml"
        )
    if not passed:
        return None, f"no case of {name} passed, so it has no cost per passing case"
    return float(per_pass), None
