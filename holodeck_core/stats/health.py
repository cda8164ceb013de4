"""Errors apart (docs/cli.md): a run whose cases mostly ERROR measured the infrastructure,
not the prompt. It stays in the history, shown apart, and is left out of trends, baselines,
comparisons and flaky cases by default (the view ``v_run_health`` decides the same way)."""

from __future__ import annotations

from holodeck_core.defaults import MAX_ERROR_SHARE


def infrastructure_failure(errored: int, total: int, max_error_share: float | None) -> bool:
    """More than ``max_error_share`` of the run's cases are ERROR."""
    share = MAX_ERROR_SHARE if max_error_share is None else max_error_share
    return errored > share * total
