"""Infrastructure failures in the history (docs/cli.md): which runs ``v_run_health`` marks, and
the refusal to let one stand as evidence in a comparison unless asked (``--include-failed``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from holodeck_core.errors import ConfigError

if TYPE_CHECKING:
    import duckdb

INCLUDE_FAILED_HELP = (
    "keep runs that are infrastructure failures (more than evaluations.max_error_share of "
    "their cases ERROR; left out by default)"
)


def failure_reason(con: duckdb.DuckDBPyConnection, run_id: str) -> str | None:
    """Why the run is an infrastructure failure, or None when it is not one."""
    row = con.execute(
        "SELECT errored, total_tests, max_error_share FROM v_run_health "
        "WHERE run_id = ? AND infrastructure_failure",
        [run_id],
    ).fetchone()
    if row is None:
        return None
    errored, total, share = row
    return (
        f"run {run_id[:12]} is an infrastructure failure: {errored} of {total} cases ERROR "
        f"(more than evaluations.max_error_share {share:g})"
    )


def refuse_failed(con: duckdb.DuckDBPyConnection, *run_ids: str) -> None:
    """A ConfigError naming the first run that is an infrastructure failure."""
    for run_id in run_ids:
        reason = failure_reason(con, run_id)
        if reason is not None:
            raise ConfigError(
                f"{reason}; it says nothing about the prompt. Compare other runs, or pass "
                "--include-failed to compare it anyway"
            )
