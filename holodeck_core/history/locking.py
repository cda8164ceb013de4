"""What DuckDB says when another process (or connection) holds a database file: the history
file's connections (:mod:`holodeck_core.history.store`) and a DuckLake's local catalog file
(:mod:`holodeck_core.history.ducklake`) both wait it out."""

from __future__ import annotations

LOCK_TEXTS = (
    "Could not set lock on file",
    # The same file already open in this process with another configuration (a writer while
    # we want a reader, e.g. two steps of an in-process executor): wait for it the same way.
    "Can't open a connection to same database file with a different configuration",
)


def is_lock_error(exc: BaseException) -> bool:
    return any(text in str(exc) for text in LOCK_TEXTS)
