"""The history lake (DESIGN §7.10): the history as Parquet files, one set per run, on a folder or
a bucket, so many writers on many machines never lock each other.

Layout: ``<url>/<table>/run_id=<run id>.parquet`` for each history table (a run's empty tables
get no file). A writer writes only its own run's files, each to a temporary name that is then
renamed, and the ``eval_runs`` file last: a run exists exactly when its ``eval_runs`` file
does. A reader lists ``eval_runs`` first and reads the other tables' files of those runs only,
so a run being written meanwhile is invisible, never half there.

Readers are in-memory DuckDB connections holding a snapshot: the schema is migrated as in the
database file (the same tables, the analyst views of the migrations), then each table is filled
from the committed runs' files, cast to the DDL's types. Views then run at in-memory speed
(reading the files per query was 10x slower), and ``safe`` readers (user SQL) turn external
access off once the snapshot is loaded.

URLs are anything fsspec opens (a path, ``file://``, ``s3://bucket/prefix`` through s3fs);
credentials come from the environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_ENDPOINT_URL``...), never from a file of ours.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from holodeck_core.config.project import LAKE_ENV
from holodeck_core.errors import ConfigError, ExecutionError
from holodeck_core.history import schema
from holodeck_core.history.tabular import Rows, as_arrow

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa
    from fsspec import AbstractFileSystem

COMMIT_TABLE = "eval_runs"
FAILED_RUNS = "failed_runs"
_PREFIX = "run_id="
_SUFFIX = ".parquet"

_PROMPTS_FIRST_SEEN = """
SELECT * REPLACE (
    coalesce(body, max(body) OVER k) AS body,
    coalesce(snapshot_path, max(snapshot_path) OVER k) AS snapshot_path,
    coalesce(registered_at, max(registered_at) OVER k) AS registered_at
)
FROM ({select})
WINDOW k AS (PARTITION BY agent_slug, prompt_version, body_hash)
QUALIFY row_number() OVER (PARTITION BY agent_slug, prompt_version, body_hash
                           ORDER BY first_seen_at, first_run_id) = 1
"""
"""Each run carries its prompt's row; the lake serves one per prompt, as the database's upsert
keeps it: the first run's, with a body, snapshot or registration found later filled in."""


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class Lake:
    """A history lake at ``url``."""

    url: str
    storage_options: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __str__(self) -> str:
        return self.url

    @cached_property
    def _fs_root(self) -> tuple[AbstractFileSystem, str]:
        from fsspec.core import url_to_fs

        try:
            fs, root = url_to_fs(self.url, **self.storage_options)
        except (ImportError, ValueError) as exc:
            raise ConfigError(
                f"history lake {self.url!r}: {exc}. Give a folder or an s3://bucket/prefix URL "
                f"(--lake or {LAKE_ENV})"
            ) from None
        return fs, str(root).rstrip("/")

    @property
    def fs(self) -> AbstractFileSystem:
        return self._fs_root[0]

    @property
    def is_local(self) -> bool:
        return "file" in _protocols(self.fs)

    def file(self, table: str, run_id: str) -> str:
        return f"{self._fs_root[1]}/{table}/{_PREFIX}{quote(run_id, safe='')}{_SUFFIX}"

    def _qualified(self, path: str) -> str:
        """A path as DuckDB must see it: with its protocol unless it is local."""
        return path if self.is_local else self.fs.unstrip_protocol(path)

    def _files(self, table: str) -> dict[str, str]:
        """Committed file of each run id in ``table`` (temporary files never match)."""
        folder = f"{self._fs_root[1]}/{table}"
        pattern = f"{folder}/{_PREFIX}*{_SUFFIX}"
        self.fs.invalidate_cache(folder)  # s3fs caches listings; other writers add files
        try:
            paths = self.fs.glob(pattern)
        except FileNotFoundError:
            return {}
        found: dict[str, str] = {}
        for path in paths:
            name = str(path).rsplit("/", 1)[-1]
            found[unquote(name[len(_PREFIX) : -len(_SUFFIX)])] = str(path)
        return found

    def run_ids(self) -> set[str]:
        """The committed runs."""
        return set(self._files(COMMIT_TABLE))

    # ------------------------------------------------------------------ writing

    def _put(self, table: str, name_id: str, rows: Rows) -> None:
        """Write ``rows`` under a temporary name in the table's folder, then rename."""
        import pyarrow.parquet as pq

        final = self.file(table, name_id)
        folder = final.rsplit("/", 1)[0]
        tmp = f"{folder}/.tmp-{uuid.uuid4().hex}{_SUFFIX}"
        try:
            self.fs.makedirs(folder, exist_ok=True)
            with self.fs.open(tmp, "wb") as handle:
                pq.write_table(as_arrow(rows), handle)
            self.fs.mv(tmp, final)
        except OSError as exc:
            if self.fs.exists(tmp):
                self.fs.rm(tmp)
            raise ExecutionError(f"cannot write to history lake {self.url}: {exc}") from None

    def write_run(self, run_id: str, tables: Mapping[str, Rows]) -> bool:
        """Write one run's files; False (nothing written) if the run is already there."""
        self.fs.invalidate_cache(self.file(COMMIT_TABLE, run_id).rsplit("/", 1)[0])
        if self.fs.exists(self.file(COMMIT_TABLE, run_id)):
            return False
        for table in schema.TABLES:
            if table != COMMIT_TABLE and len(tables[table]):
                self._put(table, run_id, tables[table])
        self._put(COMMIT_TABLE, run_id, tables[COMMIT_TABLE])  # the commit marker
        return True

    def write_runs(self, batch: Sequence[tuple[str, Mapping[str, Rows]]]) -> list[bool]:
        return [self.write_run(run_id, tables) for run_id, tables in batch]

    def write_failed_run(self, rows: pa.Table) -> None:
        """One ``failed_runs`` row, keyed by its Dagster run id (idempotent)."""
        dagster_run_id = str(rows.column("dagster_run_id")[0])
        if not self.fs.exists(self.file(FAILED_RUNS, dagster_run_id)):
            self._put(FAILED_RUNS, dagster_run_id, rows)

    # ------------------------------------------------------------------ reading

    @contextmanager
    def reader(self, *, safe: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A snapshot of the committed runs with every table and view of the schema. ``safe``:
        then no file, network or extension access (user SQL)."""
        import duckdb

        con = duckdb.connect()
        try:
            if not self.is_local:
                con.register_filesystem(self.fs)
            schema.migrate(con, db_label=self.url)
            self._bind(con)
            if safe:
                con.execute("SET enable_external_access = false")
                con.execute("SET lock_configuration = true")
            yield con
        finally:
            con.close()

    def _bind(self, con: duckdb.DuckDBPyConnection) -> None:
        """Replace the schema's tables (empty, just migrated) by the snapshot's rows."""
        import duckdb

        committed = self._files(COMMIT_TABLE)  # listed first: the snapshot
        types = _column_types(con)
        for table in (*schema.TABLES, FAILED_RUNS):
            files = self._files(table)
            if table != FAILED_RUNS:
                files = {rid: path for rid, path in files.items() if rid in committed}
            if not files:
                continue  # the migrated empty table stays
            con.execute(f"DROP TABLE {table}")
            paths = [self._qualified(p) for p in sorted(files.values())]
            try:
                self._create(con, table, paths, types[table], union=False)
            except duckdb.InvalidInputException:  # an older file lacks a newer column
                self._create(con, table, paths, types[table], union=True)

    @staticmethod
    def _create(
        con: duckdb.DuckDBPyConnection,
        table: str,
        paths: list[str],
        types: dict[str, str],
        *,
        union: bool,
    ) -> None:
        """``table`` from ``paths``, cast to the DDL's columns (NULL where no file has one).

        Files of one release share a schema, so matching columns by the first file's names
        (fast) is right unless that file lacks a DDL column; then, or when another file lacks
        one, columns are unioned by name (slower: every footer is read first)."""
        listed = ", ".join(_sql_string(p) for p in paths)
        options = "hive_partitioning = false" + (", union_by_name = true" if union else "")
        first = f"read_parquet([{listed if union else _sql_string(paths[0])}], {options})"
        present = {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {first}").fetchall()}
        if not union and not present >= types.keys():
            raise duckdb.InvalidInputException(f"{paths[0]} lacks columns")
        columns = ", ".join(
            f"CAST({name if name in present else 'NULL'} AS {kind}) AS {name}"
            for name, kind in types.items()
        )
        select = f"SELECT {columns} FROM read_parquet([{listed}], {options})"
        if table == "prompt_versions":
            select = _PROMPTS_FIRST_SEEN.format(select=select)
        con.execute(f"CREATE TABLE {table} AS {select}")


def _protocols(fs: AbstractFileSystem) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def _column_types(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, str]]:
    """Each table's columns and DDL types, in order, from the migrated schema."""
    types: dict[str, dict[str, str]] = {}
    for table, column, kind in con.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
    ).fetchall():
        types.setdefault(table, {})[column] = kind
    return types
