"""Per-case regressions of a run against the previous run of the same agent and prompt."""

from __future__ import annotations

from holodeck_core.history.queries import CaseFlip, compare_runs
from holodeck_core.history.store import History, reader


def previous_run_flips(db_path: History, run_id: str) -> tuple[str | None, list[CaseFlip]]:
    """The previous run (same agent, same prompt body) and the cases whose status changed."""
    with reader(db_path) as con:
        row = con.execute(
            """
            SELECT prev.run_id
            FROM eval_runs cur
            JOIN eval_runs prev
              ON prev.agent_name = cur.agent_name
             AND prev.prompt_body_hash = cur.prompt_body_hash
             AND prev.run_id <> cur.run_id
             AND prev.finished_at <= cur.finished_at
            WHERE cur.run_id = ?
            ORDER BY prev.finished_at DESC
            LIMIT 1
            """,
            [run_id],
        ).fetchone()
        if row is None:
            return None, []
        comparison = compare_runs(con, row[0], run_id)
    return row[0], comparison.flips
