"""What model calls cost, and the budget that stops them (docs/cost.md).

The scheduler asks the :class:`Ledger` before it sends a call that carries a :class:`Charge`:
the call's worst case (its input estimate at the input price plus its ``max_tokens`` at the
output price) is reserved, and a call whose worst case would pass the budget is not sent
(:class:`BudgetStop`); from then on no new call starts. After the call its actual usage
settles the reservation, under the case it was made for (:func:`charged_to`) and its heading.
So concurrent calls never overshoot a budget by more than what their estimates missed."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from holodeck_core.calls.errors import CallErrorKind, ModelCallError
from holodeck_core.calls.prices import PriceTable
from holodeck_core.calls.shared_budget import Allowance, Amount, PoolRefused
from holodeck_core.defaults import MAX_CHARS_PER_TOKEN
from holodeck_core.errors import HolodeckError
from holodeck_core.models import LLMProvider, TokenUsage
from holodeck_core.models.cost import (
    Budget,
    BudgetLimit,
    BudgetVerdict,
    CallCosts,
    Heading,
    HeadingCost,
)

NOT_SENT = "the call was not sent"
"""In every budget refusal's message: a case that got one (maybe through a result another
case's call shared, such as G-Eval's steps) was stopped by the budget."""
_CASE: ContextVar[str | None] = ContextVar("holodeck_charged_case", default=None)
_TALLY: ContextVar[dict[Heading, HeadingCost] | None] = ContextVar("holodeck_tally", default=None)


@contextlib.contextmanager
def charged_to(case_id: str) -> Iterator[None]:
    """Model calls made inside (and in tasks started inside) are charged to ``case_id``."""
    token = _CASE.set(case_id)
    try:
        yield
    finally:
        _CASE.reset(token)


@contextlib.contextmanager
def tallied() -> Iterator[dict[Heading, HeadingCost]]:
    """What the model calls made inside (and in tasks started inside) cost, per heading: a
    case trial's, which the resume journal keeps (docs/cost.md)."""
    tally: dict[Heading, HeadingCost] = {}
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


def estimate_tokens(*texts: str) -> int:
    """A generous estimate of a request's input tokens (one per 3 characters, plus 8 per
    message for the framing): a reservation should not come in under the bill."""
    return sum(len(text) // 3 + 8 for text in texts)


def reply_text(reply: Any) -> str:
    """What a reply said (its text, its tool calls' names and arguments): what its output
    tokens must at least cover."""
    text = getattr(reply, "text", None)
    calls = getattr(reply, "tool_calls", None)
    said = [text if isinstance(text, str) else ""]
    for call in calls if isinstance(calls, list) else []:
        said += [str(getattr(call, "name", "")), str(getattr(call, "raw_arguments", ""))]
    return "".join(said)


def reply_usage(reply: Any) -> TokenUsage:
    """The usage of a :class:`~holodeck_core.providers.messages.ModelReply`."""
    usage = getattr(reply, "usage", None)
    return usage if isinstance(usage, TokenUsage) else TokenUsage()


@dataclass(frozen=True)
class Charge:
    """What a call may cost: its heading, model, input estimate and output ceiling."""

    heading: Heading
    model: LLMProvider
    price_key: str
    """The model's provider's rows in the price table (the provider table's ``price_key``)."""
    input_tokens: int
    embedding: bool = False
    usage: Callable[[Any], TokenUsage] = reply_usage
    """Reads the actual usage off the call's value."""
    input_chars: int = 0
    """The request's characters: its input tokens must at least cover them."""
    output_text: Callable[[Any], str] = reply_text
    """Reads what the reply said off the call's value."""

    def billed(self, value: Any) -> tuple[TokenUsage, bool]:
        """The usage charged for the call's ``value``: the reported one, or, where it is below
        what the request's or the reply's characters allow (at most
        :data:`~holodeck_core.defaults.MAX_CHARS_PER_TOKEN` a token), the estimate from the
        text (the request's :attr:`input_tokens`); True when it was (docs/cost.md)."""
        usage = self.usage(value)
        prompt, completion = usage.prompt_tokens, usage.completion_tokens
        if prompt < self.input_chars // MAX_CHARS_PER_TOKEN:
            prompt = max(prompt, self.input_tokens)
        text = "" if self.embedding else self.output_text(value)
        if completion < len(text) // MAX_CHARS_PER_TOKEN:
            completion = max(completion, estimate_tokens(text))
        if (prompt, completion) == (usage.prompt_tokens, usage.completion_tokens):
            return usage, False
        update = {"prompt_tokens": prompt, "completion_tokens": completion}
        return usage.model_copy(update=update | {"total_tokens": prompt + completion}), True

    @property
    def max_output_tokens(self) -> int:
        return 0 if self.embedding else (self.model.max_tokens or 4096)


class BudgetStop(ModelCallError):
    """A call not sent: its worst case would pass the run's budget."""

    def __init__(self, message: str, limit: BudgetLimit | None) -> None:
        super().__init__(CallErrorKind.BUDGET, message)
        self.limit = limit


@dataclass
class _Hold:
    usd: float
    tokens: int
    priced: bool = True
    shared: list[Allowance] = field(default_factory=list)
    """The shared budgets that hold the call's worst case too."""

    @property
    def amount(self) -> Amount:
        return Amount(self.usd, self.tokens)


@dataclass
class Ledger:
    prices: PriceTable
    budget: Budget | None = None
    spent_usd: float = 0.0
    """What earlier stages of the same run spent (a budget covers the whole run)."""
    spent_tokens: int = 0
    held_usd: float = 0.0
    held_tokens: int = 0
    stopped_by: BudgetLimit | None = None
    refused: int = 0
    refused_cases: set[str] = field(default_factory=set)
    """Cases a call was refused for: they are ERROR (budget) whatever else they got."""
    costs: CallCosts = field(default_factory=CallCosts)
    shared: list[Allowance] = field(default_factory=list)
    """The budgets this run shares with others (``holodeck.yaml`` ``budget:``)."""
    stop_message: str | None = None

    def _usd(self, charge: Charge, usage: TokenUsage, batch: bool = False) -> float | None:
        if charge.embedding:
            rate = self.prices.embedding_price(charge.model.name, charge.price_key)
            return None if rate is None else usage.prompt_tokens * rate / self.prices.per_tokens
        return self.prices.cost_usd(charge.model.name, usage, charge.price_key, batch=batch)

    def reserve(self, charge: Charge) -> _Hold:
        """Hold the call's worst case, or refuse it (:class:`BudgetStop`)."""
        tokens = charge.input_tokens + charge.max_output_tokens
        worst = TokenUsage(
            prompt_tokens=charge.input_tokens, completion_tokens=charge.max_output_tokens
        )
        usd = self._usd(charge, worst)
        if self.stopped_by is not None:
            self._refuse(self.stop_message or self._spent(self.stopped_by), None)
        budget = self.budget
        if budget is not None:
            if budget.usd is not None and usd is None:
                self._refuse(
                    f"no price for {charge.model.provider.value} model {charge.model.name!r} "
                    f"in price table {self.prices.version}, and the run has a budget in USD: "
                    f"add its price under pricing: in holodeck.yaml ({NOT_SENT})",
                    None,
                )
            if budget.usd is not None and self.spent_usd + self.held_usd + (usd or 0) > budget.usd:
                self._refuse(self._over(budget, "usd"), "usd")
            if budget.tokens is not None and (
                self.spent_tokens + self.held_tokens + tokens > budget.tokens
            ):
                self._refuse(self._over(budget, "tokens"), "tokens")
        hold = _Hold(usd or 0.0, tokens, priced=usd is not None)
        self.held_usd += hold.usd
        self.held_tokens += hold.tokens
        return hold

    async def hold(self, charge: Charge) -> _Hold:
        """:meth:`reserve`, and the same worst case from every shared budget (claiming more
        from the history backend when this process's chunk is short)."""
        hold = self.reserve(charge)
        for allowance in self.shared:
            try:
                await allowance.take(hold.amount, priced=hold.priced)
            except PoolRefused as exc:
                self.settle(hold, charge, None)
                self.stop_message = f"{exc}: {NOT_SENT}"
                self._refuse(self.stop_message, allowance.limit(exc.limit))
            except HolodeckError as exc:  # e.g. the history stayed locked: never spend blind
                self.settle(hold, charge, None)
                scope = allowance.pool.scope
                self.stop_message = f"the {scope} budget's ledger could not be read ({exc})"
                self._refuse(f"{self.stop_message}: {NOT_SENT}", allowance.limit("ledger"))
            hold.shared.append(allowance)
        return hold

    async def aclose(self) -> None:
        """Give the shared budgets back what this process claimed and did not spend."""
        for allowance in self.shared:
            await allowance.aclose()

    def _spent(self, limit: BudgetLimit) -> str:
        if self.budget is not None and limit in ("usd", "tokens"):
            return f"the run's {_limit(self.budget, limit)} budget is spent: {NOT_SENT}"
        return f"the {limit} budget is spent: {NOT_SENT}"

    def _over(self, budget: Budget, limit: BudgetLimit) -> str:
        spent = f"{self.spent_usd:.4f} USD" if limit == "usd" else f"{self.spent_tokens} tokens"
        return (
            f"the run's {_limit(budget, limit)} budget would be passed (spent {spent}, calls in "
            f"flight hold the rest): {NOT_SENT}; a rerun with a larger budget resumes"
        )

    def _refuse(self, message: str, limit: BudgetLimit | None) -> None:
        self.refused += 1
        case_id = _CASE.get()
        if case_id is not None:
            self.refused_cases.add(case_id)
        if limit is not None and self.stopped_by is None:
            self.stopped_by = limit
            if limit in ("usd", "tokens"):
                self.stop_message = self._spent(limit)
        raise BudgetStop(message, limit)

    def settle(
        self,
        hold: _Hold,
        charge: Charge,
        usage: TokenUsage | None,
        understated: bool = False,
        *,
        batch: bool = False,
    ) -> None:
        """Release the hold and book the actual ``usage`` (None: the call failed);
        ``understated``: the usage is an estimate, the one reported being impossible;
        ``batch``: a batch answered the call, at its provider's batch prices (the hold was
        the list price's worst case)."""
        self.held_usd -= hold.usd
        self.held_tokens -= hold.tokens
        usd = None if usage is None else self._usd(charge, usage, batch)
        actual = None if usage is None else Amount(usd or 0.0, _tokens(usage))
        for allowance in hold.shared:
            allowance.settle(hold.amount, actual)
        if usage is None:
            return
        self.spent_usd += usd or 0.0
        self.spent_tokens += _tokens(usage)
        cost = HeadingCost(
            calls=1,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            usd=usd,
            unpriced_calls=1 if usd is None else 0,
            understated_calls=int(understated),
            batch_calls=1 if batch else None,
            batch_usd=usd if batch else None,
        )
        case_id = _CASE.get()
        booked = self.costs.outside if case_id is None else self.costs.cases.setdefault(case_id, {})
        before = booked.get(charge.heading)
        booked[charge.heading] = cost if before is None else before + cost
        tally = _TALLY.get()
        if tally is not None:
            tallied_before = tally.get(charge.heading)
            tally[charge.heading] = cost if tallied_before is None else tallied_before + cost

    def snapshot(self) -> CallCosts:
        """The costs booked so far, with the budget verdict."""
        verdict = None
        if self.budget is not None or self.shared or self.stopped_by is not None:
            verdict = BudgetVerdict(  # the run's own budget, if any; stopped_by names either
                usd=self.budget.usd if self.budget else None,
                tokens=self.budget.tokens if self.budget else None,
                spent_usd=self.spent_usd,
                spent_tokens=self.spent_tokens,
                stopped_by=self.stopped_by,
                refused_calls=self.refused,
            )
        # the maps are copied, not their costs: a HeadingCost is replaced, never changed in
        # place (``settle``), and a deep copy of every case's costs was ~15 µs a case
        costs = self.costs
        return costs.model_copy(
            update={
                "cases": {case: dict(headings) for case, headings in costs.cases.items()},
                "outside": dict(costs.outside),
                "resumed": dict(costs.resumed),
                "budget": verdict,
            }
        )


def _tokens(usage: TokenUsage) -> int:
    return usage.prompt_tokens + usage.completion_tokens


def _limit(budget: Budget, limit: BudgetLimit) -> str:
    return f"{budget.usd:g} USD" if limit == "usd" else f"{budget.tokens} token"
