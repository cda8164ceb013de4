"""The cells of one run together (docs/cli.md ``holodeck matrix``, docs/dagster.md a
backfill's run): every cell (prompt version x model candidate) of one agent is its own suite
with its own journal, but they share one limit per endpoint
(:class:`~holodeck_core.calls.scheduler.EndpointLimits`), one budget over the run (the agent's
``execution.budget``, beside the project's shared budgets) and one set of batch rounds (their
requests to one batch API go in one batch, docs/cost.md), and their stages run at once on one
event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from holodeck_core.calls.batch import BatchRounds
from holodeck_core.calls.scheduler import EndpointLimits
from holodeck_core.calls.shared_budget import NOTHING, Amount, BudgetPool, ProcessBudget
from holodeck_core.errors import HolodeckError
from holodeck_core.runner.runtime import batch_max_wait

if TYPE_CHECKING:
    from holodeck_core.config.loader import LoadedAgent
    from holodeck_core.config.project import Project
    from holodeck_core.models.cost import CallCosts
    from holodeck_core.runner.options import SharedBudgetsFactory, SuiteOptions
    from holodeck_core.runner.suite import Suite

_T = TypeVar("_T")


def shared_by_cells(
    own: LoadedAgent, options: SuiteOptions, spent: Sequence[CallCosts] = ()
) -> SuiteOptions:
    """``options`` for every cell of one run of the agent ``own``: one set of endpoint
    limits, one budget over the cells (less what they ``spent`` in the run's earlier steps),
    one set of batch rounds (those ``options`` already hold are kept)."""
    return replace(
        options,
        endpoint_limits=options.endpoint_limits or EndpointLimits(),
        shared_budgets=one_budget(own, options.shared_budgets, spent_of(spent)),
        batch_rounds=options.batch_rounds
        or BatchRounds(max_wait=batch_max_wait(own), on_progress=options.on_batch),
    )


def one_budget(
    own: LoadedAgent, shared: SharedBudgetsFactory | None, spent: Amount = NOTHING
) -> SharedBudgetsFactory | None:
    """The budgets every cell draws from: the project's (``shared``) and the agent's
    ``execution.budget`` over all the run's cells, one :class:`ProcessBudget` whose pool each
    cell's runtime holds (the cell's own run keeps the same budget as its own limit)."""
    execution = own.agent.execution
    if execution is None or execution.budget is None:
        return shared
    cells = ProcessBudget(execution.budget, spent)

    def pools(project: Project, label: str) -> list[BudgetPool]:
        return [*(shared(project, label) if shared else []), cells.pool()]

    return pools


def spent_of(costs: Sequence[CallCosts]) -> Amount:
    """What the cells' earlier steps spent against their budgets, together."""
    verdicts = [c.budget for c in costs if c.budget is not None]
    return Amount(sum(v.spent_usd for v in verdicts), sum(v.spent_tokens for v in verdicts))


async def run_cells(
    suites: Mapping[str, Suite], stage: Callable[[str, Suite], Awaitable[_T]]
) -> dict[str, _T | HolodeckError]:
    """``stage`` of every cell at once on this loop (their calls meet at the shared limits,
    budget and batches); a cell that fails with a :class:`HolodeckError` leaves the others
    running and comes back as its outcome. The shared batch rounds are closed once every cell
    is done (or the run is cancelled: what still runs is cancelled at the provider)."""
    try:
        outcomes = await asyncio.gather(
            *(stage(key, suite) for key, suite in suites.items()), return_exceptions=True
        )
    finally:
        rounds = {id(r): r for s in suites.values() if (r := s.options.batch_rounds) is not None}
        for shared in rounds.values():
            await shared.aclose()
    done: dict[str, _T | HolodeckError] = {}
    for key, outcome in zip(suites, outcomes, strict=True):
        if isinstance(outcome, BaseException) and not isinstance(outcome, HolodeckError):
            raise outcome
        done[key] = outcome
    return done
