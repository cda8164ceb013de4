"""Orchestrated runs that failed before they could write an EvalRun (a nightly run during an
outage, say): recorded so the history shows the gap, not silence."""

from __future__ import annotations

from datetime import datetime

from holodeck_core.history.store import History, writer
from holodeck_core.history.tabular import literal
from holodeck_core.redaction import redact_text


def record_failed_run(
    db_path: History,
    *,
    dagster_run_id: str,
    job_name: str,
    partition_key: str | None,
    trigger: str | None,
    failed_at: datetime,
    error: str | None,
) -> None:
    """Idempotent by run id; the error text is redacted and truncated."""
    message = redact_text(error)[:2000] if error else None
    with writer(db_path) as con:
        values = [dagster_run_id, job_name, partition_key, trigger, failed_at, message]
        # no ON CONFLICT: a DuckLake has no keys; the check and insert are one transaction
        con.execute(
            f"INSERT INTO failed_runs SELECT {', '.join(map(literal, values))} "
            f"WHERE NOT EXISTS (SELECT 1 FROM failed_runs WHERE dagster_run_id = "
            f"{literal(dagster_run_id)})"
        )
