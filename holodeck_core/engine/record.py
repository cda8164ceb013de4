"""The history write of a step's finished runs with the questions asked right after each (the
Dagster ``eval_history`` step: ingest, then the regression, drift and agreement checks)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.history import store
from holodeck_core.history.ingest import (
    PreparedRun,
    prepare_file_run,
    write_errors,
    write_prepared,
)
from holodeck_core.models import EvalRun

if TYPE_CHECKING:
    import duckdb

    from holodeck_core.config.project import Location


@dataclass(frozen=True)
class Recording:
    """The history opened once for a step's runs (a single-run backfill's prompt versions):
    each run is written in its own transaction, so a failed write rolls back that run alone
    and leaves those before it committed and whole."""

    history: store.History
    con: duckdb.DuckDBPyConnection
    prepared: Mapping[str, PreparedRun]

    @contextlib.contextmanager
    def run(self, key: str) -> Iterator[tuple[bool, duckdb.DuckDBPyConnection]]:
        """Ingest the run of ``key`` (False: its run id was already there) and the connection
        that sees it, for its checks."""
        with write_errors(self.history):
            [written] = write_prepared(self.con, [self.prepared[key]])
            yield written, self.con


@contextlib.contextmanager
def recording(
    history: store.History,
    runs: Mapping[str, tuple[EvalRun, Location | None]],
    *,
    prompts_dir: Path | None = None,
) -> Iterator[Recording]:
    """One writer for ``runs`` (by key: each run and its EvalRun file), their rows prepared
    before the history is opened; the writer is held through the block (keep it short: no
    model calls), a DuckLake's writes each committed before their checks run."""
    prepared = {
        key: prepare_file_run(run, source, prompts_dir) for key, (run, source) in runs.items()
    }
    with write_errors(history), store.writer(history) as con:
        yield Recording(history, con, prepared)
