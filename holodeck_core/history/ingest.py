"""Ingest EvalRuns: one transaction per run, idempotent by run id (docs/architecture.md,
docs/history.md), into the DuckDB file or a DuckLake (docs/history.md).

The EvalRun JSON file is written first and stays the source of truth; the database is a
copy that ``sync`` can always complete. Rows are built before a connection is opened, and the
connection is released between batches, so concurrent writers (Dagster steps, CLI runs) each
hold the file lock only for the inserts themselves.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from holodeck_core.config import remote
from holodeck_core.config.project import superset_of
from holodeck_core.defaults import HISTORY_INGEST_BATCH
from holodeck_core.errors import ConfigError, Problem
from holodeck_core.history import schema, store, tabular
from holodeck_core.history.cost_rows import cost_tables
from holodeck_core.history.holodeck_import import LoadedRun, NotAnEvalRun, load_run_bytes
from holodeck_core.history.rows import (
    PromptInfo,
    RunSource,
    build_tables,
    derived_case_ids,
    run_id_of,
    sha256_hex,
)
from holodeck_core.history.tabular import Rows, first_row
from holodeck_core.history.trial_rows import trial_tables
from holodeck_core.models import EvalRun

if TYPE_CHECKING:
    from holodeck_core.config.project import Location

REFUSED = (
    duckdb.ConversionException,
    duckdb.OutOfRangeException,
    duckdb.InvalidInputException,
    UnicodeError,
)
"""What the history raises for a value of a run it cannot hold (a number past a column's
type, text that is not Unicode): that run is refused by name, the others are written."""


@dataclass(frozen=True)
class PreparedRun:
    """A run's rows, ready to insert."""

    run_id: str
    tables: dict[str, Rows]
    source: str | None = None
    """The EvalRun file the rows come from, named when the history refuses them."""


@dataclass
class IngestReport:
    ingested: list[str] = field(default_factory=list)
    """Run ids written by this call."""
    skipped: list[str] = field(default_factory=list)
    """Run ids already in the database (nothing written)."""
    ignored: list[Location] = field(default_factory=list)
    """JSON files in a scanned folder that are not EvalRuns (e.g. ``report.json``)."""
    problems: list[Problem] = field(default_factory=list)
    """Files that could not be read; everything else was still ingested."""

    def merge(self, other: IngestReport) -> None:
        self.ingested += other.ingested
        self.skipped += other.skipped
        self.ignored += other.ignored
        self.problems += other.problems


def resolve_prompt(run: EvalRun, prompts_dir: Path | None) -> PromptInfo:
    """The run's prompt key and, when the snapshot store holds it, the snapshot body.

    The key is the Dagster partition key when there is one, else the snapshot key whose body
    hash matches (``v3`` or ``v3+1a2b3c4d``), else the frontmatter label."""
    meta = run.metadata
    version = meta.prompt_version
    key = meta.partition_key or version.version
    if prompts_dir is None or not prompts_dir.is_dir():
        return PromptInfo(key=key)
    from holodeck_core.config.prompts import PromptStore

    try:
        prompt_store = PromptStore(prompts_dir, run.report.agent_name)
        found = meta.partition_key or prompt_store.find(version)
        snapshot = prompt_store.get(found) if found else None
    except (OSError, ValueError):  # a damaged snapshot must not block ingest
        return PromptInfo(key=key)
    if snapshot is None or snapshot.prompt_version.body_hash != version.body_hash:
        return PromptInfo(key=key)
    return PromptInfo(
        key=snapshot.key,
        body=snapshot.body,
        snapshot_path=str(prompt_store.folder / f"{snapshot.key}.json"),
        registered_at=snapshot.registered_at,
    )


def prepare_run(
    run: EvalRun,
    *,
    run_id: str | None = None,
    source_path: Location | None = None,
    file_sha256: str | None = None,
    prompts_dir: Path | None = None,
) -> PreparedRun:
    """Flatten ``run`` (no database access)."""
    rid = run_id or run_id_of(run)
    if isinstance(source_path, Path):
        source_path = source_path.resolve()
    source = RunSource(
        run_id=rid,
        source_path=str(source_path) if source_path is not None else None,
        file_sha256=file_sha256,
    )
    tables: dict[str, Rows] = {**build_tables(run, source, resolve_prompt(run, prompts_dir))}
    case_ids = derived_case_ids(run.report.results)
    tables.update(trial_tables(run, rid, case_ids))
    tables.update(cost_tables(run, rid, case_ids))
    return PreparedRun(run_id=rid, tables=tables, source=source.source_path)


def prepare_loaded(loaded: LoadedRun, prompts_dir: Path | None) -> PreparedRun:
    return prepare_run(
        loaded.run,
        run_id=loaded.run_id,
        source_path=loaded.path,
        file_sha256=loaded.file_sha256,
        prompts_dir=prompts_dir,
    )


PromptKey = tuple[str, str, str]

_BODY_FIELDS = ("body", "snapshot_path", "registered_at")


def _upsert_prompt(
    con: duckdb.DuckDBPyConnection, rows: Rows, known: dict[PromptKey, bool]
) -> None:
    """The first run that saw a prompt keeps ``first_*``; a body found later fills in. An
    insert or an update, never ``ON CONFLICT`` (a DuckLake has no keys)."""
    row = first_row(rows)
    if row is None:
        return  # a run copied from another history whose prompt an earlier run brought
    key = (row["agent_slug"], row["prompt_version"], row["body_hash"])
    has_body = row["body"] is not None
    if key not in known:
        tabular.insert(con, "INSERT INTO prompt_versions BY NAME {rows}", [rows])
    elif has_body and not known[key]:
        fills = ", ".join(
            f"{name} = coalesce({name}, {tabular.literal(row[name])})" for name in _BODY_FIELDS
        )
        where = " AND ".join(
            f"{name} = {tabular.literal(value)}"
            for name, value in zip(("agent_slug", "prompt_version", "body_hash"), key, strict=True)
        )
        con.execute(f"UPDATE prompt_versions SET {fills} WHERE {where}")
    known[key] = known.get(key, False) or has_body


def _insert_runs(
    con: duckdb.DuckDBPyConnection, runs: Sequence[PreparedRun], known: dict[PromptKey, bool]
) -> None:
    """Every table's rows of ``runs``, one bulk insert per table (inside the caller's
    transaction)."""
    for table in schema.TABLES:
        if table == "prompt_versions":
            for prepared in runs:
                _upsert_prompt(con, prepared.tables[table], known)
        else:
            parts = [prepared.tables[table] for prepared in runs]
            tabular.insert(con, f"INSERT INTO {table} BY NAME {{rows}}", parts)


def _present_and_known(
    con: duckdb.DuckDBPyConnection, ids: Sequence[str]
) -> tuple[set[str], dict[PromptKey, bool]]:
    """Which of ``ids`` are already in ``eval_runs``, and the prompts known (with whether
    each has its body)."""
    present = {
        row[0]
        for row in con.execute(
            f"SELECT run_id FROM eval_runs WHERE list_contains({tabular.literal_list(ids)}, run_id)"
        ).fetchall()
    }
    known = {
        (row[0], row[1], row[2]): bool(row[3])
        for row in con.execute(
            "SELECT agent_slug, prompt_version, body_hash, body IS NOT NULL FROM prompt_versions"
        ).fetchall()
    }
    return present, known


def write_prepared(con: duckdb.DuckDBPyConnection, batch: Sequence[PreparedRun]) -> list[bool]:
    """Insert the runs of ``batch``; per run, False (and nothing written) if its run id is
    already present.

    The presence check is made once for the batch: the caller holds DuckDB's exclusive file
    lock for the whole batch, so no other process can insert in between (and the primary key
    on ``eval_runs.run_id`` would refuse it anyway). The new runs go in one transaction (bulk
    inserts are what make ingest fast); if another connection of this process got one of them
    in first, that transaction is rolled back and the runs go one transaction each."""
    ids = [prepared.run_id for prepared in batch]
    # the checks in the inserts' transaction: on a DuckLake each transaction costs catalog
    # round trips for its snapshot, and the inserts then rest on what the checks saw
    con.execute("BEGIN TRANSACTION")
    try:
        present, known = _present_and_known(con, ids)
        new = [prepared for prepared in batch if prepared.run_id not in present]
        if new:
            _insert_runs(con, new, dict(known))
        con.execute("COMMIT")
    except duckdb.ConstraintException:
        con.execute("ROLLBACK")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    else:
        return [prepared.run_id not in present for prepared in batch]
    present, known = _present_and_known(con, ids)
    written: list[bool] = []
    for prepared in batch:
        if prepared.run_id in present:
            written.append(False)
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            _insert_runs(con, [prepared], known)
            con.execute("COMMIT")
        except duckdb.ConstraintException:
            # Only another connection of this same process can get here first (processes
            # are kept out by the file lock): then the run is present, which is success.
            con.execute("ROLLBACK")
            if not con.execute(
                f"SELECT 1 FROM eval_runs WHERE run_id = {tabular.literal(prepared.run_id)}"
            ).fetchall():
                raise
            written.append(False)
            continue
        except BaseException:
            # After a full disk DuckDB may refuse the ROLLBACK too: report the first error.
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK")
            raise
        present.add(prepared.run_id)
        written.append(True)
    return written


@contextlib.contextmanager
def write_errors(db_path: store.History) -> Iterator[None]:
    """A failed write as an execution error naming the history (no traceback)."""
    try:
        yield
    except (duckdb.IOException, duckdb.FatalException, OSError) as exc:
        raise remote.lake_error(
            f"cannot write to the history database {db_path}", str(exc)
        ) from None


def write_batch(
    db_path: store.History, batch: Sequence[PreparedRun], *, lock_timeout: float | None = None
) -> IngestReport:
    """One short writer connection for a batch of prepared runs."""
    report = IngestReport()
    unique: dict[str, PreparedRun] = {}
    for prepared in batch:
        if prepared.run_id in unique:
            report.skipped.append(prepared.run_id)  # the same run twice in one batch
        else:
            unique[prepared.run_id] = prepared
    if not unique:
        return report
    runs = list(unique.values())
    try:
        with write_errors(db_path), store.writer(db_path, timeout_s=lock_timeout) as con:
            written = write_prepared(con, runs)
    except REFUSED as exc:  # a value of one run: the others go in one by one
        if len(runs) > 1:
            for prepared in runs:
                report.merge(write_batch(db_path, [prepared], lock_timeout=lock_timeout))
            return report
        report.problems.append(refusal(runs[0], exc))
        return report
    for prepared, was_written in zip(runs, written, strict=True):
        (report.ingested if was_written else report.skipped).append(prepared.run_id)
    return report


def refusal(prepared: PreparedRun, exc: Exception) -> Problem:
    """A value of ``prepared`` the history refuses (beyond a column's range, text that is not
    UTF-8), naming its EvalRun file."""
    where = prepared.source or f"run {prepared.run_id}"
    reason = " ".join(str(exc).split())[:300]
    return Problem(file=where, message=f"not ingested: {reason}")


def _batches(items: Iterable[PreparedRun], size: int) -> Iterator[list[PreparedRun]]:
    batch: list[PreparedRun] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def ingest_run(
    db_path: store.History,
    run: EvalRun,
    *,
    source_path: Location | None = None,
    prompts_dir: Path | None = None,
    lock_timeout: float | None = None,
) -> bool:
    """Ingest one run (the call the runner makes after writing the EvalRun JSON). True if
    written, False if the run id was already there."""
    prepared = prepare_file_run(run, source_path, prompts_dir)
    report = write_batch(db_path, [prepared], lock_timeout=lock_timeout)
    if report.problems:
        raise ConfigError(report.problems)
    return bool(report.ingested)


def prepare_file_run(
    run: EvalRun, source_path: Location | None, prompts_dir: Path | None
) -> PreparedRun:
    """A run's rows, with its file's hash (and, for a run without one, its id from it)."""
    file_sha256 = None
    run_id = None
    if source_path is not None and source_path.is_file():
        file_sha256 = sha256_hex(source_path.read_bytes())
        if run.metadata.run_id is None:
            run_id = file_sha256
    return prepare_run(
        run,
        run_id=run_id,
        source_path=source_path,
        file_sha256=file_sha256,
        prompts_dir=prompts_dir,
    )


def _expand(paths: Sequence[Location]) -> list[tuple[Location, bool]]:
    """Files to read, each with whether the user named it (vs. found it in a folder): of a
    run's two files, the superset (docs/holodeck-fidelity.md)."""
    found: dict[str, tuple[Location, bool]] = {}
    for path in paths:
        if path.is_dir():
            # a hidden ``.tmp-*.json`` is an EvalRun a killed writer never finished
            children: list[Location] = sorted(path.rglob("*.json"), key=str)
            for child in children:
                if child.is_file() and not child.name.startswith("."):
                    preferred = superset_of(child)
                    found.setdefault(str(preferred), (preferred, False))
        elif path.is_file():
            preferred = superset_of(path)
            found[str(preferred)] = (preferred, True)
        else:
            raise ConfigError(f"no such file or folder: {path}")
    return list(found.values())


def known_files(
    db_path: store.History, *, lock_timeout: float | None = None
) -> tuple[set[str], set[str]]:
    """File hashes and run ids already ingested (one brief connection)."""
    with store.writer(db_path, timeout_s=lock_timeout) as con:
        rows = con.execute("SELECT file_sha256, run_id FROM eval_runs").fetchall()
    return {r[0] for r in rows if r[0]}, {r[1] for r in rows}


def ingest_paths(
    db_path: store.History,
    paths: Sequence[Location],
    *,
    prompts_dir: Path | None = None,
    lock_timeout: float | None = None,
    batch_size: int = HISTORY_INGEST_BATCH,
) -> IngestReport:
    """Ingest EvalRun files and folders of them (``import`` and ``sync``).

    Files whose bytes are already in the database are skipped without parsing. In a folder,
    JSON that is not an EvalRun is ignored; a named file that is not one is a problem."""
    files = _expand(paths)
    known_hashes, known_ids = known_files(db_path, lock_timeout=lock_timeout)
    report = IngestReport()
    pending: list[PreparedRun] = []
    for path, named in files:
        try:
            data = path.read_bytes()
        except OSError as exc:
            report.problems.append(Problem(file=str(path), message=f"cannot read: {exc}"))
            continue
        digest = sha256_hex(data)
        if digest in known_hashes:
            report.skipped.append(digest)
            continue
        try:
            loaded = load_run_bytes(path, data)
        except NotAnEvalRun as exc:
            if named:
                report.problems.append(
                    Problem(file=str(path), message=f"not an EvalRun file: {exc}")
                )
            else:
                report.ignored.append(path)
            continue
        except ConfigError as exc:
            report.problems.extend(exc.problems)
            continue
        if loaded.run_id in known_ids:
            report.skipped.append(loaded.run_id)
            continue
        known_ids.add(loaded.run_id)
        pending.append(prepare_loaded(loaded, prompts_dir))
        if len(pending) >= batch_size:
            report.merge(write_batch(db_path, pending, lock_timeout=lock_timeout))
            pending = []
    report.merge(write_batch(db_path, pending, lock_timeout=lock_timeout))
    return report


def sync(
    db_path: store.History,
    results_dir: Location,
    *,
    prompts_dir: Path | None = None,
    lock_timeout: float | None = None,
) -> IngestReport:
    """Ingest every EvalRun under ``results_dir`` that the database does not have yet."""
    if not results_dir.is_dir():
        raise ConfigError(f"results folder not found: {results_dir}")
    return ingest_paths(db_path, [results_dir], prompts_dir=prompts_dir, lock_timeout=lock_timeout)
