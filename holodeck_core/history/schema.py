"""The history schema: tables, views and macros written once, in ``sql/*.sql`` (docs/history.md).

Analysts query these tables directly, so they are a public interface. A new history gets every
statement of :data:`SQL_FILES` in one transaction and one row in ``schema_version``; opening an
existing one reads that table once and runs no DDL. The files name the constants of
:mod:`holodeck_core.defaults` they use as ``{{ name }}``, filled by :func:`render` from
:func:`constants` only: every placeholder filled, none unknown, nothing left over.

A history written before this schema (the earlier releases' numbered migrations) is refused
with the command that rebuilds it from its EvalRun files (``holodeck history rebuild``,
:mod:`holodeck_core.history.rebuild`); one written by a newer release is refused too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from holodeck_core import defaults
from holodeck_core.errors import ConfigError, ExecutionError

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

SCHEMA_VERSION = 1
SCHEMA_DESCRIPTION = "holodeck history schema 1 (holodeck_core/history/sql)"
"""``schema_version``'s row of this schema; a history whose version-1 row says anything else
was written by the numbered migrations of an earlier release."""

SQL_FILES = (
    "tables.sql",
    "macros.sql",
    "views/runs.sql",
    "views/stats.sql",
    "views/comparisons.sql",
    "views/judges.sql",
    "views/cost.sql",
    "views/configurations.sql",
)
"""In the order they run: a view reads only what an earlier statement made."""

TABLES = (
    "eval_runs",
    "test_results",
    "metric_results",
    "tool_invocations",
    "prompt_versions",
    "case_trials",
    "judge_control_scores",
    "call_costs",
    "run_costs",
)
"""Tables that hold one run's rows, in insert order (``prompt_versions`` is upserted)."""

HISTORY_ONLY_TABLES = ("failed_runs", "human_labels", "budget_ledger")
"""Tables no EvalRun file holds: a rebuild carries their rows over."""

ABSENT_COLUMNS = {"model_candidate": f"'{defaults.OWN_MODEL_CANDIDATE}'"}
"""What a column an older history lacks reads as when its rows are carried over (a SQL
literal; any other such column reads as NULL): a run without a model candidate ran the agent's
own model."""

REBUILD_COMMAND = "holodeck history rebuild"

_PLACEHOLDER = re.compile(r"\{\{\s*([a-z][a-z0-9_]*)\s*\}\}")


class HistoryBeforeSchemaError(ConfigError):
    """A history written by the numbered migrations of an earlier release (exit 2)."""


def _number(value: float, places: int | None = None) -> str:
    """A finite number as a SQL literal (the only kind of value a placeholder takes)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    return f"{value:.{places}f}" if places is not None else repr(value)


def constants() -> dict[str, str]:
    """The values of the files' placeholders, as SQL literals."""
    return {
        "t975_rows": _number(len(defaults.T975)),
        "t975_table": "[" + ", ".join(_number(t, 6) for t in defaults.T975) + "]",
        "t975_table_3": "[" + ", ".join(_number(t, 3) for t in defaults.T975) + "]",
        "alpha": _number(defaults.ALPHA),
        "max_error_share": _number(defaults.MAX_ERROR_SHARE),
        "flaky_window": _number(defaults.HISTORY_FLAKY_WINDOW),
    }


def render(text: str, values: Mapping[str, str], source: str) -> str:
    """``text`` with each ``{{ name }}`` replaced by ``values[name]``; an unknown name, a value
    no placeholder takes, or a brace pair left over is a ValueError naming ``source``."""
    named = set(_PLACEHOLDER.findall(text))
    unknown = named - set(values)
    if unknown:
        raise ValueError(f"{source}: no value for placeholder(s) {sorted(unknown)}")
    filled = _PLACEHOLDER.sub(lambda match: values[match.group(1)], text)
    if "{{" in filled or "}}" in filled:
        raise ValueError(f"{source}: a malformed placeholder is left (write {{{{ name }}}})")
    return filled


@cache
def statements() -> tuple[str, ...]:
    """Every statement of the schema, its placeholders filled, in the order they run."""
    import duckdb

    folder = resources.files("holodeck_core.history") / "sql"
    values = constants()
    texts = {name: folder.joinpath(name).read_text(encoding="utf-8") for name in SQL_FILES}
    unused = set(values) - {n for text in texts.values() for n in _PLACEHOLDER.findall(text)}
    if unused:
        raise ValueError(f"holodeck_core/history/sql: no placeholder takes {sorted(unused)}")
    found: list[str] = []
    for name, text in texts.items():
        sql = render(text, values, f"holodeck_core/history/sql/{name}")
        found += [_without_comments(s.query) for s in duckdb.extract_statements(sql)]
    return tuple(found)


def _without_comments(statement: str) -> str:
    """A statement without the comment lines before it (so its first word is its verb)."""
    lines = statement.strip().splitlines()
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
        lines.pop(0)
    return "\n".join(lines)


def installed_version(con: duckdb.DuckDBPyConnection, db_label: str) -> int:
    """The schema version of an open history: 0 for a new (empty) database, else
    :data:`SCHEMA_VERSION`; a history from before this schema, or from a newer release, is
    refused. One query: the table is read directly, not looked up in ``information_schema``
    (on a DuckLake that listing fetches every table's statistics from the catalog), and a
    missing table is a binder error that leaves a transaction usable."""
    import duckdb

    try:
        rows = con.execute(
            "SELECT version, description FROM schema_version ORDER BY version"
        ).fetchall()
    except duckdb.CatalogException:
        return 0
    if not rows:
        return 0
    if rows[0] != (SCHEMA_VERSION, SCHEMA_DESCRIPTION):
        raise HistoryBeforeSchemaError(
            f"history {db_label} was written by an earlier release of holodeck-pipelines "
            f"(schema version {rows[-1][0]} of its numbered migrations), which this release "
            f"does not read: rebuild it from its EvalRun files with `{REBUILD_COMMAND}` (same "
            "--db/--lake), which keeps the old one aside and carries over its labels, failed "
            "runs and budget ledger (docs/history.md)"
        )
    newest = int(rows[-1][0])
    if newest > SCHEMA_VERSION:
        raise ExecutionError(
            f"history database {db_label} has schema version {newest}, newer than this "
            f"release understands ({SCHEMA_VERSION}); upgrade holodeck-pipelines to use it"
        )
    return newest


def create(
    con: duckdb.DuckDBPyConnection,
    *,
    db_label: str = "(database)",
    translate: Callable[[str], str] = str,
) -> bool:
    """Create the schema in a new database on a read-write connection, in one transaction;
    each statement goes through ``translate`` first (a backend's dialect: DuckLake's tables have
    no keys, :func:`holodeck_core.history.ducklake.lake_ddl`). False, and nothing run, when
    the schema is there already (one query)."""
    if installed_version(con, db_label):
        return False
    description = SCHEMA_DESCRIPTION.replace("'", "''")  # no bound parameter:
    con.execute("BEGIN TRANSACTION")  # DuckDB 1.5 imports pandas for one (tabular.literal)
    try:
        for statement in statements():
            con.execute(translate(statement))
        con.execute(
            "INSERT INTO schema_version (version, description) "
            f"VALUES ({SCHEMA_VERSION}, '{description}')"
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return True


@cache
def _arrow_schemas() -> dict[str, pa.Schema]:
    import duckdb

    con = duckdb.connect()
    try:
        create(con)
        tables = [
            row[0]
            for row in con.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'main' AND table_type = 'BASE TABLE'"
            ).fetchall()
        ]
        return {t: con.sql(f"SELECT * FROM {t} LIMIT 0").to_arrow_table().schema for t in tables}
    finally:
        con.close()


def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of a history table, read from the DDL (the one source of the schema:
    rows, the lake's Parquet files and their casts follow it)."""
    return _arrow_schemas()[table]
