"""The four stages as functions of the domain, for pipelines that run them as separate steps
(the Dagster assets): files → agent responses → metric results → report. Their outputs are
pydantic models, so any step can persist them as readable JSON and another process can load
them."""

from __future__ import annotations

import contextlib
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from holodeck_core.errors import ExecutionError, HolodeckError
from holodeck_core.files import aprocess_files
from holodeck_core.models import EvalRun, JudgeControlScore, ProcessedFileInput, TestResult
from holodeck_core.models.base import StrictModel
from holodeck_core.models.cost import CallCosts
from holodeck_core.reports import write_eval_run
from holodeck_core.runner.case_run import CaseRun
from holodeck_core.runner.execute import now_iso
from holodeck_core.runner.suite import Suite

if TYPE_CHECKING:
    from upath import UPath

    from holodeck_core.config.project import Project


class ProcessedFiles(StrictModel):
    """Every case's attachments, converted (and cached for the later stages)."""

    files: dict[str, list[ProcessedFileInput]] = Field(default_factory=dict)

    @property
    def errors(self) -> dict[str, list[str]]:
        return {
            case_id: [f"{f.original.path or f.original.url}: {f.error}" for f in items if f.error]
            for case_id, items in self.files.items()
            if any(f.error for f in items)
        }

    @property
    def count(self) -> int:
        return sum(len(items) for items in self.files.values())


class AgentResponses(StrictModel):
    started_at: str
    runs: list[CaseRun]
    scheduler: dict[str, object] = Field(default_factory=dict)
    journal_key: str | None = Field(
        None, description="The journal the agent stage wrote (tool identities scope it)."
    )
    costs: CallCosts = Field(default_factory=CallCosts, description="What the stage spent.")

    @property
    def transient_failures(self) -> list[str]:
        return [run.case_id for run in self.runs if run.transient]


class MetricResults(StrictModel):
    results: list[TestResult]
    judge_transient_failures: int = Field(
        0, ge=0, description="Judge calls that failed transiently after retries (not cached)."
    )
    judges: dict[str, Any] = Field(
        default_factory=dict, description="Judge prompt versions and fingerprints seen."
    )
    judge_control: list[JudgeControlScore] | None = None
    costs: CallCosts = Field(
        default_factory=CallCosts, description="The whole run's spend up to this stage."
    )


class RunReport(StrictModel):
    """The finished run and where its EvalRun file is."""

    path: str
    eval_run: EvalRun


async def process_suite_files(suite: Suite) -> ProcessedFiles:
    """Convert every attachment once; the content-addressed cache makes later stages and
    other partitions reuse the conversions for free. Opens no runtime."""
    out = ProcessedFiles()
    for case in suite.cases:
        files = [*(case.files or []), *(f for t in case.turns or [] for f in t.files or [])]
        if files:
            out.files[case.id or ""] = await aprocess_files(
                files,
                base_dir=suite.loaded.base_dir,
                cache_dir=suite.file_cache_dir,
                **suite.file_limits.model_dump(),
            )
    return out


async def run_agent_stage(suite: Suite) -> AgentResponses:
    """Run the agent on every case. Finished cases are journaled as they complete; the
    journal stays open until :func:`write_report` has the EvalRun on disk, so any rerun
    before that (a failed judge step, a crash) resumes instead of paying again."""
    started_at = now_iso()
    try:
        runs = await suite.execute_all()
        scheduler = suite.scheduler_stats()
    finally:
        await suite.aclose()
    return AgentResponses(
        started_at=started_at,
        runs=runs,
        scheduler=scheduler,
        journal_key=suite.journal_key,
        costs=suite.costs(),
    )


async def run_metric_stage(suite: Suite, responses: AgentResponses) -> MetricResults:
    suite.costs_before = responses.costs  # one budget for the whole run
    try:
        results = await suite.evaluate_all(responses.runs)
        transient = suite.runtime.judges.stats.transient_failures
        judges = suite.judge_provenance()
        control = await suite.score_judge_control()
    finally:
        await suite.aclose()
    return MetricResults(
        results=results,
        judge_transient_failures=transient,
        judges=judges,
        judge_control=control,
        costs=responses.costs.merged(suite.costs()),
    )


def write_report(suite: Suite, responses: AgentResponses, metrics: MetricResults) -> RunReport:
    """Assemble the EvalRun and write its file (always, before anything else may fail);
    opens no runtime: what the model stages saw comes with their outputs."""
    started = datetime.fromisoformat(responses.started_at.replace("Z", "+00:00"))
    wall_ms = int((datetime.now(UTC) - started).total_seconds() * 1000)
    run = suite.eval_run(
        metrics.results,
        runs=responses.runs,
        started_at=responses.started_at,
        wall_ms=wall_ms,
        scheduler=responses.scheduler,
        judges=metrics.judges,
        judge_control=metrics.judge_control,
        costs=metrics.costs,
    )
    path = save_eval_run(run, suite)
    suite.finish(responses.journal_key)
    return RunReport(path=str(path), eval_run=run)


def save_eval_run(run: EvalRun, suite: Suite) -> Path | UPath:
    """The EvalRun file, or an :class:`ExecutionError` (exit 3) saying why not (a full or
    read-only disk, object storage unreachable; exit 2 for its credentials) and that the
    journal still holds every finished case."""
    kept = (
        f"the finished cases are journaled in {suite.journal.path}, so the same command "
        "resumes them without calling the model again"
        if suite.journal.failure is None
        else suite.journal.failure
    )
    try:
        return write_eval_run(run, suite.loaded.file)
    except HolodeckError as exc:  # object storage: no credentials, refused, unreachable
        raise type(exc)(f"the EvalRun could not be written: {exc}. {kept}") from None
    except OSError as exc:
        where = exc.filename or suite.loaded.file.parent / "results"
        raise ExecutionError(
            f"the EvalRun could not be written to {where}: {exc.strerror or exc}. Free space "
            f"or make the folder writable and rerun: {kept}"
        ) from None


def preload_history(project: Project | None = None, suite: Suite | None = None) -> None:
    """Import the history writer (duckdb, ~0.15 s) on a daemon thread while the suite waits
    on model calls, instead of after it, and build a new history file's schema for
    ``project`` there (``history/store.py`` ``prebuild``: linked into place only when the run
    is recorded); ``suite``'s EvalRun identity, agent config in HoloDeck's shape and estimate
    are worked out there too. Call it once the first calls are sent (``engine/run.py``: at
    the first finished case), never before: a concurrent import would delay them. Nothing heavier: a
    run's rows reach DuckDB without pyarrow or pandas (``history/tabular.py``), a one-trial
    run's intervals need no scipy, and an import holds the GIL the event loop needs."""
    threading.Thread(
        target=_prepare_record, args=(project, suite), name="holodeck-preload", daemon=True
    ).start()


def _prepare_record(project: Project | None, suite: Suite | None) -> None:
    if suite is not None:
        from holodeck_core.history.holodeck_export import holodeck_agent_config

        # a head start only: what fails here fails again, and is reported, when the EvalRun
        # is built after the last case
        with contextlib.suppress(Exception):
            suite.identity()
            holodeck_agent_config(suite.loaded.agent)
            suite.estimate()
    import holodeck_core.history.ingest  # noqa: F401

    if project is None:
        return
    from holodeck_core.history.backend import project_history
    from holodeck_core.history.store import prebuild

    try:
        prebuild(project_history(project))
    except HolodeckError:  # a malformed lake URL: the history write says so
        return
