"""A history table's rows of a run as plain tuples, turned into Arrow only where Arrow pays.

pyarrow imports pandas on its first conversion from Python objects (any ``pa.array``: it asks
whether the input is a pandas object), ~0.5 s, which is most of what a one-case ``holodeck
test`` spends writing its history; DuckDB 1.5 does the same for any bound Python parameter.
So a run's rows stay tuples: a small insert writes them as SQL literals (``VALUES``; no
pyarrow, no pandas), and only a bulk insert (a batch of runs, ``history sync``/``import``)
builds an Arrow table, typed by the DDL (:func:`holodeck_core.history.schema.arrow_schema`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, Union

from holodeck_core.history import schema

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

PARAMETER_INSERT_MAX_VALUES = 100_000
"""Above this many values (rows times columns) an insert goes through Arrow: a literal costs
~1 us a value, Arrow ~0.2 us after the one-off pandas import (~0.5 s); 100,000 values are a
2,000-case run with one metric."""


def literal(value: Any) -> str:
    """``value`` as a DuckDB SQL literal: what binding it as a parameter would give, without
    the pandas import DuckDB 1.5 makes for any bound Python value. Strings are quoted by
    doubling ``'`` (DuckDB's strings have no backslash escapes), a NUL as ``chr(0)``; an aware
    datetime is written in UTC."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"'{value}'::DOUBLE"
    if isinstance(value, str):
        quoted = "'" + value.replace("'", "''") + "'"
        # a NUL ends DuckDB's SQL text: written as chr(0) between the string's pieces
        return quoted.replace("\0", "' || chr(0) || '") if "\0" in value else quoted
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(literal(item) for item in value) + "]"
    raise TypeError(f"no SQL literal for a {type(value).__name__}")


def literal_list(values: Sequence[Any]) -> str:
    """A list literal for ``list_contains(<this>, column)`` (an empty list is VARCHAR[])."""
    return literal(list(values)) if values else "[]::VARCHAR[]"


@dataclass(frozen=True)
class TableRows:
    """Rows of the history table ``name``, each a tuple in ``columns`` order."""

    name: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]

    @classmethod
    def of_dicts(cls, name: str, rows: list[dict[str, Any]]) -> TableRows:
        """Rows given as dicts with the same keys (in the same order)."""
        return cls(name, tuple(rows[0]) if rows else (), [tuple(row.values()) for row in rows])

    def __len__(self) -> int:
        return len(self.rows)

    def to_arrow(self) -> pa.Table:
        """The rows as an Arrow table typed by the DDL. A DDL column that ``columns`` lacks is
        an error here, not a silent NULL."""
        import pyarrow as pa

        target = schema.arrow_schema(self.name)
        if not self.rows:
            return target.empty_table()
        missing = [f.name for f in target if f.name not in self.columns]
        if missing:
            raise ValueError(f"{self.name}: no value built for column(s) {', '.join(missing)}")
        values = dict(zip(self.columns, zip(*self.rows, strict=True), strict=True))
        return pa.Table.from_arrays(
            [pa.array(values.get(f.name, ()), type=f.type) for f in target], schema=target
        )


def conformed(name: str, rows: pa.Table) -> pa.Table:
    """Arrow rows read from a history (this schema's columns, maybe of other types, as an
    earlier release wrote them) as the history table ``name``'s Arrow schema types them."""
    target = schema.arrow_schema(name)
    return rows.select([f.name for f in target]).cast(target)


Rows = Union["pa.Table", TableRows]
"""A table's rows of one run: tuples from an EvalRun, or Arrow read from another history."""


def as_arrow(rows: Rows) -> pa.Table:
    return rows.to_arrow() if isinstance(rows, TableRows) else rows


def first_row(rows: Rows) -> dict[str, Any] | None:
    if isinstance(rows, TableRows):
        return dict(zip(rows.columns, rows.rows[0], strict=True)) if rows.rows else None
    return rows.slice(0, 1).to_pylist()[0] if rows.num_rows else None


def values_select(columns: Sequence[str], tuples: Sequence[tuple[Any, ...]]) -> str:
    """The rows as a ``VALUES`` list of SQL literals: DuckDB parses each value as SQL."""
    values = ", ".join("(" + ", ".join(map(literal, row)) + ")" for row in tuples)
    return f"SELECT * FROM (VALUES {values}) AS rows({', '.join(columns)})"


def json_select(columns: Sequence[str], tuples: Sequence[tuple[Any, ...]]) -> str | None:
    """The rows as one JSON array of arrays in a single SQL string literal, taken apart by
    DuckDB's JSON reader: a 2,000-case run's rows in a third of the CPU :func:`values_select`
    takes (its SQL parser reads every value; docs/benchmarks.md). Each column is read as text
    (a list column as JSON) and cast to its table's type by the ``INSERT``. None when a value
    has no JSON form (a NaN or an infinity): the caller writes literals then."""
    try:
        data = json.dumps(tuples, ensure_ascii=False, allow_nan=False, default=_json_value)
    except ValueError:
        return None
    lists = {i for row in tuples for i, value in enumerate(row) if isinstance(value, list | tuple)}
    picks = ", ".join(
        f"r->{i} AS {name}" if i in lists else f"r->>{i} AS {name}"
        for i, name in enumerate(columns)
    )
    return (
        f"SELECT {picks} FROM (SELECT unnest(json_transform({literal(data)}, '[\"JSON\"]')) AS r)"
    )


def _json_value(value: Any) -> str:
    """A datetime as its literal's text (an aware one in UTC), a date as ISO."""
    if isinstance(value, datetime):
        moment: datetime = value
        if moment.tzinfo is not None:
            moment = moment.astimezone(UTC).replace(tzinfo=None)
        return moment.isoformat(sep=" ")
    if isinstance(value, date):
        day: date = value
        return day.isoformat()
    raise TypeError(f"no SQL literal for a {type(value).__name__}")


def insert(con: duckdb.DuckDBPyConnection, sql: str, parts: Sequence[Rows]) -> None:
    """Run ``sql`` (an ``INSERT ... BY NAME {rows} ...`` with ``{rows}`` where the rows are
    selected) once for all of ``parts`` (the same table's rows of several runs); nothing when
    they hold no row."""
    filled = [part for part in parts if len(part)]
    if not filled:
        return
    plain = [part for part in filled if isinstance(part, TableRows)]
    if len(plain) == len(filled) and len({part.columns for part in plain}) == 1:
        columns = plain[0].columns
        tuples = [row for part in plain for row in part.rows]
        if len(tuples) * len(columns) <= PARAMETER_INSERT_MAX_VALUES:
            select = json_select(columns, tuples) or values_select(columns, tuples)
            con.execute(sql.format(rows=select))
            return
    import pyarrow as pa

    rows = pa.concat_tables([as_arrow(part) for part in filled])  # noqa: F841 (read by the SQL)
    # DuckDB resolves ``rows`` in the SQL to this local variable (a replacement scan)
    con.execute(sql.format(rows="SELECT * FROM rows"))
