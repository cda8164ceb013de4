"""Budgets a run shares with other processes (docs/cost.md): ``holodeck.yaml``'s
``budget.daily`` and ``budget.backfill``, kept in the history backend by a :class:`BudgetPool`
(``holodeck_core.history.budget_ledger``), so two Dagster partitions running at once cannot
both spend the last dollar.

A process does not ask the pool per call: its :class:`Allowance` claims a chunk (the worst case
of ``chunk_calls`` calls) in one short transaction, reserves its calls' worst cases from that
chunk locally, claims again when a call's worst case no longer fits, and gives back what it did
not spend when the runtime closes. Every claim also books what was spent so far and renews the
holder's lease; the claim of a holder that crashed stops counting once its lease expires (what
it had booked as spent keeps counting). Claims never add up to more than the budget, so the
processes together spend at most the budget plus what their calls' estimates missed."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol, cast

from holodeck_core.models.cost import Budget, BudgetLimit, SharedScope

SHARED_LEASE_S = 600.0
"""How long a holder's claim counts without a renewal (a crashed process's claim expires)."""


@dataclass(frozen=True)
class Amount:
    """US dollars and tokens."""

    usd: float = 0.0
    tokens: int = 0

    def __add__(self, other: Amount) -> Amount:
        return Amount(self.usd + other.usd, self.tokens + other.tokens)

    def __sub__(self, other: Amount) -> Amount:
        return Amount(self.usd - other.usd, self.tokens - other.tokens)

    def times(self, factor: int) -> Amount:
        return Amount(self.usd * factor, self.tokens * factor)


NOTHING = Amount()


class PoolRefused(Exception):
    """The pool cannot give a call's worst case: the budget is (about to be) spent."""

    def __init__(self, message: str, limit: Literal["usd", "tokens"]) -> None:
        super().__init__(message)
        self.limit = limit


class BudgetPool(Protocol):
    """One shared budget in the history backend, seen by one holder (this process)."""

    scope: SharedScope
    budget: Budget

    def claim(self, spent: Amount, held: Amount, want: Amount, need: Amount) -> Amount:
        """In one transaction: book this holder's ``spent``, keep its claim at ``held`` plus
        up to ``want`` more (at least ``need``, else :class:`PoolRefused`), renew its lease;
        returns the extra granted."""
        ...


class Allowance:
    """This process's share of one pool: claimed in chunks, spent locally."""

    def __init__(self, pool: BudgetPool, chunk_calls: int, lease_s: float = SHARED_LEASE_S):
        self.pool = pool
        self.chunk_calls = max(1, chunk_calls)
        self.lease_s = lease_s
        self.claimed = NOTHING
        self.spent = NOTHING
        self.held = NOTHING
        self._renewed = 0.0
        self._lock = asyncio.Lock()

    def limit(self, which: Literal["usd", "tokens", "ledger"]) -> BudgetLimit:
        """The name a stop by this pool's ``which`` limit is recorded under."""
        return cast(BudgetLimit, f"{self.pool.scope}.{which}")

    async def take(self, worst: Amount, *, priced: bool) -> None:
        """Hold a call's ``worst`` case, claiming more from the pool when it does not fit."""
        if not priced and self.pool.budget.usd is not None:
            raise PoolRefused(
                f"the project's {self.pool.scope} budget is in USD and this call's model has "
                "no price: add it under pricing: in holodeck.yaml",
                "usd",
            )
        async with self._lock:
            free = self.claimed - self.spent - self.held
            short = Amount(max(0.0, worst.usd - free.usd), max(0, worst.tokens - free.tokens))
            stale = time.monotonic() - self._renewed > self.lease_s / 3
            if short.usd > 0 or short.tokens > 0 or stale:
                chunk = worst.times(self.chunk_calls)
                want = Amount(
                    max(short.usd, chunk.usd - max(free.usd, 0.0)),
                    max(short.tokens, chunk.tokens - max(free.tokens, 0)),
                )
                extra = await asyncio.to_thread(
                    self.pool.claim, self.spent, self.claimed, want, short
                )
                self.claimed += extra
                self._renewed = time.monotonic()
            self.held += worst

    def settle(self, worst: Amount, actual: Amount | None) -> None:
        """Release a call's hold and book what it spent (None: it failed, nothing)."""
        self.held -= worst
        if actual is not None:
            self.spent += actual

    async def aclose(self) -> None:
        """Book the spend and give back the rest of the claim."""
        async with self._lock:
            if self._renewed:
                await asyncio.to_thread(self.pool.claim, self.spent, self.spent, NOTHING, NOTHING)
                self.claimed = self.spent


def grant(
    which: Literal["usd", "tokens"],
    limit: float | None,
    used: float,
    want: float,
    need: float,
    refusal: Callable[[str, str], str],
) -> float:
    """What of ``want`` fits under ``limit`` (all of it without one), at least ``need``, else
    :class:`PoolRefused` with ``refusal(limit shown, used shown)``."""
    if limit is None:
        return want
    left = limit - used
    if need > 0 and need > left + 1e-12:
        shown = f"{limit:g} USD" if which == "usd" else f"{int(limit)} tokens"
        done = f"{used:.4f} USD" if which == "usd" else f"{int(used)} tokens"
        raise PoolRefused(refusal(shown, done), which)
    return max(0.0, min(want, left))


class ProcessBudget:
    """One budget the suites of one process share, kept in memory: ``holodeck matrix``'s
    cells under the agent's ``execution.budget`` (docs/cli.md). Each cell's runtime holds a
    :meth:`pool` of its own; their claims never add up to more than the budget."""

    def __init__(self, budget: Budget, spent: Amount = NOTHING) -> None:
        self.budget = budget
        self._claims: list[Amount] = [spent] if spent != NOTHING else []
        """Each pool's claim; ``spent``, what the cells spent in the run's earlier steps (a
        Dagster run's agent step, for its metric step), first."""
        self._lock = threading.Lock()  # claims come from worker threads (Allowance.take)

    def pool(self) -> BudgetPool:
        self._claims.append(NOTHING)
        return _ProcessHolder(self, len(self._claims) - 1, self.budget)

    def claim(self, holder: int, spent: Amount, held: Amount, want: Amount, need: Amount) -> Amount:
        with self._lock:
            others = sum((c for i, c in enumerate(self._claims) if i != holder), NOTHING)
            used = others + Amount(max(held.usd, spent.usd), max(held.tokens, spent.tokens))
            extra = Amount(
                grant("usd", self.budget.usd, used.usd, want.usd, need.usd, _over_matrix),
                int(grant("tokens", self.budget.tokens, used.tokens, want.tokens, need.tokens,
                          _over_matrix)),
            )  # fmt: skip
            self._claims[holder] = held + extra
            return extra


def _over_matrix(shown: str, done: str) -> str:
    return (
        f"the budget of {shown} over the run's cells (execution.budget, over every cell) would "
        f"be passed: the cells together spent or hold {done}; raise execution.budget, and a "
        "rerun resumes"
    )


@dataclass
class _ProcessHolder:
    """One cell's view of a :class:`ProcessBudget` (a :class:`BudgetPool`)."""

    shared: ProcessBudget
    holder: int
    budget: Budget
    scope: SharedScope = "matrix"

    def claim(self, spent: Amount, held: Amount, want: Amount, need: Amount) -> Amount:
        return self.shared.claim(self.holder, spent, held, want, need)
