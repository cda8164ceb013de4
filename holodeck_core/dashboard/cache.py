"""Pages and query results kept per state of the history file.

A key is stored with the file's *stamp* (size and modification time of the database and of
its write-ahead log; a lake's catalog file, where every commit lands); any write changes the
stamp, so the next request after a run is written recomputes and shows it. Until then, a
reload, a warm bench load or a sort of the runs table reuses what the last request read
instead of querying 100,000 case rows again.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar

from holodeck_core.history.store import History

T = TypeVar("T")

MAX_ENTRIES = 64
"""Pages and filtered run lists kept (least recently used dropped first)."""

_entries: OrderedDict[tuple[Hashable, ...], Any] = OrderedDict()
_lock = threading.Lock()


LAKE_STAMP_S = 5.0
"""A lake whose catalog is in PostgreSQL has no file to stat: what was read from it is kept
this many seconds (asking the catalog costs a connection)."""


def stamp(db: History) -> tuple[int, ...]:
    """Size and mtime of the database and its WAL (of a lake's local catalog file and its
    WAL); zeros for a file that does not exist. A lake whose catalog is in PostgreSQL has a
    stamp that changes every :data:`LAKE_STAMP_S` seconds."""
    if not isinstance(db, Path):
        if db.local_catalog is None:
            return (int(time.monotonic() // LAKE_STAMP_S),)
        db = db.local_catalog
    parts: list[int] = []
    for path in (db, db.with_name(db.name + ".wal")):
        try:
            info = path.stat()
        except OSError:
            parts.extend((0, 0))
        else:
            parts.extend((info.st_size, info.st_mtime_ns))
    return tuple(parts)


def cached(db: History, key: tuple[Hashable, ...], make: Callable[[], T]) -> T:
    """``make()``, or what it returned for ``key`` while the history file was as it is now.
    Exceptions are not kept: a page that failed is tried again on the next request."""
    full = (str(db), stamp(db), *key)
    with _lock:
        if full in _entries:
            _entries.move_to_end(full)
            return _entries[full]  # type: ignore[no-any-return]
    value = make()
    with _lock:
        _entries[full] = value
        while len(_entries) > MAX_ENTRIES:
            _entries.popitem(last=False)
    return value


def clear() -> None:
    """Forget every page and result (the next request computes from nothing)."""
    with _lock:
        _entries.clear()
