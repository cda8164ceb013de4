"""The budgets runs share, kept in the history (docs/cost.md): a
:class:`~holodeck_core.calls.shared_budget.BudgetPool` over the ``budget_ledger`` table.

Every claim is one short transaction on a writer connection, which waits out another
process's lock as every history write does (``store.connect_with_retry``): it sums what the
other holders of the budget claimed (while their lease runs) or spent (once it expired), grants
this holder what fits, and writes its row. The single-writer lock of the DuckDB file, and of a
DuckLake's catalog file, makes the claims of two processes one after the other. A DuckLake
whose catalog is in PostgreSQL lets writers commit at once, so its ledger is a table of that
database, each claim under a table lock (``history/budget_catalog.py`` says why).
Plain ``UPDATE``/``INSERT``: no key or check constraint is relied on."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from holodeck_core.calls.shared_budget import SHARED_LEASE_S, Amount, grant
from holodeck_core.errors import ExecutionError
from holodeck_core.history.budget_catalog import LedgerTable, locked_ledger, postgres_conninfo
from holodeck_core.history.ducklake import DuckLake
from holodeck_core.history.store import History, writer
from holodeck_core.models.cost import Budget, SharedBudgets, SharedScope
from holodeck_core.redaction import redact_text

if TYPE_CHECKING:
    import duckdb

_OTHERS = """
SELECT
    coalesce(sum(CASE WHEN expires_at > ? THEN greatest(claimed_usd, spent_usd)
                      ELSE spent_usd END), 0) AS usd,
    CAST(coalesce(sum(CASE WHEN expires_at > ? THEN greatest(claimed_tokens, spent_tokens)
                           ELSE spent_tokens END), 0) AS BIGINT) AS tokens
FROM {table}
WHERE scope = ? AND scope_key = ? AND holder <> ?
"""
_UPDATE = """
UPDATE budget_ledger
SET claimed_usd = ?, claimed_tokens = ?, spent_usd = ?, spent_tokens = ?, expires_at = ?,
    updated_at = ?
WHERE scope = ? AND scope_key = ? AND holder = ?
"""
_INSERT = """
INSERT INTO budget_ledger (claimed_usd, claimed_tokens, spent_usd, spent_tokens, expires_at,
                           updated_at, scope, scope_key, holder, label)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""


@dataclass(frozen=True)
class _FileLedger:
    """The ledger in the history's own ``budget_ledger`` table (in the caller's transaction)."""

    con: duckdb.DuckDBPyConnection

    def read(self, sql: str, params: list[Any]) -> tuple[Any, ...] | None:
        return self.con.execute(sql.format(table="budget_ledger"), params).fetchone()

    def write(self, values: list[Any], label: str) -> None:
        updated = self.con.execute(_UPDATE, values).fetchone()
        if not updated or not updated[0]:
            self.con.execute(_INSERT, [*values, label])


@dataclass
class HistoryPool:
    """One shared budget (``scope``/``key``) in a history, for one holder."""

    path: History
    scope: SharedScope
    key: str
    budget: Budget
    label: str = ""
    lease_s: float = SHARED_LEASE_S
    holder: str = field(default_factory=lambda: uuid.uuid4().hex)

    def claim(self, spent: Amount, held: Amount, want: Amount, need: Amount) -> Amount:
        if isinstance(self.path, DuckLake) and (conninfo := postgres_conninfo(self.path)):
            with locked_ledger(self.path, conninfo) as ledger:
                return self._claim(ledger, spent, held, want, need)
        import duckdb

        try:
            with writer(self.path) as con:
                con.execute("BEGIN TRANSACTION")
                try:
                    extra = self._claim(_FileLedger(con), spent, held, want, need)
                    con.execute("COMMIT")
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
        except duckdb.Error as exc:  # e.g. its table dropped or damaged in the file
            said = redact_text(" ".join(str(exc).split()))
            raise ExecutionError(
                f"cannot read the budget_ledger table of {self.path}: {said}"
            ) from None
        return extra

    def _claim(
        self, ledger: LedgerTable, spent: Amount, held: Amount, want: Amount, need: Amount
    ) -> Amount:
        now = datetime.now(UTC).replace(tzinfo=None)
        row = ledger.read(_OTHERS, [now, now, self.scope, self.key, self.holder])
        others = Amount(float(row[0]), int(row[1])) if row else Amount()
        if not math.isfinite(others.usd) or others.usd < 0 or others.tokens < 0:
            raise ExecutionError(
                f"the budget ledger of {self.path} holds an impossible amount for "
                f"{self.describe()} ({others.usd} USD, {others.tokens} tokens): it is damaged"
            )
        mine = Amount(max(held.usd, spent.usd), max(held.tokens, spent.tokens))
        usd = self._grant("usd", self.budget.usd, others.usd + mine.usd, want.usd, need.usd)
        tokens = self._grant(
            "tokens", self.budget.tokens, others.tokens + mine.tokens, want.tokens, need.tokens
        )
        extra = Amount(usd, int(tokens))
        claimed = held + extra
        values = [
            claimed.usd,
            claimed.tokens,
            spent.usd,
            spent.tokens,
            now + timedelta(seconds=self.lease_s),
            now,
            self.scope,
            self.key,
            self.holder,
        ]
        ledger.write(values, self.label)
        return extra

    def _grant(
        self,
        which: Literal["usd", "tokens"],
        limit: float | None,
        used: float,
        want: float,
        need: float,
    ) -> float:
        """What of ``want`` fits under ``limit`` (all of it without one); at least ``need``."""
        return grant(
            which,
            limit,
            used,
            want,
            need,
            lambda shown, done: (
                f"the project's {self.scope} budget of {shown} ({self.describe()}) would be "
                f"passed: all runs together spent or hold {done}; raise budget.{self.scope}."
                f"{which} in holodeck.yaml, and a rerun resumes"
            ),
        )

    def describe(self) -> str:
        return f"UTC day {self.key}" if self.scope == "daily" else f"backfill {self.key}"


def shared_pools(
    history: History,
    budgets: SharedBudgets | None,
    *,
    backfill: str | None,
    label: str = "",
    today: str | None = None,
) -> list[HistoryPool]:
    """The pools a run draws from: the day's (``today``, default the UTC date now) when
    ``budget.daily`` is set, its backfill's when it runs in one and ``budget.backfill`` is
    set."""
    if budgets is None:
        return []
    wanted: list[tuple[SharedScope, str, Budget]] = []
    if budgets.daily is not None:
        wanted.append(("daily", today or datetime.now(UTC).date().isoformat(), budgets.daily))
    if budgets.backfill is not None and backfill:
        wanted.append(("backfill", backfill, budgets.backfill))
    return [HistoryPool(history, scope, key, budget, label=label) for scope, key, budget in wanted]
