"""Run a suite (``holodeck test``), with its estimate and the budgets it shares with other
runs; :mod:`holodeck_core.engine.record` records it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

from holodeck_core.engine.stages import preload_history
from holodeck_core.errors import HolodeckError
from holodeck_core.runner.collector import relaxed_collector

if TYPE_CHECKING:
    from holodeck_core.calls.shared_budget import BudgetPool
    from holodeck_core.config.loader import LoadedAgent
    from holodeck_core.config.project import Project
    from holodeck_core.models import EvalRun, TestCaseModel, TestResult
    from holodeck_core.models.cost import RunEstimate
    from holodeck_core.runner.options import SharedBudgetsFactory
    from holodeck_core.runner.suite import Suite


class CaseListener(Protocol):
    """Told of every finished case (``resumed``: it came from the journal)."""

    def case_done(self, result: TestResult, resumed: bool) -> None: ...


async def run_suite(
    suite: Suite, progress: Callable[[Suite], AbstractContextManager[CaseListener]]
) -> EvalRun:
    """Open the tools, run every case (``progress`` is entered once the tools' identities
    have picked the journal) and score the judge-control set; the tools are closed after."""
    try:
        if suite.project.settings.budget:  # before the shared budgets' ledger is written to
            suite.estimate()  # the history it reads; else on the preload thread
        await suite.open_tools()
        with relaxed_collector():
            with progress(suite) as listener:
                results = await suite.run_all(PreloadOnFirstCase(suite, listener).case_done)
            return suite.eval_run(results, judge_control=await suite.score_judge_control())
    finally:
        await suite.aclose()


class PreloadOnFirstCase:
    """Tells ``listener`` of each finished case and, at the first, starts the preload of the
    run's record (:func:`~holodeck_core.engine.stages.preload_history`): by then every call
    of the first round is on the wire, and the preload's imports and hashing fill the wait
    for the answers instead of holding the GIL while the first calls are sent (~0.2 s at
    2,000 cases, C = 100: docs/benchmarks.md)."""

    def __init__(self, suite: Suite, listener: CaseListener) -> None:
        self.suite, self.listener, self.started = suite, listener, False

    def case_done(self, result: TestResult, resumed: bool) -> None:
        if not self.started:
            self.started = True
            preload_history(self.suite.project, self.suite)
        self.listener.case_done(result, resumed)


def run_estimate(
    loaded: LoadedAgent,
    project: Project,
    prompt_key: str,
    body: str,
    trials: int,
    cases: list[TestCaseModel],
    batch: bool = False,
) -> RunEstimate | None:
    """The suite's :class:`~holodeck_core.runner.options.Estimator`: ``holodeck plan``'s
    estimate from the project's history (one short read; sizes when nothing is recorded).
    None when the history cannot be read (locked, unreachable): a run never waits on it."""
    from holodeck_core.engine.plan import estimate_cost
    from holodeck_core.history.backend import project_history

    try:
        history = project_history(project)
        return estimate_cost(loaded, history, prompt_key, body, trials, cases, batch).summary()
    except HolodeckError:
        return None


def shared_budgets(backfill: str | None = None) -> SharedBudgetsFactory:
    """The budgets a run shares with others (``holodeck.yaml`` ``budget:``), in the project's
    history: the day's, and ``backfill``'s when the run is part of one (Dagster's
    ``dagster/backfill`` tag)."""

    def pools(project: Project, label: str) -> list[BudgetPool]:
        from holodeck_core.history.backend import project_history
        from holodeck_core.history.budget_ledger import shared_pools

        budgets = project.settings.budget
        return list(shared_pools(project_history(project), budgets, backfill=backfill, label=label))

    return pools
