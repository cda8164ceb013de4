"""``holodeck test --baseline REF``: the recorded run compared with a baseline (a run id or
prefix, or a prompt version's newest run of the agent with the same model candidate: one
configuration against another), decided as ``history compare`` and
the Dagster ``no_regression`` check decide (docs/architecture.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from holodeck_core.errors import ConfigError

if TYPE_CHECKING:
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

    with reader(history) as con:
        row = con.execute(BASELINE_RUN, [baseline, baseline, run_id]).fetchone()
        if row is not None:
            base = str(row[0])
        else:
            try:
                base = resolve_run(con, baseline)
            except ConfigError:
                raise ConfigError(
                    f"--baseline {baseline}: no run of that prompt version and no run with "
                    f"that id in {history} (a prompt version's runs count with this run's "
                    "model candidate only); `holodeck history runs` lists them"
                ) from None
        if base == run_id:
            raise ConfigError(f"--baseline {baseline} is the run just recorded: pick another")
        return compare_runs(con, base, run_id, strict=strict, alpha=alpha)
