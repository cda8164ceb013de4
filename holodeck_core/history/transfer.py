"""``history sync --to-lake / --from-lake``: move a history between a DuckDB file and a DuckLake.

Runs are copied row for row (no EvalRun file is needed), in batches, each run through the
destination's own idempotent write: a run already there is skipped, so a copy interrupted
half-way is finished by running it again. ``failed_runs`` come along."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from holodeck_core.history import ingest, schema, store, tabular

FAILED_RUNS = "failed_runs"

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
                    f"SELECT * FROM {table} "
                    f"WHERE list_contains({tabular.literal_list(chunk)}, {key})"
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
    if failed.num_rows:
        with store.writer(destination, timeout_s=lock_timeout) as con:
            con.execute(  # no ON CONFLICT: a DuckLake has no keys
                f"INSERT INTO {FAILED_RUNS} BY NAME SELECT * FROM failed f WHERE NOT EXISTS "
                f"(SELECT 1 FROM {FAILED_RUNS} d WHERE d.dagster_run_id = f.dagster_run_id)"
            )
    return report
