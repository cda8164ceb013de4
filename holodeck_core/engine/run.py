"""Run a suite and record it: the EvalRun file first (it is the source of truth), then the
journal closed, then the run appended to the history. What went wrong on the way that lost
nothing comes back as warnings for the caller to show."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from holodeck_core.engine.stages import preload_history, save_eval_run
from holodeck_core.errors import HolodeckError
from holodeck_core.runner.collector import relaxed_collector

if TYPE_CHECKING:
    from upath import UPath

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


@dataclass
class RecordedRun:
    """A finished run, where its EvalRun file is, and what the caller should warn about."""

    run: EvalRun
    path: Path | UPath
    warnings: list[str] = field(default_factory=list)
    history_error: str | None = None
    """Why the history misses the run (a lock that outlived its retries, a full disk): an
    execution error (docs/cli.md, exit 3), though nothing is lost."""


async def run_suite(
    suite: Suite, progress: Callable[[Suite], AbstractContextManager[CaseListener]]
) -> EvalRun:
    """Open the tools, run every case (``progress`` is entered once the tools' identities
    have picked the journal) and score the judge-control set; the tools are closed after."""
    try:
        suite.estimate()  # before any call: index builds are calls too
        await suite.open_tools()
        # only now, with the SDKs imported: a concurrent import would delay the first call
        preload_history()
        with relaxed_collector():
            with progress(suite) as listener:
                results = await suite.run_all(listener.case_done)
            return suite.eval_run(results, judge_control=await suite.score_judge_control())
    finally:
        await suite.aclose()


def record_run(run: EvalRun, suite: Suite) -> RecordedRun:
    """Write the EvalRun (or raise :class:`~holodeck_core.errors.ExecutionError`), then close
    the journal: until the file is on disk, the journal holds the paid work. Then the
    history, whose failure loses nothing but is reported (:attr:`RecordedRun.history_error`)."""
    recorded = RecordedRun(run, save_eval_run(run, suite))
    try:
        suite.finish()
    except OSError as exc:
        recorded.warnings.append(f"the resume journal was not closed: {exc}")
    recorded.history_error = record_history(run, recorded.path, suite.project, lock_timeout=5)
    return recorded


def record_history(
    run: EvalRun, path: Path | UPath, project: Project, *, lock_timeout: float | None = None
) -> str | None:
    """Append the run to the project's history; the reason instead of an exception when it
    cannot be (a busy database): the EvalRun file is safe and ``holodeck history sync`` ingests
    it later."""
    from holodeck_core.history.backend import project_history
    from holodeck_core.history.ingest import ingest_run

    try:
        ingest_run(
            project_history(project),
            run,
            source_path=path,
            prompts_dir=project.prompts_dir,
            lock_timeout=lock_timeout,
        )
    except HolodeckError as exc:
        return (
            f"the run history was not updated ({exc}); the EvalRun is safe, run "
            f"`holodeck history sync {path.parent}` later"
        )
    return None


def run_estimate(
    loaded: LoadedAgent,
    project: Project,
    prompt_key: str,
    body: str,
    trials: int,
    cases: list[TestCaseModel],
) -> RunEstimate | None:
    """The suite's :class:`~holodeck_core.runner.options.Estimator`: ``holodeck plan``'s
    estimate from the project's history (one short read; sizes when nothing is recorded).
    None when the history cannot be read (locked, unreachable): a run never waits on it."""
    from holodeck_core.engine.plan import estimate_cost
    from holodeck_core.history.backend import project_history

    try:
        history = project_history(project)
        return estimate_cost(loaded, history, prompt_key, body, trials, cases).summary()
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
