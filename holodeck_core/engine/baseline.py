"""``holodeck test --baseline REF``: the recorded run compared with a baseline (a run id or
prefix, or a prompt version's newest run of the agent with the same model candidate, or with
the candidate named as ``VERSION:MODEL``: one configuration against another), decided as
``history compare`` and the Dagster ``no_regression`` check decide (docs/cli.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from holodeck_core.defaults import MATRIX_CELL_SEPARATOR
from holodeck_core.errors import ConfigError

if TYPE_CHECKING:
    import duckdb

    from holodeck_core.config.project import Project
    from holodeck_core.history.queries import Comparison
    from holodeck_core.history.store import History


def compare_with_baseline(
    project: Project, run_id: str, baseline: str, *, strict: bool, alpha: float
) -> Comparison:
    """``run_id`` (B) against the baseline (A) in the project's history. A prompt version wins
    over a run prefix that happens to read the same; a baseline with no run is a ConfigError
    saying what exists."""
    from holodeck_core.history.backend import project_history

    return baseline_comparison(
        project_history(project), run_id, baseline, strict=strict, alpha=alpha
    )


def baseline_comparison(
    history: History, run_id: str, baseline: str, *, strict: bool, alpha: float
) -> Comparison:
    """:func:`compare_with_baseline` in ``history``."""
    from holodeck_core.history.queries import compare_runs, resolve_run
    from holodeck_core.history.regression import BASELINE_RUN
    from holodeck_core.history.store import reader

    version, _, named = baseline.partition(MATRIX_CELL_SEPARATOR)
    with reader(history) as con:
        row = con.execute(BASELINE_RUN, [version, version, named or None, run_id]).fetchone()
        if row is not None:
            base = str(row[0])
        else:
            try:
                base = resolve_run(con, baseline)
            except ConfigError:
                raise ConfigError(
                    f"--baseline {baseline}: no run of prompt version {version!r} with "
                    f"{_candidate(con, named, run_id)} and no run with that id in {history}; "
                    "`holodeck history runs` lists them (`--baseline VERSION:MODEL` or a run "
                    "id names another candidate's run)"
                ) from None
        if base == run_id:
            raise ConfigError(f"--baseline {baseline} is the run just recorded: pick another")
        return compare_runs(con, base, run_id, strict=strict, alpha=alpha)


def _candidate(con: duckdb.DuckDBPyConnection, named: str, run_id: str) -> str:
    """The model candidate a baseline was looked for with, in words."""
    if named:
        return f"model candidate {named!r}"
    row = con.execute("SELECT model_candidate FROM eval_runs WHERE run_id = ?", [run_id])
    (own,) = row.fetchone() or ("?",)
    return f"this run's model candidate {own!r}"
