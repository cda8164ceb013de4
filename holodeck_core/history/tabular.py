"""A history table's rows of a run as plain tuples, turned into Arrow only where Arrow pays.

pyarrow imports pandas on its first conversion from Python objects (any ``pa.array``: it asks
whether the input is a pandas object), ~0.5 s, which is most of what a one-case ``holodeck
test`` spends writing its history. So a run's rows stay tuples: a small insert binds them as
DuckDB list parameters (``unnest``; no pyarrow, no pandas), and only a bulk insert (a batch of
runs, ``history sync``/``import``) or a lake's Parquet file builds an Arrow table, typed by the
DDL (:func:`holodeck_core.history.schema.arrow_schema`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from holodeck_core.history import schema

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

PARAMETER_INSERT_MAX_VALUES = 100_000
"""Above this many values (rows times columns) an insert goes through Arrow: a bound parameter
costs ~1 us a value, Arrow ~0.2 us after the one-off pandas import (~0.5 s); 100,000 values are
a 2,000-case run with one metric."""


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


Rows = Union["pa.Table", TableRows]
"""A table's rows of one run: tuples from an EvalRun, or Arrow read from another history."""


def as_arrow(rows: Rows) -> pa.Table:
    return rows.to_arrow() if isinstance(rows, TableRows) else rows


def first_row(rows: Rows) -> dict[str, Any] | None:
    if isinstance(rows, TableRows):
        return dict(zip(rows.columns, rows.rows[0], strict=True)) if rows.rows else None
    return rows.slice(0, 1).to_pylist()[0] if rows.num_rows else None


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
            select = ", ".join(f"unnest(${i}) AS {name}" for i, name in enumerate(columns, 1))
            columnar = [list(values) for values in zip(*tuples, strict=True)]
            con.execute(sql.format(rows=f"SELECT {select}"), columnar)
            return
    import pyarrow as pa

    rows = pa.concat_tables([as_arrow(part) for part in filled])  # noqa: F841 (read by the SQL)
    # DuckDB resolves ``rows`` in the SQL to this local variable (a replacement scan)
    con.execute(sql.format(rows="SELECT * FROM rows"))
