"""``holodeck matrix AGENT`` (docs/cli.md): every selected prompt version x model candidate of
one agent on the same cases, in one process. Each cell is a suite with its own journal (a rerun
resumes only what is unfinished), all cells meet one limit per endpoint (one
:class:`~holodeck_core.calls.scheduler.EndpointLimits`), each run is recorded as ``holodeck
test`` records it (:mod:`holodeck_core.engine.record`), and the cells come back as one
:class:`MatrixTable`: per cell its pass rate and interval, cost, latency, errors, its gate, its
paired verdict against the baseline cell and whether it ties with the best (p-values adjusted
over the cells, Benjamini-Hochberg). The CLI only renders it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.config.loader import LoadedAgent, load_agent
from holodeck_core.defaults import ALPHA, LATENCY_QUANTILES, MATRIX_CELL_SEPARATOR
from holodeck_core.engine.cells import run_cells, shared_by_cells
from holodeck_core.engine.loop import run_to_end
from holodeck_core.engine.prompts import register_prompts
from holodeck_core.engine.record import RecordedRun, record_run
from holodeck_core.engine.report import recorded_exit_code, write_summaries
from holodeck_core.engine.run import CaseListener, run_suite
from holodeck_core.engine.suite import Suite, SuiteOptions, load_suite
from holodeck_core.errors import ConfigError, ExitCode, HolodeckError
from holodeck_core.models.matrix import MatrixCell, MatrixTable
from holodeck_core.redaction import redact_text
from holodeck_core.runner.gates import check_gate
from holodeck_core.stats.multiple import ADJUSTMENT_NAMES, Adjustment
from holodeck_core.stats.paired import Verdict
from holodeck_core.terminal import one_line

if TYPE_CHECKING:
    from holodeck_core.models import EvalRun, TestResult


@dataclass(frozen=True)
class PlannedCell:
    prompt: str
    model: str
    suite: Suite

    @property
    def ref(self) -> str:
        return f"{self.prompt}{MATRIX_CELL_SEPARATOR}{self.model}"


@dataclass(frozen=True)
class MatrixPlan:
    """The cells to run (prompt-major) and the baseline cell's reference."""

    cells: list[PlannedCell]
    baseline: str


class CellProgress:
    """A cell's listener: says (``say``) what its journal resumes; the table comes at the end,
    so nothing is said per case."""

    def __init__(self, suite: Suite, say: Callable[[str], None]) -> None:
        self.suite, self.say = suite, say

    def __enter__(self) -> CellProgress:
        resumable = self.suite.resumable
        if resumable:
            cell = (
                f"{self.suite.prompt_key}{MATRIX_CELL_SEPARATOR}{self.suite.loaded.candidate.name}"
            )
            total = len(self.suite.cases) * self.suite.trials
            self.say(
                f"{one_line(cell)}: resuming {resumable} of {total} case trials from the journal"
            )
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def case_done(self, result: TestResult, resumed: bool) -> None:
        return None


def matrix_of(
    agent_file: str,
    options: SuiteOptions,
    progress: Callable[[Suite], AbstractContextManager[CaseListener]],
    *,
    prompts: list[str] | None = None,
    models: list[str] | None = None,
    baseline: str | None = None,
) -> MatrixTable:
    """The whole of ``holodeck matrix``: planned (config errors before any call), run, every
    cell recorded, the table read back."""
    plan = plan_matrix(agent_file, options, prompts=prompts, models=models, baseline=baseline)
    outcomes = run_to_end(run_matrix(plan, progress))
    return matrix_table(plan, record_matrix(plan, outcomes))


def plan_matrix(
    agent_file: str,
    options: SuiteOptions,
    *,
    prompts: list[str] | None = None,
    models: list[str] | None = None,
    baseline: str | None = None,
) -> MatrixPlan:
    """Every cell's suite, loaded before any model call (an unknown candidate, prompt version
    or baseline is a :class:`ConfigError`); the cells share ``options``, one set of endpoint
    limits, one budget and one set of batch rounds (:mod:`holodeck_core.engine.cells`)."""
    own = load_agent(agent_file)
    chosen_models = _models(own, models)
    loaded = {name: own if name == own.candidate.name else load_agent(agent_file, model=name)
              for name in chosen_models}  # fmt: skip
    active = [reg.key for _, reg in register_prompts(own)]  # registered first, as `test` does
    keys = prompts or active
    shared = shared_by_cells(own, options)
    cells = [
        PlannedCell(key, name, load_suite(loaded[name], shared, prompt_key=key))
        for key in dict.fromkeys(keys)
        for name in chosen_models
    ]
    default = own.candidate.name if own.candidate.name in chosen_models else chosen_models[0]
    base = baseline or f"{cells[0].prompt}{MATRIX_CELL_SEPARATOR}{default}"
    refs = [cell.ref for cell in cells]
    if base not in refs:
        raise ConfigError(
            f"--baseline {base!r} is not a cell of this matrix; choose one of: "
            f"{', '.join(refs)} (PROMPT{MATRIX_CELL_SEPARATOR}MODEL)",
            file=own.display,
        )
    return MatrixPlan(cells, base)


def _models(own: LoadedAgent, models: list[str] | None) -> list[str]:
    names = own.candidates.names
    unknown = [name for name in models or [] if name not in names]
    if unknown:
        where = own.candidates.where or "holodeck.yaml declares none"
        raise ConfigError(
            f"--models {', '.join(map(repr, unknown))}: not a model candidate of this agent; "
            f"choose from: {', '.join(names)} ({where})",
            file=own.display,
        )
    return list(dict.fromkeys(models or names))


async def run_matrix(
    plan: MatrixPlan, progress: Callable[[Suite], AbstractContextManager[CaseListener]]
) -> list[EvalRun | HolodeckError]:
    """Every cell at once on this loop (their calls meet at the shared endpoint limits, budget
    and batches); a cell that fails with a :class:`HolodeckError` leaves the others running."""

    async def cell(_: str, suite: Suite) -> EvalRun:
        return await run_suite(suite, progress)

    outcomes = await run_cells({c.ref: c.suite for c in plan.cells}, cell)
    return list(outcomes.values())


def record_matrix(
    plan: MatrixPlan, outcomes: list[EvalRun | HolodeckError]
) -> list[RecordedRun | HolodeckError]:
    """Each finished cell's EvalRun written and its run recorded, as ``holodeck test`` does;
    only after every cell finished, so a killed matrix keeps every cell's journal."""
    return [_record(cell, outcome) for cell, outcome in zip(plan.cells, outcomes, strict=True)]


def _record(cell: PlannedCell, outcome: EvalRun | HolodeckError) -> RecordedRun | HolodeckError:
    """One cell recorded; a cell whose EvalRun cannot be written leaves the others theirs."""
    if isinstance(outcome, HolodeckError):
        return outcome
    try:
        return record_run(outcome, cell.suite)
    except HolodeckError as exc:
        return exc


def matrix_table(plan: MatrixPlan, recorded: list[RecordedRun | HolodeckError]) -> MatrixTable:
    """The table: every cell's row, its verdict against the baseline and the ties with the
    best, read from the project's history the runs were just recorded in."""
    first = plan.cells[0].suite
    evaluations = first.loaded.agent.evaluations
    alpha = (evaluations.alpha if evaluations else None) or ALPHA
    rows = [
        _row(cell, outcome, baseline=cell.ref == plan.baseline)
        for cell, outcome in zip(plan.cells, recorded, strict=True)
    ]
    by_ref = dict(zip((c.ref for c in plan.cells), rows, strict=True))
    in_history = {ref: row for ref, row in by_ref.items() if row.run_id and row.error is None}
    unread: list[str] = []
    if in_history:
        try:
            rows = _compared(first, plan.baseline, in_history, by_ref, alpha)
        except HolodeckError as exc:  # the runs are safe; only their verdicts are missing
            unread.append(f"no verdicts: the history could not be read ({exc})")
    return MatrixTable(
        agent=first.loaded.agent.name,
        baseline=plan.baseline,
        alpha=alpha,
        adjustment=ADJUSTMENT_NAMES[Adjustment.BH],
        cells=rows,
        notes=unread,
    )


def _row(cell: PlannedCell, outcome: RecordedRun | HolodeckError, *, baseline: bool) -> MatrixCell:
    if isinstance(outcome, HolodeckError):
        code = ExitCode.CONFIG if isinstance(outcome, ConfigError) else ExitCode.EXECUTION
        return MatrixCell(
            prompt=cell.prompt, model=cell.model, baseline=baseline, exit_code=code,
            error=redact_text(str(outcome), cell.suite.loaded.secrets),
        )  # fmt: skip
    run = outcome.run
    summary = run.report.summary
    gate = cell.suite.loaded.agent.gate
    code = recorded_exit_code(outcome, cell.suite)
    failure = cell.suite.journal.failure
    estimate = summary.statistics.pass_rate if summary.statistics else None
    total = summary.cost.total_usd if summary.cost else None
    p50, p95 = _latency(run)
    return MatrixCell(
        prompt=cell.prompt,
        model=cell.model,
        run_id=run.metadata.run_id,
        eval_run=str(outcome.path),
        cases=summary.total_tests,
        passed=summary.passed,
        failed=summary.failed,
        errored=summary.errored,
        pass_rate=summary.passed / summary.total_tests if summary.total_tests else None,
        ci_low=estimate.low if estimate else None,
        ci_high=estimate.high if estimate else None,
        cost_per_case=_per(total, summary.total_tests),
        cost_per_pass=_per(total, summary.passed),
        latency_p50_ms=p50,
        latency_p95_ms=p95,
        gate=check_gate(summary, gate).line,
        exit_code=code,
        baseline=baseline,
        error=outcome.history_error,
        warnings=[*outcome.warnings, *([str(failure)] if failure is not None else [])],
    )


def _per(total: float | None, count: int) -> float | None:
    return None if total is None or not count else total / count


def _latency(run: EvalRun) -> tuple[float | None, float | None]:
    """The cases' latency quantiles, interpolated as the history's ``quantile_cont``."""
    import numpy as np

    times = [r.execution_time_ms for r in run.report.results]
    if not times:
        return None, None
    low, high = (float(q) for q in np.quantile(times, LATENCY_QUANTILES))
    return low, high


def _compared(
    suite: Suite,
    baseline: str,
    in_history: dict[str, MatrixCell],
    by_ref: dict[str, MatrixCell],
    alpha: float,
) -> list[MatrixCell]:
    """The rows with their verdicts against the baseline and the best (one family each)."""
    from holodeck_core.history.backend import project_history
    from holodeck_core.history.paired import against_one
    from holodeck_core.history.store import reader

    best_ref = max(in_history, key=lambda ref: _rank(in_history[ref]))
    updates: dict[str, dict[str, object]] = {ref: {} for ref in by_ref}
    with reader(project_history(suite.project)) as con:
        base = in_history.get(baseline)
        if base is not None:
            others = [ref for ref in in_history if ref != baseline]
            found = against_one(con, str(base.run_id), [str(in_history[r].run_id) for r in others],
                                alpha=alpha)  # fmt: skip
            for ref, comparison in zip(others, found, strict=True):
                updates[ref]["against_baseline"] = comparison
        rivals = [ref for ref in in_history if ref != best_ref]
        ties = against_one(con, str(in_history[best_ref].run_id),
                           [str(in_history[r].run_id) for r in rivals], alpha=alpha)  # fmt: skip
    for ref, comparison in zip(rivals, ties, strict=True):
        updates[ref]["tie"] = comparison.p_value is not None and (
            comparison.verdict is Verdict.NO_CHANGE
        )
    updates[best_ref] |= {"best": True, "tie": True}
    return [row.model_copy(update=updates[ref]) for ref, row in by_ref.items()]


def _rank(cell: MatrixCell) -> tuple[float, float]:
    """The best cell: the highest pass rate, the cheaper per case of equals."""
    return cell.pass_rate or 0.0, -(cell.cost_per_case or 0.0)


def table_text(table: MatrixTable) -> tuple[tuple[str, ...], list[tuple[str, ...]], list[str]]:
    """The table's columns, its rows of literal text and the lines under it, for a console."""
    from holodeck_core.reports.matrix import COLUMNS, matrix_rows, notes

    return COLUMNS, matrix_rows(table), notes(table)


def write_matrix_report(table: MatrixTable, output: Path) -> str | None:
    """``--output``: the table as Markdown (``.md``) or JSON; after every EvalRun is safe on
    disk, so a failure loses nothing and comes back as a warning."""
    from holodeck_core.reports.matrix import render_matrix_markdown

    try:
        text = (
            render_matrix_markdown(table)
            if output.suffix == ".md"
            else table.model_dump_json(indent=2)
        )
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    except Exception as exc:
        return f"the matrix report could not be written to {output}: {exc} (the runs are safe)"
    return None


def write_matrix_summary(
    table: MatrixTable, summary: Path | None, step_summary: Path | None
) -> None:
    """``--summary``: the table as Markdown for a PR comment (replaced) and appended to
    GitHub's job summary file, each when given (as ``holodeck test``'s summary)."""
    from holodeck_core.reports.matrix import render_matrix_markdown

    write_summaries(render_matrix_markdown(table), summary, step_summary)
