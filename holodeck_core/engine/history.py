"""The run history's use cases for ``holodeck history`` and ``holodeck labels`` (docs/cli.md,
docs/history.md): list, show and compare runs, run one read-only SELECT, sync, import, copy,
rebuild, maintain and export runs, import human labels. Each function opens the history it is
given (read-only where it only reads) and returns values; nothing here prints.

The help texts, limits and choices the command line offers are read from here when the parser
is built, so this module loads nothing heavy: DuckDB, pandas and pyarrow load inside the
functions and ``holodeck --help`` stays fast."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

# named re-exports for the commands that show the history: the help texts and limits their
# options state, the notation they print in (CSV cells safe for a spreadsheet, money, numbers)
# and, below, the types of what the functions return
from holodeck_core.history.csv_cells import csv_text as csv_text
from holodeck_core.history.health import INCLUDE_FAILED_HELP as INCLUDE_FAILED_HELP
from holodeck_core.stats.display import money as money
from holodeck_core.stats.display import number as number
from holodeck_core.stats.multiple import Adjustment

if TYPE_CHECKING:
    from holodeck_core.config.project import Location
    from holodeck_core.history.export import ExportFormat, ExportReport
    from holodeck_core.history.ingest import IngestReport
    from holodeck_core.history.labels import LabelImport
    from holodeck_core.history.queries import CaseFlip as CaseFlip
    from holodeck_core.history.queries import Comparison as Comparison
    from holodeck_core.history.queries import RunDetail as RunDetail
    from holodeck_core.history.rebuild import RebuildReport
    from holodeck_core.history.sql import QueryResult
    from holodeck_core.history.store import History

ADJUSTMENTS: tuple[str, ...] = tuple(a.value for a in Adjustment)
"""The names ``history compare --adjust`` accepts."""


@dataclass(frozen=True)
class RunList:
    """``history runs``: the runs asked for, newest first, and the orchestrated runs that
    failed before writing an EvalRun (empty unless asked for)."""

    runs: list[dict[str, Any]]
    failed: list[dict[str, Any]]
    columns: tuple[str, ...]
    """The keys of each of ``runs``, in the order a table or a CSV shows them."""


@dataclass(frozen=True)
class Copied:
    """``history sync --to/--from``: the other history and what was written."""

    other: History
    report: IngestReport


@dataclass(frozen=True)
class LabelsImported:
    """``labels import``: what was imported and each judge's agreement with people afterwards,
    as (agent slug, the agreement in words) under ``unit`` (how the agreement counts)."""

    done: LabelImport
    unit: str
    agreement: list[tuple[str, str]] = field(default_factory=list)


def list_runs(
    history: History,
    *,
    agent: str | None,
    prompt_version: str | None,
    limit: int,
    with_failed: bool,
    lock_timeout: float | None,
) -> RunList:
    """The newest ``limit`` runs of ``agent``/``prompt_version`` (any when None), and with
    ``with_failed`` the newest failed orchestrated runs of the same (a row per cell)."""
    from holodeck_core.history import queries, store

    with store.reader(history, timeout_s=lock_timeout) as con:
        runs = queries.list_runs(con, agent=agent, prompt_version=prompt_version, limit=limit)
        failed = (
            queries.list_failed_runs(con, agent=agent, prompt_version=prompt_version, limit=limit)
            if with_failed
            else []
        )
    return RunList(runs=runs, failed=failed, columns=tuple(queries.RUN_COLUMNS))


def show_run(history: History, run: str, *, lock_timeout: float | None) -> RunDetail:
    """One run (its id or a unique prefix): summary, cases, metrics, errors."""
    from holodeck_core.history import queries, store

    with store.reader(history, timeout_s=lock_timeout) as con:
        return queries.run_detail(con, queries.resolve_run(con, run))


def compare_runs(
    history: History,
    run_a: str,
    run_b: str,
    *,
    max_drop: float,
    strict: bool,
    alpha: float,
    include_failed: bool,
    adjustment: str,
    lock_timeout: float | None,
) -> Comparison:
    """Run B against run A (ids or prefixes), decided as docs/cli.md describes; ``adjustment``
    is one of :data:`ADJUSTMENTS`."""
    from holodeck_core.history import queries, store

    with store.reader(history, timeout_s=lock_timeout) as con:
        return queries.compare_runs(
            con,
            queries.resolve_run(con, run_a),
            queries.resolve_run(con, run_b),
            max_drop=max_drop,
            strict=strict,
            alpha=alpha,
            include_failed=include_failed,
            adjustment=Adjustment(adjustment),
        )


def run_query(
    history: History, query: str, *, lock_timeout: float | None, max_rows: int, timeout_s: float
) -> QueryResult:
    """One checked read-only SELECT, bounded in rows and time (docs/history.md)."""
    from holodeck_core.history.sql import run_select

    return run_select(
        history, query, lock_timeout=lock_timeout, max_rows=max_rows, timeout_s=timeout_s
    )


def results_location(value: str) -> Location:
    """A results folder or file named on the command line: a path, or a URL
    (``s3://bucket/prefix``) whose credentials are set, else a ConfigError saying which."""
    from holodeck_core.config.project import location
    from holodeck_core.config.remote import on_s3, require_s3_credentials

    if on_s3(value):
        require_s3_credentials(value)
    return location(value)


def sync_results(
    history: History,
    results_dir: Location,
    *,
    prompts_dir: Path | None,
    lock_timeout: float | None,
) -> IngestReport:
    """Every EvalRun under ``results_dir`` that ``history`` lacks, written into it."""
    from holodeck_core.history import ingest

    return ingest.sync(history, results_dir, prompts_dir=prompts_dir, lock_timeout=lock_timeout)


def import_runs(
    history: History,
    paths: Sequence[Location],
    *,
    prompts_dir: Path | None,
    lock_timeout: float | None,
) -> IngestReport:
    """HoloDeck 0.7.1 (or our) EvalRun files, and folders of them, written into ``history``."""
    from holodeck_core.history import ingest

    return ingest.ingest_paths(history, paths, prompts_dir=prompts_dir, lock_timeout=lock_timeout)


def copy_to(history: History, where: str, *, lock_timeout: float | None) -> Copied:
    """``history``'s runs that the history at ``where`` (a ``.duckdb`` file or a lake URL)
    lacks, copied into it."""
    from holodeck_core.history.backend import history_at
    from holodeck_core.history.transfer import copy_history

    other = history_at(where)
    return Copied(other, copy_history(history, other, lock_timeout=lock_timeout))


def copy_from(history: History, where: str, *, lock_timeout: float | None) -> Copied:
    """The runs of the history at ``where`` that ``history`` lacks, copied into it."""
    from holodeck_core.history.backend import history_at
    from holodeck_core.history.transfer import copy_history

    other = history_at(where)
    return Copied(other, copy_history(other, history, lock_timeout=lock_timeout))


def results_folders(given: Sequence[Location]) -> list[Location]:
    """``given``, else the folders the project's runs write their EvalRuns under."""
    if given:
        return list(given)
    from holodeck_core.config.project import Project
    from holodeck_core.history.rebuild import project_results

    return project_results(Project.discover())


def rebuild_history(
    history: History,
    folders: Sequence[Location],
    *,
    prompts_dir: Path | None,
    lock_timeout: float | None,
) -> RebuildReport:
    """``history`` rebuilt from the EvalRun files under ``folders``, the old one kept aside
    (docs/history.md)."""
    from holodeck_core.history.rebuild import rebuild

    return rebuild(history, folders, prompts_dir=prompts_dir, lock_timeout=lock_timeout)


def maintain_history(history: History, *, lock_timeout: float | None, grace_s: float) -> str:
    """``history`` compacted and cleaned (docs/history.md): what was done, in words."""
    from holodeck_core.history.backend import maintain

    return maintain(history, lock_timeout=lock_timeout, grace_s=grace_s)


def export_runs(
    history: History,
    out: Path,
    fmt: ExportFormat,
    *,
    runs: list[str] | None,
    agent: str | None,
    prompt_version: str | None,
    lock_timeout: float | None,
) -> ExportReport:
    """The selected runs written under ``out`` as HoloDeck 0.7.1 files, our EvalRun JSON or
    Parquet tables; an unknown format is a ConfigError."""
    from holodeck_core.history import export

    return export.export_runs(
        history,
        out,
        fmt,
        runs=runs,
        agent=agent,
        prompt_version=prompt_version,
        lock_timeout=lock_timeout,
    )


def import_labels(history: History, path: Path, *, labeler: str | None) -> LabelsImported:
    """A filled-in labelling sheet into ``history``'s ``human_labels``, all or none, and the
    judges' agreement with people afterwards (``v_judge_agreement``)."""
    from holodeck_core.history import labels, store

    with store.writer(history) as con:
        done = labels.import_labels(con, path, labeler=labeler)
        rows = labels.agreement(con)
    agreement = [(str(row["agent_slug"]), labels.render_agreement(row)) for row in rows]
    return LabelsImported(done=done, unit=labels.AGREEMENT_UNIT, agreement=agreement)
