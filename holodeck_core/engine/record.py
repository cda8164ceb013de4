"""Record finished runs, for the CLI and Dagster alike (docs/architecture.md): the EvalRun file
first (it is the source of truth), then the journal closed, then the run appended to the
history by :func:`recording`, the one history write of both (``holodeck test`` and ``holodeck
rescore`` through :func:`record_history`; the Dagster ``eval_history`` step with its checks read
on the writer's connection). What went wrong after the file was written loses nothing: it comes
back as warnings and a reason for the caller to show."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.defaults import RUN_HISTORY_LOCK_TIMEOUT_S
from holodeck_core.engine.stages import save_eval_run
from holodeck_core.errors import ConfigError, HolodeckError
from holodeck_core.runner.collector import relaxed_collector

if TYPE_CHECKING:
    import duckdb
    from upath import UPath

    from holodeck_core.config.project import Location, Project
    from holodeck_core.history import store
    from holodeck_core.history.ingest import PreparedRun
    from holodeck_core.models import EvalRun
    from holodeck_core.runner.suite import Suite

ONE_RUN = "run"


@dataclass(frozen=True)
class Recording:
    """The history opened once for finished runs (a single-run backfill's prompt versions):
    each run is written in its own transaction, so a failed write rolls back that run alone
    and leaves those before it committed and whole."""

    history: store.History
    con: duckdb.DuckDBPyConnection
    prepared: Mapping[str, PreparedRun]

    @contextlib.contextmanager
    def run(self, key: str) -> Iterator[tuple[bool, duckdb.DuckDBPyConnection]]:
        """Ingest the run of ``key`` (False: its run id was already there) and the connection
        that sees it, for its checks. A value the history refuses (beyond a column's range) is
        a :class:`~holodeck_core.errors.ConfigError` naming the run's EvalRun file."""
        from holodeck_core.history.ingest import REFUSED, refusal, write_errors, write_prepared

        prepared = self.prepared[key]
        with write_errors(self.history):
            try:
                [written] = write_prepared(self.con, [prepared])
            except REFUSED as exc:
                raise ConfigError([refusal(prepared, exc)]) from None
            yield written, self.con


@contextlib.contextmanager
def recording(
    history: store.History,
    runs: Mapping[str, tuple[EvalRun, Location | None]],
    *,
    prompts_dir: Path | None = None,
    lock_timeout: float | None = None,
) -> Iterator[Recording]:
    """One writer for ``runs`` (by key: each run and its EvalRun file), their rows prepared
    before the history is opened; the writer is held through the block (keep it short: no
    model calls), a DuckLake's writes each committed before their checks run. ``lock_timeout``
    bounds the wait for another writer of a DuckDB file (None: the default retries)."""
    from holodeck_core.history import store
    from holodeck_core.history.ingest import prepare_file_run, write_errors

    prepared = {
        key: prepare_file_run(run, source, prompts_dir) for key, (run, source) in runs.items()
    }
    with write_errors(history), store.writer(history, timeout_s=lock_timeout) as con:
        yield Recording(history, con, prepared)


def record_history(
    run: EvalRun, path: Path | UPath, project: Project, *, lock_timeout: float | None = None
) -> str | None:
    """Append the run to the project's history; the reason instead of an exception when it
    cannot be (a busy database, a refused value): the EvalRun file is safe and ``holodeck
    history sync`` ingests it later."""
    from holodeck_core.history.backend import project_history

    try:
        runs = {ONE_RUN: (run, path)}
        with (
            recording(
                project_history(project),
                runs,
                prompts_dir=project.prompts_dir,
                lock_timeout=lock_timeout,
            ) as record,
            record.run(ONE_RUN),
        ):
            pass
    except HolodeckError as exc:
        return (
            f"the run history was not updated ({exc}); the EvalRun is safe, run "
            f"`holodeck history sync {path.parent}` later"
        )
    return None


@dataclass
class RecordedRun:
    """A finished run, where its EvalRun file is, and what the caller should warn about."""

    run: EvalRun
    path: Path | UPath
    warnings: list[str] = field(default_factory=list)
    history_error: str | None = None
    """Why the history misses the run (a lock that outlived its retries, a full disk): an
    execution error (docs/cli.md, exit 3), though nothing is lost."""


def record_run(run: EvalRun, suite: Suite) -> RecordedRun:
    """Write the EvalRun (or raise :class:`~holodeck_core.errors.ExecutionError`), then close
    the journal: until the file is on disk, the journal holds the paid work. Then the
    history, whose failure loses nothing but is reported (:attr:`RecordedRun.history_error`).
    Under the run's relaxed collector (docs/benchmarks.md): the files' and the rows' many
    short-lived containers would otherwise make the collector walk the run's results again."""
    with relaxed_collector():
        recorded = RecordedRun(run, save_eval_run(run, suite))
        try:
            suite.finish()
        except OSError as exc:
            recorded.warnings.append(f"the resume journal was not closed: {exc}")
        recorded.history_error = record_history(
            run, recorded.path, suite.project, lock_timeout=RUN_HISTORY_LOCK_TIMEOUT_S
        )
    return recorded
