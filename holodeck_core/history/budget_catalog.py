"""The shared budgets' ledger of a DuckLake whose catalog is in PostgreSQL (docs/cost.md): the
table ``holodeck_budget_ledger`` in the catalog's own database, written through DuckDB's
``postgres`` extension, every claim one PostgreSQL transaction that first takes
``LOCK TABLE … IN SHARE ROW EXCLUSIVE MODE``.

Why not the lake's ``budget_ledger`` with a retry on DuckLake's commit conflicts: DuckLake
merges the commits of two transactions that only insert into a table, so two holders that each
read the others' claims and then insert their own row both commit, and both spend the last
dollar (write skew); only a lock taken before the read rules that out. The lock comes first in
its transaction, and the extension runs the transaction at ``REPEATABLE READ``, whose snapshot
PostgreSQL takes at the first query after the lock: a claim sees every claim committed before
it. The lock waits at most the history's lock timeout (``HOLODECK_HISTORY_LOCK_TIMEOUT``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from holodeck_core.errors import ExecutionError
from holodeck_core.history.ducklake import DuckLake
from holodeck_core.history.extensions import extensions_connection
from holodeck_core.history.store import lock_timeout
from holodeck_core.history.tabular import literal
from holodeck_core.redaction import redact_text

if TYPE_CHECKING:
    import duckdb

CATALOG = "budget_catalog"
TABLE = "holodeck_budget_ledger"
_CREATE = """
CREATE TABLE IF NOT EXISTS holodeck_budget_ledger (
    scope VARCHAR NOT NULL, scope_key VARCHAR NOT NULL, holder VARCHAR NOT NULL, label VARCHAR,
    claimed_usd DOUBLE PRECISION NOT NULL, claimed_tokens BIGINT NOT NULL,
    spent_usd DOUBLE PRECISION NOT NULL, spent_tokens BIGINT NOT NULL,
    expires_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL,
    PRIMARY KEY (scope, scope_key, holder)
)
"""


_UPSERT = """
INSERT INTO holodeck_budget_ledger (claimed_usd, claimed_tokens, spent_usd, spent_tokens,
    expires_at, updated_at, scope, scope_key, holder, label)
VALUES ({values})
ON CONFLICT (scope, scope_key, holder) DO UPDATE SET
    claimed_usd = excluded.claimed_usd, claimed_tokens = excluded.claimed_tokens,
    spent_usd = excluded.spent_usd, spent_tokens = excluded.spent_tokens,
    expires_at = excluded.expires_at, updated_at = excluded.updated_at
"""


class LedgerTable(Protocol):
    """Where a claim reads the other holders' sums (``sql`` names the table ``{table}``)
    and writes its holder's row."""

    def read(self, sql: str, params: list[Any]) -> tuple[Any, ...] | None: ...

    def write(self, values: list[Any], label: str) -> None: ...


@dataclass(frozen=True)
class CatalogLedger:
    """The ledger in the catalog's PostgreSQL, every statement sent as PostgreSQL SQL on the
    locked transaction's connection (``postgres_query``/``postgres_execute``: no DuckDB
    catalog of the database is loaded while the lock is held)."""

    con: duckdb.DuckDBPyConnection

    def read(self, sql: str, params: list[Any]) -> tuple[Any, ...] | None:
        text = _bound(sql.format(table=TABLE), params)
        return self.con.execute(
            f"SELECT * FROM postgres_query({literal(CATALOG)}, {literal(text)})"
        ).fetchone()

    def write(self, values: list[Any], label: str) -> None:
        _execute(self.con, _UPSERT.format(values=", ".join(map(literal, [*values, label]))))


def _bound(sql: str, params: list[Any]) -> str:
    """``sql`` with each ``?`` replaced by its parameter as a literal (none is in a string)."""
    pieces = sql.split("?")
    assert len(pieces) == len(params) + 1
    return pieces[0] + "".join(
        literal(p) + rest for p, rest in zip(params, pieces[1:], strict=True)
    )


def postgres_conninfo(lake: DuckLake) -> str | None:
    """The libpq connection string of ``lake``'s PostgreSQL catalog; None for a catalog file."""
    return None if lake.local_catalog else lake.catalog.removeprefix("postgres:")


@contextmanager
def locked_ledger(lake: DuckLake, conninfo: str) -> Iterator[CatalogLedger]:
    """The ledger in one PostgreSQL transaction holding its table lock; commits when the
    block ends, rolls back on an error."""
    import duckdb

    con = extensions_connection(("postgres",))
    try:
        con.execute("SET enable_progress_bar = false")  # a claim waiting on the lock: no bar
        con.execute(f"ATTACH {literal(conninfo)} AS {CATALOG} (TYPE postgres)")
        # a table two first holders create at once: PostgreSQL may refuse the second's
        # CREATE (a unique violation in its catalog); the table is there either way
        for attempt in range(2):
            try:
                _execute(con, _CREATE)
                break
            except duckdb.Error:
                if attempt:
                    raise
        con.execute("BEGIN TRANSACTION")
        timeout_ms = int(lock_timeout() * 1000)
        _execute(
            con,
            f"SET LOCAL lock_timeout = {timeout_ms}; "
            "LOCK TABLE holodeck_budget_ledger IN SHARE ROW EXCLUSIVE MODE",
        )
        try:
            yield CatalogLedger(con)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    except duckdb.Error as exc:
        said = redact_text(" ".join(str(exc).split()))
        raise ExecutionError(
            f"cannot keep the shared budgets in {lake}'s catalog: {said}"
        ) from None
    finally:
        con.close()


def _execute(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    con.execute(f"CALL postgres_execute({literal(CATALOG)}, {literal(sql)})")
