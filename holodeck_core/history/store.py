"""Connections to the history database under DuckDB's single-writer rule (docs/architecture.md).

One DuckDB file allows one read-write process or many read-only ones, never both, and a
bare ``duckdb.connect`` fails at once with ``Could not set lock on file``. So every connection
here retries that error with bounded, jittered exponential backoff, then raises
:class:`ExecutionError` naming the file, the process that holds the lock (parsed from DuckDB's
message) and what to do. Callers keep connections short: prepare the rows first, connect,
write, close; never hold a connection while waiting on anything else.
"""

from __future__ import annotations

import atexit
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holodeck_core.defaults import HISTORY_LOCK_TIMEOUT_S, HISTORY_PREBUILD_EXIT_WAIT_S
from holodeck_core.errors import ConfigError, ExecutionError, NoHistoryError
from holodeck_core.history import schema
from holodeck_core.history.ducklake import DuckLake
from holodeck_core.history.locking import LOCK_TEXTS, is_lock_error

if TYPE_CHECKING:
    import duckdb

History = Path | DuckLake
"""Where a history lives: a DuckDB file (the embedded default) or a DuckLake (docs/history.md)."""

LOCK_TIMEOUT_ENV = "HOLODECK_HISTORY_LOCK_TIMEOUT"
_FIRST_DELAY_S = 0.02
_MAX_DELAY_S = 1.0

_HOLDER = re.compile(
    r"Conflicting lock is held in (?P<process>.+?) \(PID (?P<pid>\d+)\)"
    r"(?: by user (?P<user>[^\s.]+(?:\.[^\s.]+)*))?"  # a user name, not the sentence's '.'
)

SAFE_READER_CONFIG: dict[str, Any] = {"enable_external_access": False, "lock_configuration": True}
"""For user SQL: no file, network or extension access, and no ``SET`` to undo it."""


@dataclass(frozen=True)
class LockHolder:
    """The process DuckDB names as holding the file lock."""

    process: str | None
    pid: int | None
    user: str | None = None

    def describe(self) -> str:
        who = self.process or "another process"
        if self.pid is not None:
            who += f" (PID {self.pid}"
            who += f", user {self.user})" if self.user else ")"
        return who


def parse_lock_holder(message: str) -> LockHolder:
    """The lock holder from DuckDB's error text, e.g. ``Conflicting lock is held in
    /usr/bin/python3 (PID 4242) by user ana``; unknown parts are None."""
    match = _HOLDER.search(message)
    if match is None:
        if LOCK_TEXTS[1] in message:
            return LockHolder(process="this process", pid=os.getpid())
        return LockHolder(process=None, pid=None)
    return LockHolder(
        process=match.group("process"), pid=int(match.group("pid")), user=match.group("user")
    )


def lock_timeout(value: float | None = None) -> float:
    """The bounded wait for a locked file: ``value``, else ``HOLODECK_HISTORY_LOCK_TIMEOUT``,
    else 30 s."""
    if value is not None:
        return max(0.0, value)
    configured = os.environ.get(LOCK_TIMEOUT_ENV)
    if configured:
        try:
            return max(0.0, float(configured))
        except ValueError:
            raise ConfigError(
                f"{LOCK_TIMEOUT_ENV}={configured!r} is not a number of seconds"
            ) from None
    return HISTORY_LOCK_TIMEOUT_S


def lock_message(path: Path, holder: LockHolder, waited_s: float, *, read_only: bool) -> str:
    pid_hint = f" (`kill {holder.pid}` if it is stuck)" if holder.pid is not None else ""
    role = "read it" if read_only else "write to it"
    return (
        f"history database {path} is locked by {holder.describe()}; gave up waiting to {role} "
        f"after {waited_s:.1f}s. DuckDB allows one writer or many readers at a time, never "
        f"both. Wait for that process to finish{pid_hint}, or wait longer with --lock-timeout "
        f"SECONDS / {LOCK_TIMEOUT_ENV}. Nothing is lost: EvalRun JSON files are written "
        "first, and `holodeck history sync RESULTS_DIR` ingests any run that missed the database."
    )


def connect_with_retry(
    path: Path,
    *,
    read_only: bool,
    config: dict[str, Any] | None = None,
    timeout_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect`` that waits out another process's lock, within ``timeout_s``."""
    import duckdb

    budget = lock_timeout(timeout_s)
    start = time.monotonic()
    delay = _FIRST_DELAY_S
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only, config=dict(config or {}))
        except duckdb.Error as exc:
            if not is_lock_error(exc):
                raise ExecutionError(
                    f"cannot open history database {path}: {' '.join(str(exc).split())}"
                ) from None
            waited = time.monotonic() - start
            if waited >= budget:
                holder = parse_lock_holder(str(exc))
                raise ExecutionError(
                    lock_message(path, holder, waited, read_only=read_only)
                ) from None
            # Equal jitter: half the delay fixed, half random, so contending writers spread out.
            pause = min(budget - waited, delay / 2 + random.uniform(0, delay / 2))
            sleep(max(pause, 0.001))
            delay = min(delay * 2, _MAX_DELAY_S)


@contextmanager
def writer(path: History, *, timeout_s: float | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection to a history of this schema (:mod:`holodeck_core.history.schema`).
    Creates the database (and its folder) when missing. Keep the ``with`` block short."""
    if isinstance(path, DuckLake):
        with path.connect(read_only=False) as lake_con:
            yield lake_con
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        _create(path)
    con = connect_with_retry(path, read_only=False, timeout_s=timeout_s)
    try:
        _prepare(con, path)
        yield con
    finally:
        con.close()


def _prepare(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    # one thread: a writer's short bulk inserts pay more for DuckDB's thread hand-offs than
    # they gain (bench/history_bench.py: 40 % less CPU per ingested run)
    con.execute("SET threads = 1")
    schema.create(con, db_label=str(path))


def _create(path: Path) -> None:
    """Make a new history appear whole: built under a temporary name (or taken from
    :func:`prebuild`), then linked into place. A process that opened the file while another
    was still writing its first blocks was refused ("not a valid DuckDB database file"); now
    it sees no file or a complete one. ``os.link`` fails if another process won the race: its
    file serves."""
    import duckdb

    with _PREBUILDING:  # waits for a build still under way
        tmp = _PREBUILT.pop(path, None)
    try:
        if tmp is None:
            tmp = _temporary(path)
            _build(tmp, path)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # no hard links on this file system: a rename that may race
            if not path.exists():
                tmp.replace(path)
    except (duckdb.Error, OSError) as exc:
        raise ExecutionError(
            f"cannot create history database {path}: {' '.join(str(exc).split())}"
        ) from None
    finally:
        if tmp is not None:
            _discard(tmp)


_PREBUILT: dict[Path, Path] = {}
"""New histories' files built ahead by :func:`prebuild`: the history's path → the temporary
file holding its schema, until :func:`_create` links it into place."""
_PREBUILDING = threading.Lock()


def prebuild(path: History) -> None:
    """Build a missing history file's schema ahead, while a run waits on its model calls, so
    its write at the end only inserts. The schema stays under a temporary name (no lock on
    ``path``, nothing at ``path``) until a writer links it into place; a process that never
    writes removes it at exit. A DuckLake, an existing file or a missing folder: nothing to
    do; a build that fails is left to the writer, which reports it."""
    import duckdb

    if isinstance(path, DuckLake):
        return
    with _PREBUILDING:
        if path in _PREBUILT or path.exists() or not path.parent.is_dir():
            return
        tmp = _temporary(path)
        atexit.register(_discard_unused, tmp)
        try:
            _build(tmp, path)
        except (duckdb.Error, OSError):
            _discard(tmp)
            return
        _PREBUILT[path] = tmp


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}-{random.getrandbits(32):08x}.tmp")


def _build(tmp: Path, path: Path) -> None:
    import duckdb

    con = duckdb.connect(str(tmp))
    try:
        _prepare(con, path)
    finally:
        con.close()


def _discard(tmp: Path) -> None:
    for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
        leftover.unlink(missing_ok=True)


def _discard_unused(tmp: Path) -> None:
    """At exit: a prebuilt file no writer took (the run failed or was interrupted), once a
    build still under way has finished."""
    if _PREBUILDING.acquire(timeout=HISTORY_PREBUILD_EXIT_WAIT_S):
        try:
            _discard(tmp)
        finally:
            _PREBUILDING.release()


@contextmanager
def reader(
    path: History, *, timeout_s: float | None = None, safe: bool = False
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection. ``safe`` also disables external access (for user SQL).

    A database without the schema yet gets it through a brief writer first. A
    DuckLake gives one snapshot of its committed runs with the same tables and views."""
    if isinstance(path, DuckLake):
        with path.connect(read_only=True, safe=safe) as lake_con:
            yield lake_con
        return
    if not path.is_file():
        raise NoHistoryError(
            f"no history database at {path}. Create it with `holodeck history sync "
            "RESULTS_DIR` or `holodeck history import FILE...`, or point --db / "
            "HOLODECK_HISTORY_DB at an existing one"
        )
    config = SAFE_READER_CONFIG if safe else None
    con = connect_with_retry(path, read_only=True, config=config, timeout_s=timeout_s)
    try:
        empty = not schema.installed_version(con, str(path))
    except BaseException:
        con.close()
        raise
    if empty:
        con.close()
        with writer(path, timeout_s=timeout_s):
            pass
        con = connect_with_retry(path, read_only=True, config=config, timeout_s=timeout_s)
    try:
        yield con
    finally:
        con.close()


@contextmanager
def opened(source: History | duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """A reader of ``source``, or ``source`` itself when it is already a connection: a step
    that has just written a run asks its questions on the connection it wrote with, so it
    opens the history once."""
    if not isinstance(source, Path | DuckLake):
        yield source
        return
    with reader(source) as con:
        yield con
