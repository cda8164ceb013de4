"""The grid's check (docs/dagster.md): each cell's run (a prompt version x a model candidate)
against the newest healthy run of the agent's baseline cell (``configuration_cells``), paired
on their shared cases as ``holodeck history compare`` pairs them, the p-values adjusted
together (Benjamini-Hochberg) over the cells evaluated together."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from holodeck_core.defaults import ALPHA
from holodeck_core.history.health import failure_reason
from holodeck_core.history.queries import compare_runs
from holodeck_core.history.store import History, opened
from holodeck_core.stats.multiple import Adjustment
from holodeck_core.stats.paired import PairedComparison, Verdict, adjust_family

if TYPE_CHECKING:
    import duckdb

BASELINE_CELL = """
SELECT c.run_id
FROM configuration_cells c
JOIN eval_runs r ON r.agent_slug = c.agent_slug
WHERE r.run_id = $run AND c.prompt_version = $prompt AND c.model_candidate = $model
"""


@dataclass(frozen=True)
class CellCheck:
    """One cell against the baseline cell: the baseline's run (None: it has none yet), the
    paired pass fraction with its adjusted p, or why the cell was not compared."""

    baseline: str | None
    paired: PairedComparison | None = None
    not_compared: str | None = None

    @property
    def regressed(self) -> bool:
        """Significantly worse than the baseline cell, on the adjusted p."""
        return self.paired is not None and self.paired.verdict == Verdict.REGRESSION


def cells_against_baseline(
    db: History | duckdb.DuckDBPyConnection,
    runs: Mapping[str, str],
    prompt: str,
    model: str,
    *,
    alpha: float = ALPHA,
) -> dict[str, CellCheck]:
    """Each run of ``runs`` (by cell key) against the baseline cell ``prompt`` x ``model``
    of their agent, adjusted as one family."""
    if not runs:
        return {}
    with opened(db) as con:
        params = {"run": next(iter(runs.values())), "prompt": prompt, "model": model}
        row = con.execute(BASELINE_CELL, params).fetchone()
        if row is None:
            return dict.fromkeys(runs, CellCheck(None))
        found = {key: _against(con, str(row[0]), run_id, alpha) for key, run_id in runs.items()}
    tested = [key for key, check in found.items() if check.paired is not None]
    family = [found[key].paired for key in tested]
    adjusted = adjust_family([p for p in family if p is not None], Adjustment.BH)
    for key, paired in zip(tested, adjusted, strict=True):
        found[key] = replace(found[key], paired=paired)
    return found


def _against(con: duckdb.DuckDBPyConnection, base: str, run_id: str, alpha: float) -> CellCheck:
    if run_id == base:
        return CellCheck(base, not_compared="this is the baseline cell's run")
    reason = failure_reason(con, run_id)
    if reason is not None:
        return CellCheck(base, not_compared=reason)
    comparison = compare_runs(con, base, run_id, alpha=alpha, adjustment=Adjustment.NONE)
    paired = comparison.paired.pass_fraction if comparison.paired is not None else None
    return CellCheck(base, paired, None if paired else "no shared cases")
