"""Orchestrated runs that failed before they could write an EvalRun (a nightly run during an
outage, say): recorded so the history shows the gap, not silence. A failed run is one row per
cell it ran, each naming its configuration as ``eval_runs`` does (docs/history.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from holodeck_core.history.store import History, writer
from holodeck_core.history.tabular import literal
from holodeck_core.redaction import redact_text


@dataclass(frozen=True)
class FailedCell:
    """One row of a failed run: a cell of the agent's grid (``prompt_version`` and
    ``model_candidate``; its ``partition_key`` the prompt key, as in ``eval_runs``), or only
    the run's partition (a range, a key set by hand) when its cells are unknown."""

    partition_key: str | None
    prompt_version: str | None = None
    model_candidate: str | None = None


def record_failed_run(
    db_path: History,
    *,
    dagster_run_id: str,
    job_name: str,
    agent_slug: str | None,
    cells: Sequence[FailedCell],
    trigger: str | None,
    failed_at: datetime,
    error: str | None,
) -> None:
    """Idempotent by run id (all its rows or none); the error text is redacted and truncated.
    No cell given: one row that names none."""
    message = redact_text(error)[:2000] if error else None
    rows = [
        [
            dagster_run_id,
            job_name,
            agent_slug,
            cell.prompt_version,
            cell.model_candidate,
            cell.partition_key,
            trigger,
            failed_at,
            message,
        ]
        for cell in cells or [FailedCell(None)]
    ]
    selects = " UNION ALL ".join(f"SELECT {', '.join(map(literal, row))}" for row in rows)
    with writer(db_path) as con:
        # no ON CONFLICT: a DuckLake has no keys; the check and insert are one transaction
        con.execute(
            f"INSERT INTO failed_runs SELECT * FROM ({selects}) WHERE NOT EXISTS "
            f"(SELECT 1 FROM failed_runs WHERE dagster_run_id = {literal(dagster_run_id)})"
        )
