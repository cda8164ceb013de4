"""Money (docs/cost.md): a budget, and what a run or a case spent under each heading."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from holodeck_core.defaults import MAX_BUDGET_TOKENS, MAX_BUDGET_USD
from holodeck_core.models.base import StrictModel, omit_if_none

Heading = Literal["agent", "judge", "prompt_tool", "embedding", "reranker"]
SharedScope = Literal["daily", "backfill", "matrix"]
BudgetLimit = Literal[
    "usd",
    "tokens",
    "daily.usd",
    "daily.tokens",
    "backfill.usd",
    "backfill.tokens",
    "daily.ledger",
    "backfill.ledger",
    "matrix.usd",
    "matrix.tokens",
]
"""The limit that stopped a run: its own ``execution.budget`` (``usd``, ``tokens``), a budget it
shares with other runs in ``holodeck.yaml`` (``daily.usd`` ...), the agent's budget over every
cell of ``holodeck matrix`` (``matrix.usd``, ``matrix.tokens``), or a shared budget whose
ledger in the history could not be read (``daily.ledger``: locked, corrupt), so it could not
be checked and nothing more was sent."""
LEDGER = ".ledger"
"""The suffix of a :data:`BudgetLimit` that is an unreadable ledger, not a spent budget."""


class Budget(StrictModel):
    """``execution.budget``: a hard stop on what one run may spend."""

    usd: float | None = Field(
        None,
        gt=0.0,
        le=MAX_BUDGET_USD,
        allow_inf_nan=False,
        strict=True,
        description="US dollars, at the price table.",
    )
    tokens: int | None = Field(
        None, gt=0, le=MAX_BUDGET_TOKENS, strict=True, description="Tokens, input plus output."
    )

    @model_validator(mode="after")
    def _something(self) -> Budget:
        if self.usd is None and self.tokens is None:
            raise ValueError("set usd, tokens or both")
        return self


class SharedBudgets(StrictModel):
    """``holodeck.yaml`` ``budget:``: what all runs of the project may spend together, per UTC
    day and per Dagster backfill, kept in the history backend (docs/cost.md)."""

    daily: Budget | None = Field(None, description="All runs started on one UTC day.")
    backfill: Budget | None = Field(None, description="All runs of one Dagster backfill.")


class HeadingCost(StrictModel):
    """The model calls of one heading: how many, their tokens and their price."""

    calls: int = Field(0, ge=0)
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    usd: float | None = Field(0.0, ge=0.0, description="None: a call had no known price.")
    unpriced_calls: int = Field(0, ge=0, description="Calls of models the table lacks.")
    understated_calls: int = Field(
        0,
        ge=0,
        description="Calls whose reported usage was below what their text allows: charged at "
        "an estimate from the text.",
    )
    batch_calls: int | None = Field(
        None, ge=0, description="Of the calls, those answered by a batch (docs/cost.md)."
    )
    batch_usd: float | None = Field(
        None, ge=0.0, description="What the batched calls cost, at the batch prices (in usd)."
    )

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: HeadingCost) -> HeadingCost:
        usd = None if self.usd is None or other.usd is None else self.usd + other.usd
        return HeadingCost(
            calls=self.calls + other.calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            usd=usd,
            unpriced_calls=self.unpriced_calls + other.unpriced_calls,
            understated_calls=self.understated_calls + other.understated_calls,
            batch_calls=_plus(self.batch_calls, other.batch_calls),
            batch_usd=_plus(self.batch_usd, other.batch_usd),
        )

    @model_serializer(mode="wrap")
    def _without_batch(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A run without batches writes the shape it always had (no ``batch_*`` keys)."""
        return omit_if_none(self, handler, "batch_calls", "batch_usd")


_N = TypeVar("_N", int, float)


def _plus(left: _N | None, right: _N | None) -> _N | None:
    """The sum of two optional batch figures: None only when both are."""
    if left is None:
        return right
    return left if right is None else left + right


def total_usd(headings: Mapping[Heading, HeadingCost]) -> float | None:
    """The sum over headings; unknown when any heading's is."""
    values = [h.usd for h in headings.values()]
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def cost_per_pass(usd: float | None, passed: int | None) -> float | None:
    """A run's cost (docs/cost.md) per passing case: unknown without a known cost or a
    passing case."""
    return None if usd is None or not passed else usd / passed


class BudgetVerdict(StrictModel):
    """The budget a run ran under, what it spent and whether it stopped the run."""

    usd: float | None = None
    tokens: int | None = None
    spent_usd: float = Field(0.0, ge=0.0)
    spent_tokens: int = Field(0, ge=0)
    stopped_by: BudgetLimit | None = Field(None, description="The limit that stopped the run.")
    refused_calls: int = Field(0, ge=0, description="Calls not sent because of the budget.")


class RunEstimate(StrictModel):
    """What ``holodeck plan`` expected the run to spend, computed before its first call."""

    source: str = Field(description="``run <id>`` (measured per case) or ``sizes``.")
    calls: int = Field(0, ge=0)
    tokens: int = Field(0, ge=0)
    usd: float | None = Field(None, ge=0.0, description="None: a model has no price.")


class RunCost(StrictModel):
    """A run's spend per heading (cases and run-level calls such as index builds)."""

    price_table: str = Field(description="The price table's version.")
    prices_taken: str | None = None
    headings: dict[Heading, HeadingCost] = Field(default_factory=dict)
    outside: dict[Heading, HeadingCost] = Field(
        default_factory=dict, description="The part of it made outside any case (index builds)."
    )
    resumed: dict[Heading, HeadingCost] = Field(
        default_factory=dict,
        description="The part of it earlier attempts paid: the agent calls of the cases this "
        "run resumed from the journal (docs/cost.md).",
    )
    total_usd: float | None = Field(
        None, description="The run's cost (docs/cost.md); None when a price is unknown."
    )
    budget: BudgetVerdict | None = None
    estimate: RunEstimate | None = Field(
        None, description="The estimate before the run (None: none was made)."
    )


def _add(into: dict[Heading, HeadingCost], other: dict[Heading, HeadingCost]) -> None:
    for heading, cost in other.items():
        into[heading] = into[heading] + cost if heading in into else cost


class CallCosts(StrictModel):
    """What the call layer spent in one process: per case (and outside any case, such as
    index builds) and per heading, and the budget it kept. Stages that run apart pass it on."""

    cases: dict[str, dict[Heading, HeadingCost]] = Field(default_factory=dict)
    outside: dict[Heading, HeadingCost] = Field(default_factory=dict)
    resumed: dict[Heading, HeadingCost] = Field(
        default_factory=dict,
        description="The part of ``cases`` an earlier attempt paid (journaled cases resumed).",
    )
    budget: BudgetVerdict | None = None

    def merged(self, other: CallCosts) -> CallCosts:
        cases = {k: dict(v) for k, v in self.cases.items()}
        for case_id, headings in other.cases.items():
            _add(cases.setdefault(case_id, {}), headings)
        outside, resumed = dict(self.outside), dict(self.resumed)
        _add(outside, other.outside)
        _add(resumed, other.resumed)
        return CallCosts(
            cases=cases,
            outside=outside,
            resumed=resumed,
            budget=_later(self.budget, other.budget),
        )

    def headings(self) -> dict[Heading, HeadingCost]:
        """The whole run's spend per heading."""
        total: dict[Heading, HeadingCost] = {}
        for headings in (*self.cases.values(), self.outside):
            _add(total, headings)
        return total


def _later(a: BudgetVerdict | None, b: BudgetVerdict | None) -> BudgetVerdict | None:
    """Two stages' budget verdicts as one (``b`` started from ``a``'s spend, so its spend is
    the run's): the first stop wins, refusals add up."""
    if a is None or b is None:
        return b or a
    return b.model_copy(
        update={
            "stopped_by": a.stopped_by or b.stopped_by,
            "refused_calls": a.refused_calls + b.refused_calls,
        }
    )
