"""Judge drift of a run, read from ``v_judge_drift``, and the judge's agreement with people on
the labelled control rows, from ``v_judge_control_agreement`` (for the ``judge_drift``
check)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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


CONTROL_AGREEMENT = """
SELECT a.*, e.finished_at FROM v_judge_control_agreement a JOIN eval_runs e USING (run_id)
WHERE ? IS NULL OR a.run_id = ?
QUALIFY ? IS NOT NULL OR e.finished_at = max(e.finished_at) OVER (PARTITION BY a.agent_slug)
ORDER BY a.agent_slug, a.metric_name, a.judge_model
"""


def control_agreement_rows(
    con: duckdb.DuckDBPyConnection, run_id: str | None = None
) -> list[dict[str, Any]]:
    """Per metric and judge: a run's judge against people on the labelled control rows
    (``v_judge_agreement``'s columns with ``run_id`` and ``finished_at``); without ``run_id``,
    each agent's latest run that scored labelled rows."""
    cursor = con.execute(CONTROL_AGREEMENT, [run_id] * 3)
    columns = [d[0] for d in cursor.description or []]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def control_agreement(
    db_path: History | duckdb.DuckDBPyConnection, run_id: str
) -> list[dict[str, Any]]:
    with opened(db_path) as con:
        return control_agreement_rows(con, run_id)
