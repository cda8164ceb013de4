"""Orchestrated runs that failed before they could write an EvalRun (a nightly run during an
outage, say): recorded so the history shows the gap, not silence."""

from __future__ import annotations

from datetime import UTC, datetime

from holodeck_core.history.lake import Lake
from holodeck_core.history.schema import arrow_schema
from holodeck_core.history.store import History, writer
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
    if isinstance(db_path, Lake):
        import pyarrow as pa

        row = {
            "dagster_run_id": dagster_run_id,
            "job_name": job_name,
            "partition_key": partition_key,
            "trigger": trigger,
            "failed_at": failed_at.astimezone(UTC).replace(tzinfo=None)
            if failed_at.tzinfo
            else failed_at,
            "error": message,
        }
        db_path.write_failed_run(pa.Table.from_pylist([row], schema=arrow_schema("failed_runs")))
        return
    with writer(db_path) as con:
        con.execute(
            "INSERT INTO failed_runs VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [dagster_run_id, job_name, partition_key, trigger, failed_at, message],
        )
