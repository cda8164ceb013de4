"""Judge drift of a run, read from ``v_judge_drift`` (for the ``judge_drift`` check)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from holodeck_core.history.store import History, opened

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class Drift:
    metric_name: str
    n: int
    drift: float
    max_abs_change: float


def judge_drift(db_path: History | duckdb.DuckDBPyConnection, run_id: str) -> list[Drift]:
    with opened(db_path) as con:
        rows = con.execute(
            "SELECT metric_name, n, drift, max_abs_change FROM v_judge_drift "
            "WHERE run_id = ? ORDER BY metric_name",
            [run_id],
        ).fetchall()
    return [Drift(str(r[0]), int(r[1]), float(r[2]), float(r[3])) for r in rows]
