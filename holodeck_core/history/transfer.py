"""``history sync --to-lake / --from-lake``: move a history between a DuckDB file and a DuckLake.

Runs are copied row for row (no EvalRun file is needed), in batches, each run through the
destination's own idempotent write: a run already there is skipped, so a copy interrupted
half-way is finished by running it again. ``failed_runs`` come along."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from holodeck_core.history import ingest, schema, store, tabular

if TYPE_CHECKING:
    import duckdb

FAILED_RUNS = "failed_runs"

BATCH = 50


def _key(table: str) -> str:
    return "first_run_id" if table == "prompt_versions" else "run_id"


def prepared_runs(
    con: duckdb.DuckDBPyConnection,
    ids: Sequence[str],
    selects: Mapping[str, str],
    batch: int = BATCH,
) -> Iterator[list[ingest.PreparedRun]]:
    """The runs ``ids`` of an open history, a batch at a time, each with its rows per table
    as ``selects[table]`` gives them (a prompt row goes with the run that first saw it; a
    table not in ``selects`` has none)."""
    for start in range(0, len(ids), batch):
        chunk = list(ids[start : start + batch])
        tables: dict[str, pa.Table] = {
            table: tabular.conformed(
                table,
                con.sql(
                    f"SELECT * FROM ({select}) "
                    f"WHERE list_contains({tabular.literal_list(chunk)}, {_key(table)})"
                ).to_arrow_table(),
            )
            for table, select in selects.items()
        }
        for table in schema.TABLES:
            tables.setdefault(table, schema.arrow_schema(table).empty_table())
        yield [
            ingest.PreparedRun(
                run_id=run_id,
                tables={
                    name: rows.filter(pc.equal(rows[_key(name)], run_id))
                    for name, rows in tables.items()
                },
            )
            for run_id in chunk
        ]


def _runs(source: store.History, batch: int) -> Iterator[list[ingest.PreparedRun]]:
    """The source's runs, a batch at a time."""
    with store.reader(source) as con:
        ids = [
            row[0]
            for row in con.execute(
                "SELECT run_id FROM eval_runs ORDER BY finished_at, run_id"
            ).fetchall()
        ]
        selects = {table: f"SELECT * FROM {table}" for table in schema.TABLES}
        yield from prepared_runs(con, ids, selects, batch)


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
