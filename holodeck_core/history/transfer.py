"""``history sync --to-lake / --from-lake``: move a history between a DuckDB file and a lake.

Runs are copied row for row (no EvalRun file is needed), in batches, each run through the
destination's own idempotent write: a run already there is skipped, so a copy interrupted
half-way is finished by running it again. ``failed_runs`` come along."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from holodeck_core.history import ingest, schema, store
from holodeck_core.history.lake import FAILED_RUNS, Lake

BATCH = 50


def _runs(source: store.History, batch: int) -> Iterator[list[ingest.PreparedRun]]:
    """The source's runs, a batch at a time, each with its rows per table (a prompt row goes
    with the run that first saw it)."""
    with store.reader(source) as con:
        ids = [
            row[0]
            for row in con.execute(
                "SELECT run_id FROM eval_runs ORDER BY finished_at, run_id"
            ).fetchall()
        ]
        for start in range(0, len(ids), batch):
            chunk = ids[start : start + batch]
            tables: dict[str, pa.Table] = {}
            for table in schema.TABLES:
                key = "first_run_id" if table == "prompt_versions" else "run_id"
                tables[table] = con.sql(
                    f"SELECT * FROM {table} WHERE list_contains(?, {key})", params=[chunk]
                ).to_arrow_table()
            yield [
                ingest.PreparedRun(
                    run_id=run_id,
                    tables={
                        name: rows.filter(
                            pc.equal(
                                rows["first_run_id" if name == "prompt_versions" else "run_id"],
                                run_id,
                            )
                        )
                        for name, rows in tables.items()
                    },
                )
                for run_id in chunk
            ]


def _failed_runs(source: store.History) -> pa.Table:
    with store.reader(source) as con:
        return con.sql(f"SELECT * FROM {FAILED_RUNS}").to_arrow_table()


def copy_history(
    source: store.History,
    destination: store.History,
    *,
    lock_timeout: float | None = None,
    batch: int = BATCH,
) -> ingest.IngestReport:
    """Copy every run (and failed run) of ``source`` that ``destination`` lacks."""
    report = ingest.IngestReport()
    for prepared in _runs(source, batch):
        report.merge(ingest.write_batch(destination, prepared, lock_timeout=lock_timeout))
    failed = _failed_runs(source)
    if isinstance(destination, Lake):
        for index in range(failed.num_rows):
            destination.write_failed_run(failed.slice(index, 1))
    elif failed.num_rows:
        with store.writer(destination, timeout_s=lock_timeout) as con:
            con.execute(
                f"INSERT INTO {FAILED_RUNS} BY NAME SELECT * FROM failed ON CONFLICT DO NOTHING"
            )
    return report
