"""The history write of a finished run with the questions asked right after it (the Dagster
``eval_history`` step: ingest, then the regression, drift and agreement checks)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.history import store
from holodeck_core.history.ingest import prepare_file_run, write_errors, write_prepared
from holodeck_core.models import EvalRun

if TYPE_CHECKING:
    import duckdb

    from holodeck_core.config.project import Location


@contextlib.contextmanager
def recorded(
    db_path: store.History,
    run: EvalRun,
    *,
    source_path: Location | None = None,
    prompts_dir: Path | None = None,
) -> Iterator[tuple[bool, duckdb.DuckDBPyConnection]]:
    """Ingest one run and keep a connection that sees it, for the questions asked right
    after (the Dagster step's checks): the history is opened once, its writer held through
    the block (keep it short; a DuckLake's write is committed before the block runs)."""
    prepared = prepare_file_run(run, source_path, prompts_dir)
    with write_errors(db_path), store.writer(db_path) as con:
        [written] = write_prepared(con, [prepared])
        yield written, con
