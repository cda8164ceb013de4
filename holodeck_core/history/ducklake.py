"""The DuckLake backend of the history (docs/history.md): the same tables, views and macros as the
DuckDB file, in a DuckLake catalog (a local catalog file or PostgreSQL) whose data files sit
in a folder or on S3. DuckLake's snapshots give each reader one consistent view while writers
commit; a writer killed before its commit leaves no row a reader counts (its orphaned files
are removed by :func:`maintain`).

URL syntax (``--lake`` / ``HOLODECK_HISTORY_URL``; ``docs/history.md``):

- ``FOLDER``: a lake kept in one folder (catalog ``FOLDER/catalog.ducklake``, data
  ``FOLDER/data/``);
- ``ducklake:CATALOG_FILE[?data=DATA]``: a local catalog file, its data in ``DATA`` (a folder
  or ``s3://bucket/prefix``; default ``CATALOG_FILE.files/``);
- ``ducklake:postgresql://USER@HOST:PORT/DBNAME?data=DATA``: the catalog in PostgreSQL (the
  password from ``PGPASSWORD``, never in the URL), ``data`` required.

DuckDB's extensions come from their PyPI packages, never downloaded (``extensions.py``).
S3 credentials come from the environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL``) into a
temporary secret of the connection.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit

from holodeck_core import defaults
from holodeck_core.config import remote
from holodeck_core.config.project import LAKE_ENV
from holodeck_core.errors import ConfigError, NoHistoryError
from holodeck_core.history import schema
from holodeck_core.history.extensions import extensions_connection
from holodeck_core.history.locking import is_lock_error
from holodeck_core.history.tabular import literal
from holodeck_core.redaction import redact_text

if TYPE_CHECKING:
    import duckdb

ALIAS = "history"
SCHEME = "ducklake:"
_POSTGRES = ("postgresql://", "postgres://")
_ATTACH_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class DuckLake:
    """A DuckLake history: ``catalog`` as ``ATTACH 'ducklake:…'`` takes it, ``data`` its
    data path; ``url`` as the user gave it."""

    url: str
    catalog: str
    data: str

    @classmethod
    def parse(cls, url: str) -> DuckLake:
        """The lake ``url`` names; a :class:`ConfigError` naming it when it cannot be read
        (a broken IPv6 host, a ``~user`` with no home)."""
        try:
            return cls._parsed(url)
        except (ValueError, RuntimeError) as exc:
            raise ConfigError(
                f"history lake {redact_text(url)!r}: {redact_text(str(exc))}; fix the URL "
                f"(--lake or {LAKE_ENV}; docs/history.md)"
            ) from None

    @classmethod
    def _parsed(cls, url: str) -> DuckLake:
        if not url.startswith(SCHEME):
            if "://" in url:
                raise ConfigError(
                    f"history lake {redact_text(url)!r}: a DuckLake needs a catalog; give "
                    f"ducklake:postgresql://USER@HOST:PORT/DB?data={redact_text(url)} or "
                    f"ducklake:CATALOG_FILE?data=... (--lake or {LAKE_ENV}; docs/history.md)"
                )
            folder = Path(url).expanduser().resolve()
            return cls(url, str(folder / "catalog.ducklake"), f"{folder}/data/")
        rest = url[len(SCHEME) :]
        if rest.startswith(_POSTGRES):
            parts = urlsplit(rest)
            query = dict(parse_qsl(parts.query))
            data = query.pop("data", None)
            if not data:
                raise ConfigError(
                    f"history lake {redact_text(url)!r}: a PostgreSQL catalog needs its data "
                    "path: add ?data=s3://bucket/prefix (or a folder)"
                )
            conninfo = remote.postgres_conninfo(parts._replace(query=urlencode(query)).geturl())
            return cls(url, f"postgres:{conninfo}", _folder(data))
        path, _, query_text = rest.partition("?")
        query = dict(parse_qsl(query_text))
        if not path:
            raise ConfigError(f"history lake {url!r}: give a catalog after {SCHEME}")
        catalog = str(Path(path).expanduser().resolve())
        return cls(url, catalog, _folder(query.get("data") or f"{catalog}.files"))

    def __str__(self) -> str:
        return redact_text(self.url)

    @property
    def on_s3(self) -> bool:
        return self.data.startswith("s3://")

    @property
    def local_catalog(self) -> Path | None:
        return None if self.catalog.startswith("postgres:") else Path(self.catalog)

    def extensions(self) -> tuple[str, ...]:
        names: tuple[str, ...] = ("parquet", "ducklake")
        if not self.local_catalog:
            names += ("postgres",)
        return names + (("httpfs",) if self.on_s3 else ())

    def _missing(self) -> NoHistoryError:
        return NoHistoryError(
            f"no history lake at {self}: write to it first (`holodeck history sync "
            f"RESULTS_DIR`, or a run) or point --lake / {LAKE_ENV} at one"
        )

    def _attach(
        self, con: duckdb.DuckDBPyConnection, *, read_only: bool, moved: bool = False
    ) -> None:
        import duckdb

        options = [f"DATA_PATH {literal(self.data)}"] + (["READ_ONLY"] if read_only else [])
        options += ["OVERRIDE_DATA_PATH true"] if moved else []
        sql = f"ATTACH {literal(SCHEME + self.catalog)} AS {ALIAS} ({', '.join(options)})"
        start, delay = time.monotonic(), 0.02
        while True:
            try:
                con.execute(sql)
                return
            except duckdb.Error as exc:
                if read_only and "creating a new DuckLake is explicitly disabled" in str(exc):
                    raise self._missing() from None  # a PostgreSQL catalog nobody wrote yet
                # a local catalog file allows one writing process at a time: wait for it
                if not is_lock_error(exc) or time.monotonic() - start > _ATTACH_TIMEOUT_S:
                    raise remote.lake_error(f"cannot open history lake {self}", str(exc)) from None
                time.sleep(delay / 2 + random.uniform(0, delay / 2))
                delay = min(delay * 2, 1.0)

    def _open(self, *, read_only: bool, moved: bool = False) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB with the extensions loaded and the lake attached and in use;
        ``moved``: its data no longer where its catalog says (a lake moved aside)."""
        con = extensions_connection(self.extensions())
        try:
            if self.on_s3:
                remote.require_s3_credentials(f"history lake {self}", keys_only=True)
                for setting in remote.duckdb_settings():
                    con.execute(setting)
                s3_secret(con)
            self._attach(con, read_only=read_only, moved=moved)
            con.execute(f"USE {ALIAS}")
        except BaseException:
            con.close()
            raise
        return con

    @contextmanager
    def connect(
        self, *, read_only: bool, safe: bool = False
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection with the lake attached and in use. A writer creates the schema in a new
        lake; a reader holds one snapshot (a transaction) and, ``safe``, no access beyond the
        lake's data (user SQL). A new lake gets the schema through a brief writer first."""
        if read_only and self.local_catalog and not self.local_catalog.is_file():
            raise self._missing()
        if not read_only and self.local_catalog:
            self.local_catalog.parent.mkdir(parents=True, exist_ok=True)
        con = self._open(read_only=read_only)
        try:
            if not read_only:
                _create_schema(con, str(self))
            else:
                # the snapshot first, the version read in it: one catalog round trip fewer
                con.execute("BEGIN TRANSACTION")
                if not schema.installed_version(con, str(self)):
                    con.close()
                    with self.connect(read_only=False):
                        pass
                    con = self._open(read_only=True)
                    con.execute("BEGIN TRANSACTION")
                if safe:
                    con.execute(f"SET allowed_directories = [{literal(self.data)}]")
                    con.execute("SET enable_external_access = false")
                    con.execute("SET lock_configuration = true")
            yield con
        finally:
            con.close()

    @contextmanager
    def connect_as_written(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection to a lake moved aside (its data beside its catalog, not
        where the catalog says), at whatever schema it has: ``holodeck history rebuild``
        reads an earlier release's lake with it."""
        con = self._open(read_only=True, moved=True)
        try:
            con.execute("BEGIN TRANSACTION")
            yield con
        finally:
            con.close()


def _folder(path: str) -> str:
    """A data path as DuckLake wants it: a folder ending in ``/``, local ones absolute."""
    if "://" not in path:
        path = str(Path(path).expanduser().resolve())
    return path.rstrip("/") + "/"


def s3_secret(con: duckdb.DuckDBPyConnection) -> None:
    """A temporary S3 secret from the standard AWS variables (nothing is written anywhere)."""
    fields = {
        "KEY_ID": os.environ.get("AWS_ACCESS_KEY_ID"),
        "SECRET": os.environ.get("AWS_SECRET_ACCESS_KEY"),
        "SESSION_TOKEN": os.environ.get("AWS_SESSION_TOKEN"),
        "REGION": os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION"),
    }
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    options = [f"{key} {literal(value)}" for key, value in fields.items() if value]
    if endpoint:
        parts = urlsplit(endpoint)
        options += [
            f"ENDPOINT {literal(parts.netloc or parts.path)}",
            f"USE_SSL {'true' if parts.scheme != 'http' else 'false'}",
            "URL_STYLE 'path'",
        ]
    con.execute(f"CREATE OR REPLACE TEMPORARY SECRET holodeck_s3 (TYPE s3, {', '.join(options)})")


def _create_schema(con: duckdb.DuckDBPyConnection, label: str) -> None:
    """The schema in a new lake, its tables made without what DuckLake lacks (keys, CHECK
    constraints); two writers creating a new lake at once: the loser retries."""
    import duckdb

    for attempt in range(5):
        try:
            schema.create(con, db_label=label, translate=lake_ddl)
            return
        except duckdb.TransactionException:
            if attempt == 4:
                raise
            time.sleep(random.uniform(0.05, 0.2))


def lake_ddl(statement: str) -> str:
    """``statement`` as DuckLake takes it: a ``CREATE TABLE`` is made in a scratch database
    and written again from its columns (types, NOT NULL, defaults), without the primary keys
    and CHECK constraints DuckLake does not support; anything else is unchanged."""
    if not statement.lstrip().upper().startswith("CREATE TABLE"):
        return statement
    import duckdb

    scratch = duckdb.connect()
    try:
        scratch.execute(statement)
        columns = scratch.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns ORDER BY ordinal_position"
        ).fetchall()
    finally:
        scratch.close()
    table = columns[0][0]
    body = ", ".join(
        f"{name} {kind}"
        + ("" if nullable == "YES" else " NOT NULL")
        + (f" DEFAULT {default}" if default is not None else "")
        for _, name, kind, nullable, default in columns
    )
    return f"CREATE TABLE {table} ({body})"


def maintain(lake: DuckLake, *, grace_s: float = defaults.MAINTAIN_GRACE_S) -> dict[str, int]:
    """Compaction and cleanup: rows inlined in the catalog written out, small files merged,
    snapshots but the last expired, and the files nothing references any more (old
    snapshots', aborted writers') deleted. Only what is older than ``grace_s`` seconds is
    expired or deleted: an unreferenced data file may be a live writer's before its commit,
    and an old snapshot's files may be under a read still running. Returns the number of
    files merged and deleted."""
    cutoff = f"older_than => now() - to_seconds({float(grace_s)!r})"
    with lake.connect(read_only=False) as con:
        con.execute(f"CALL ducklake_flush_inlined_data({literal(ALIAS)})")
        merged = con.execute(f"CALL ducklake_merge_adjacent_files({literal(ALIAS)})").fetchall()
        con.execute(f"CALL ducklake_expire_snapshots({literal(ALIAS)}, {cutoff})")
        cleaned = con.execute(
            f"CALL ducklake_cleanup_old_files({literal(ALIAS)}, {cutoff})"
        ).fetchall()
        orphans = con.execute(
            f"CALL ducklake_delete_orphaned_files({literal(ALIAS)}, {cutoff})"
        ).fetchall()
    return {"merged": len(merged), "deleted": len(cleaned) + len(orphans)}
