"""A user's SQL (``holodeck history sql``): one read-only statement, checked before any
database is opened (:func:`check_select`), then run within bounds (:func:`run_select`): at
most ``max_rows`` rows are fetched (the result streams, so ``SELECT * FROM
range(10000000000)`` costs ``max_rows`` rows, not 17 GB) and the statement is interrupted
after ``timeout_s`` seconds.

A SELECT can still call a table function, and DuckLake's maintenance functions
(``ducklake_cleanup_old_files``, ``ducklake_flush_inlined_data``, ...) delete or write the
lake's data files before they fail on its read-only catalog. So the statement's syntax tree
(DuckDB's own, ``json_serialize_sql``) is walked, CTEs, subqueries and LATERAL included: a
table function outside :data:`READ_TABLE_FUNCTIONS`, or any other ``ducklake_*`` function, is
refused before the database is opened (``docs/history.md``)."""

from __future__ import annotations

import json
import math
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from holodeck_core.defaults import (
    HISTORY_SQL_INTERRUPT_EVERY_S,
    HISTORY_SQL_MAX_ROWS,
    HISTORY_SQL_TIMEOUT_S,
)
from holodeck_core.errors import ConfigError

if TYPE_CHECKING:
    import duckdb

    from holodeck_core.history.store import History

HISTORY_TABLE_MACROS = frozenset(
    {
        "flaky_cases",
        "holodeck_case_trials",
        "holodeck_judge_agreement",
        "holodeck_run_comparisons",
        "holodeck_run_comparisons_raw",
    }
)
"""The table macros the history's schema defines (holodeck_core/history/sql/views/; checked
by tests/test_lake_sql.py)."""

READ_TABLE_FUNCTIONS = HISTORY_TABLE_MACROS | {
    # rows made up by the query
    "range",
    "generate_series",
    "unnest",
    # the catalog's description
    "duckdb_columns",
    "duckdb_constraints",
    "duckdb_functions",
    "duckdb_schemas",
    "duckdb_tables",
    "duckdb_types",
    "duckdb_views",
    "pragma_table_info",
    # a DuckLake's snapshots, files and changes, read from its catalog
    "ducklake_current_snapshot",
    "ducklake_last_committed_snapshot",
    "ducklake_list_files",
    "ducklake_options",
    "ducklake_settings",
    "ducklake_snapshots",
    "ducklake_table_changes",
    "ducklake_table_deletions",
    "ducklake_table_info",
    "ducklake_table_insertions",
}
"""The table functions a read-only query may call: an allow-list, since any other may read
files (``read_csv``), run SQL given as text (``query``) or write and delete a lake's files
(``ducklake_cleanup_old_files``, ``ducklake_flush_inlined_data``, ``ducklake_set_option``)."""

SAFE_PARSER_CONFIG: dict[str, bool] = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "lock_configuration": True,
}
"""The scratch DuckDB a query is parsed and checked in: no files, network or extensions."""

_DUCKLAKE = "ducklake_"
_CALL_HINT = " (a read-only table function is called as SELECT * FROM name(...))"


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool = False
    """More rows exist than ``max_rows``; only the first ``max_rows`` are in ``rows``."""


def check_bounds(max_rows: int, timeout_s: float) -> None:
    if max_rows < 1:
        raise ConfigError(f"--max-rows must be at least 1 (got {max_rows})")
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise ConfigError(f"--timeout must be a positive number of seconds (got {timeout_s})")


def _handle_sigint(handler: Callable[[int, Any], None]) -> Any:
    """Install ``handler`` for SIGINT (main thread only); the previous handler, or None."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, handler)


def run_bounded(
    con: duckdb.DuckDBPyConnection, query: str, *, max_rows: int, timeout_s: float
) -> QueryResult:
    """``query``'s first ``max_rows`` rows; :class:`ConfigError` (exit 2) when it errors or
    outlives ``timeout_s``; ``KeyboardInterrupt`` (no traceback at the CLI) on Ctrl-C."""
    import duckdb

    check_bounds(max_rows, timeout_s)
    stop = _Stop(con, timeout_s)
    # Ctrl-C while DuckDB runs: stop the query ourselves, then report it as an interrupt
    previous = _handle_sigint(stop.on_sigint)
    try:
        cursor = con.execute(query)
        columns = [d[0] for d in cursor.description or []]
        rows = cursor.fetchmany(max_rows + 1)
    except duckdb.InterruptException:
        if stop.interrupted.is_set() or not stop.expired.is_set():
            raise KeyboardInterrupt from None
        raise ConfigError(
            f"history sql: the query was stopped after {timeout_s:g}s (--timeout); narrow it "
            "with WHERE or LIMIT, or allow more time with --timeout SECONDS"
        ) from None
    except KeyboardInterrupt:
        con.interrupt()
        raise
    except RuntimeError as exc:  # DuckDB's answer to SIGINT: "Query interrupted"
        if "interrupted" in str(exc).lower():
            raise KeyboardInterrupt from None
        raise
    except duckdb.Error as exc:
        raise ConfigError(f"history sql: {' '.join(str(exc).split())}") from None
    finally:
        stop.finished()
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if stop.interrupted.is_set():
        raise KeyboardInterrupt
    return QueryResult(columns=columns, rows=rows[:max_rows], truncated=len(rows) > max_rows)


class _Stop:
    """Stops the statement on ``con`` at Ctrl-C or after ``timeout_s``, whichever comes first.
    DuckDB forgets an interrupt asked for before a statement starts, so from then on the
    statement is interrupted every :data:`HISTORY_SQL_INTERRUPT_EVERY_S` until it returns."""

    def __init__(self, con: duckdb.DuckDBPyConnection, timeout_s: float) -> None:
        self.con, self.timeout_s = con, timeout_s
        self.expired, self.interrupted = threading.Event(), threading.Event()
        self.stop, self.done = threading.Event(), threading.Event()
        threading.Thread(target=self._watch, name="history-sql-stop", daemon=True).start()

    def on_sigint(self, signum: int, frame: object) -> None:
        self.interrupted.set()
        self.stop.set()

    def finished(self) -> None:
        self.done.set()
        self.stop.set()

    def _watch(self) -> None:
        if not self.stop.wait(self.timeout_s):
            self.expired.set()
        while not self.done.is_set():
            self.con.interrupt()
            self.done.wait(HISTORY_SQL_INTERRUPT_EVERY_S)


def _functions(tree: object) -> Iterator[tuple[str, bool]]:
    """Every function ``tree`` (``json_serialize_sql``'s) calls, lower-cased, and whether it
    is called as a table function: all of them, however deep in CTEs and subqueries."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            function = node.get("function")
            if node.get("type") == "TABLE_FUNCTION" and isinstance(function, dict):
                yield str(function.get("function_name", "")).lower(), True
            elif node.get("class") == "FUNCTION":
                yield str(node.get("function_name", "")).lower(), False
            stack.extend(node.values())


def _refused_function(name: str, table: bool) -> bool:
    if name in READ_TABLE_FUNCTIONS:
        return False
    return table or name.startswith(_DUCKLAKE)


def _scratch() -> duckdb.DuckDBPyConnection:
    """An empty in-memory DuckDB with no file, network or extension access, to parse in:
    DuckDB runs some statements' handlers while parsing (``PRAGMA``, ``IMPORT DATABASE``)."""
    import duckdb

    return duckdb.connect(config=dict(SAFE_PARSER_CONFIG))


def check_functions(scratch: duckdb.DuckDBPyConnection, query: str) -> None:
    """:class:`ConfigError` (exit 2) when ``query`` (one SELECT) calls a table function
    outside :data:`READ_TABLE_FUNCTIONS` or a ``ducklake_*`` function that is not a read, or
    when its syntax tree cannot be checked."""
    row = scratch.execute("SELECT json_serialize_sql(?::VARCHAR)", [query]).fetchone()
    tree = json.loads(row[0]) if row else {"error": True}
    if not isinstance(tree, dict) or tree.get("error") is not False:
        raise ConfigError(
            "history sql cannot check this query for what it calls (DuckDB does not serialize "
            "it), so it was refused; write it as a plain SELECT. Nothing was run"
        )
    for name, table in _functions(tree):
        if _refused_function(name, table):
            raise ConfigError(
                f"history sql refused {name}(): a read-only query may call only the table "
                f"functions {', '.join(sorted(READ_TABLE_FUNCTIONS))} (docs/history.md). "
                "The database was not opened"
            )


def _one_statement(scratch: duckdb.DuckDBPyConnection, text: str) -> Any:
    """The one statement in ``text``, parsed by DuckDB itself, or :class:`ConfigError`."""
    import duckdb

    try:
        statements = scratch.extract_statements(text)
    except duckdb.Error as exc:
        raise ConfigError(
            f"history sql: the query does not parse: {' '.join(str(exc).split())}. Nothing was run"
        ) from None
    if len(statements) != 1:
        raise ConfigError(
            f"history sql runs exactly one SELECT (or WITH ... SELECT) statement; got "
            f"{len(statements)}. Nothing was run"
        )
    return statements[0]


def check_select(sql: str) -> str:
    """The one read-only query in ``sql``, or :class:`ConfigError` (exit 2). Checked by DuckDB
    itself, before any database is opened, so a refused statement cannot touch it."""
    import duckdb

    text = sql.strip()
    if not text:
        raise ConfigError("history sql: the query is empty")
    with _scratch() as scratch:
        statement = _one_statement(scratch, text)
        if statement.type != duckdb.StatementType.SELECT:
            kind = getattr(statement.type, "name", str(statement.type))
            raise ConfigError(
                "history sql only runs read-only queries (SELECT or WITH ... SELECT); refused "
                f"a statement of type {kind}{_CALL_HINT if kind == 'CALL' else ''}. The "
                "database was not opened"
            )
        check_functions(scratch, statement.query)
    return str(statement.query)


def run_select(
    db_path: History,
    sql: str,
    *,
    lock_timeout: float | None = None,
    max_rows: int = HISTORY_SQL_MAX_ROWS,
    timeout_s: float = HISTORY_SQL_TIMEOUT_S,
) -> QueryResult:
    """Run one checked SELECT on a read-only connection with external access disabled,
    bounded in rows and time (see :mod:`holodeck_core.history.sql`)."""
    query = check_select(sql)
    check_bounds(max_rows, timeout_s)
    from holodeck_core.history import store

    with store.reader(db_path, timeout_s=lock_timeout, safe=True) as con:
        return run_bounded(con, query, max_rows=max_rows, timeout_s=timeout_s)
