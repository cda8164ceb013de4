"""The ``no_regression`` check's comparison: a run against the previous run of the same
agent and prompt (or, with ``evaluations.baseline``, the latest run of that prompt version),
decided exactly as ``holodeck history compare`` decides (DESIGN §7.8)."""

from __future__ import annotations

from holodeck_core.defaults import ALPHA
from holodeck_core.history.queries import Comparison, compare_runs
from holodeck_core.history.store import History, reader

PREVIOUS_RUN = """
SELECT prev.run_id
FROM eval_runs cur
JOIN eval_runs prev
  ON prev.agent_name = cur.agent_name
 AND prev.prompt_body_hash = cur.prompt_body_hash
 AND prev.run_id <> cur.run_id
 AND prev.finished_at <= cur.finished_at
WHERE cur.run_id = ?
ORDER BY prev.finished_at DESC, prev.run_id DESC
LIMIT 1
"""

BASELINE_RUN = """
SELECT base.run_id
FROM eval_runs cur
JOIN eval_runs base
  ON base.agent_slug = cur.agent_slug
 AND (base.prompt_version = ? OR base.prompt_label = ?)
 AND base.run_id <> cur.run_id
WHERE cur.run_id = ?
ORDER BY base.finished_at DESC, base.run_id DESC
LIMIT 1
"""


def regression_check(
    db_path: History,
    run_id: str,
    *,
    baseline: str | None = None,
    strict: bool = False,
    alpha: float = ALPHA,
) -> tuple[str | None, Comparison | None]:
    """The run compared against (None: nothing to compare with) and the comparison."""
    with reader(db_path) as con:
        row = (
            con.execute(BASELINE_RUN, [baseline, baseline, run_id]).fetchone()
            if baseline is not None
            else con.execute(PREVIOUS_RUN, [run_id]).fetchone()
        )
        if row is None:
            return None, None
        return row[0], compare_runs(con, row[0], run_id, strict=strict, alpha=alpha)
