"""``holodeck history rebuild``: a history of this schema from the EvalRun files, the old one
kept aside, with what only the old one holds carried over (docs/history.md).

The EvalRun files found (the folders given, else the project's agents' ``results/`` folders)
are ingested into a new history; then come, read from the old history at whatever schema it
has (columns it lacks are NULL, a model candidate ``default``): the runs no file held any more
(their rows, as ``history sync --from`` copies them), and the tables no EvalRun holds
(:data:`~holodeck_core.history.schema.HISTORY_ONLY_TABLES`: human labels, failed runs, the
budget ledger). The old history is never deleted:

- a DuckDB file: the new one is built beside it under a temporary name while the old one stays
  open read-only (writers wait), then the old file is linked to ``NAME.before-rebuild-STAMP``
  and the new one takes its name; a failure leaves the old file in place, untouched;
- a DuckLake with a local catalog and data folder: both move aside (``….before-rebuild-STAMP``)
  and the new lake is written where they were; a failure moves them back.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.config.project import RESULTS_URL_ENV, Project, location
from holodeck_core.errors import ConfigError, NoHistoryError
from holodeck_core.history import ingest, schema, store, tabular, transfer
from holodeck_core.history.ducklake import DuckLake

if TYPE_CHECKING:
    import duckdb

    from holodeck_core.config.project import Location

ASIDE = "before-rebuild-{stamp}"
"""The suffix of the old history's new name (a UTC time, to the second)."""


@dataclass
class RebuildReport:
    aside: str
    """Where the old history is now."""
    ingest: ingest.IngestReport
    kept_runs: list[str] = field(default_factory=list)
    """Runs no EvalRun file held: copied from the old history."""
    carried: dict[str, int] = field(default_factory=dict)
    """Rows of each history-only table carried over."""


def project_results(project: Project) -> list[Location]:
    """The folders the project's runs write their EvalRuns under: the ``results_url`` base,
    else each orchestrated agent's ``results/`` folder (those that exist)."""
    url = os.environ.get(RESULTS_URL_ENV) or project.settings.results_url
    if url:
        base = location(url)
        if isinstance(base, Path) and not base.is_absolute():
            base = project.root / base
        return [base]
    folders = {(agent.parent / "results").resolve() for agent in project.agent_paths()}
    return [folder for folder in sorted(folders) if folder.is_dir()]


def rebuild(
    history: store.History,
    folders: Sequence[Location],
    *,
    prompts_dir: Path | None = None,
    lock_timeout: float | None = None,
) -> RebuildReport:
    """Rebuild ``history`` from the EvalRun files under ``folders`` (see the module)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")

    def fill(new: store.History, old: duckdb.DuckDBPyConnection, aside: str) -> RebuildReport:
        with store.writer(new, timeout_s=lock_timeout):
            pass  # the schema, even with no file to ingest
        report = RebuildReport(
            aside,
            ingest.ingest_paths(new, folders, prompts_dir=prompts_dir, lock_timeout=lock_timeout),
        )
        report.kept_runs = _carry_runs(old, new, lock_timeout)
        report.carried = _carry_history_only(old, new, lock_timeout)
        return report

    if isinstance(history, DuckLake):
        return _rebuild_lake(history, stamp, fill)
    return _rebuild_file(history, stamp, fill, lock_timeout)


Fill = Callable[[store.History, "duckdb.DuckDBPyConnection", str], RebuildReport]


def _rebuild_file(path: Path, stamp: str, fill: Fill, lock_timeout: float | None) -> RebuildReport:
    if not path.is_file():
        raise NoHistoryError(
            f"no history database at {path} to rebuild; `holodeck history sync RESULTS_DIR` "
            "creates one from EvalRun files"
        )
    aside = path.with_name(f"{path.name}.{ASIDE.format(stamp=stamp)}")
    fresh = path.with_name(f".{path.name}.rebuild-{os.getpid()}.tmp")
    _remove_file(fresh)
    old = store.connect_with_retry(path, read_only=True, timeout_s=lock_timeout)
    try:
        report = fill(fresh, old, str(aside))
        os.link(path, aside)  # fails rather than overwrite anything
        wal = path.with_name(path.name + ".wal")
        if wal.exists():  # the old file's log goes with it, never into the new one
            wal.rename(aside.with_name(aside.name + ".wal"))
        fresh.replace(path)
    except BaseException:
        _remove_file(fresh)
        raise
    finally:
        old.close()
    return report


def _remove_file(path: Path) -> None:
    for leftover in (path, path.with_name(path.name + ".wal")):
        leftover.unlink(missing_ok=True)


def _rebuild_lake(lake: DuckLake, stamp: str, fill: Fill) -> RebuildReport:
    catalog = lake.local_catalog
    data = Path(lake.data)
    if catalog is None or lake.on_s3:
        raise ConfigError(
            f"history rebuild moves a lake's catalog file and data folder aside; {lake} has its "
            "catalog in PostgreSQL or its data on S3: copy them to a local file and folder and "
            "rebuild that copy, or start a new lake and `holodeck history sync` the EvalRun "
            "files into it (docs/history.md)"
        )
    if not catalog.is_file():
        raise NoHistoryError(f"no history lake at {lake} to rebuild")
    suffix = "." + ASIDE.format(stamp=stamp)
    wal = catalog.with_name(catalog.name + ".wal")
    moved: list[tuple[Path, Path]] = []
    aside = False
    try:
        for source in (p for p in (catalog, wal, data) if p.exists()):
            source.rename(source.with_name(source.name + suffix))
            moved.append((source, source.with_name(source.name + suffix)))
        aside = True
        old_lake = DuckLake(lake.url, str(moved[0][1]), f"{data}{suffix}/")
        with old_lake.connect_as_written() as old:
            return fill(lake, old, str(moved[0][1]))
    except BaseException:
        if aside:  # what is there now is the new lake's
            catalog.unlink(missing_ok=True)
            wal.unlink(missing_ok=True)
            shutil.rmtree(data, ignore_errors=True)
        for source, target in reversed(moved):
            target.rename(source)
        raise


def _columns(old: duckdb.DuckDBPyConnection) -> dict[str, set[str]]:
    """The old history's tables and their columns."""
    found: dict[str, set[str]] = {}
    for table, column in old.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_catalog = current_database() AND table_schema = 'main'"
    ).fetchall():
        found.setdefault(table, set()).add(column)
    return found


def _select(table: str, present: set[str]) -> str:
    """The old table's rows with this schema's columns (NULL, or the value of
    :data:`~holodeck_core.history.schema.ABSENT_COLUMNS`, where it lacks one), in order."""
    columns = [
        f.name if f.name in present else f"{schema.ABSENT_COLUMNS.get(f.name, 'NULL')} AS {f.name}"
        for f in schema.arrow_schema(table)
    ]
    return f"SELECT {', '.join(columns)} FROM {table}"


def _carry_runs(
    old: duckdb.DuckDBPyConnection, new: store.History, lock_timeout: float | None
) -> list[str]:
    """The runs of the old history the files did not bring, copied row for row."""
    tables = _columns(old)
    if "eval_runs" not in tables:
        return []
    with store.reader(new, timeout_s=lock_timeout) as con:
        have = {row[0] for row in con.execute("SELECT run_id FROM eval_runs").fetchall()}
    ids = [
        row[0]
        for row in old.execute(
            "SELECT run_id FROM eval_runs ORDER BY finished_at, run_id"
        ).fetchall()
        if row[0] not in have
    ]
    selects = {t: _select(t, tables[t]) for t in schema.TABLES if t in tables}
    for batch in transfer.prepared_runs(old, ids, selects):
        ingest.write_batch(new, batch, lock_timeout=lock_timeout)
    return ids


def _carry_history_only(
    old: duckdb.DuckDBPyConnection, new: store.History, lock_timeout: float | None
) -> dict[str, int]:
    """Every row of the tables no EvalRun holds, conformed to this schema."""
    tables = _columns(old)
    parts = {
        table: tabular.conformed(table, old.sql(_select(table, tables[table])).to_arrow_table())
        for table in schema.HISTORY_ONLY_TABLES
        if table in tables
    }
    with store.writer(new, timeout_s=lock_timeout) as con:
        con.execute("BEGIN TRANSACTION")
        try:
            for table, rows in parts.items():
                tabular.insert(con, f"INSERT INTO {table} BY NAME {{rows}}", [rows])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return {table: rows.num_rows for table, rows in parts.items()}
