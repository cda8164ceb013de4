"""Orchestrated runs that failed before they could write an EvalRun (a nightly run during an
outage, say): recorded so the history shows the gap, not silence."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from holodeck_core.history.store import writer
from holodeck_core.redaction import redact_text


def record_failed_run(
    db_path: Path,
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
        con.execute(
            "INSERT INTO failed_runs VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [dagster_run_id, job_name, partition_key, trigger, failed_at, message],
        )
