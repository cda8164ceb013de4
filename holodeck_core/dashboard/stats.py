"""The dashboard's view of the shared statistics (:mod:`holodeck_core.stats`): the Wilson
interval of a run's pass rate in the shape the views render. Compare's paired verdicts are
``holodeck history compare``'s (:func:`holodeck_core.history.queries.compare_runs`)."""

from __future__ import annotations

from holodeck_core.defaults import MAX_ERROR_SHARE
from holodeck_core.stats.estimates import wilson as wilson_estimate

__all__ = ["INFRASTRUCTURE_ERROR_SHARE", "wilson"]

INFRASTRUCTURE_ERROR_SHARE = MAX_ERROR_SHARE
"""DESIGN §8.7 (``evaluations.max_error_share``'s default): a run with more than this share
of its cases ERROR is an infrastructure failure (kept out of regressions; its fewer failures,
tokens and cost are no improvement)."""


def wilson(passed: int, total: int) -> tuple[float, float] | None:
    """The 95% Wilson score interval of ``passed / total`` (None without cases)."""
    if total <= 0:
        return None
    estimate = wilson_estimate(passed, total)
    return estimate.low or 0.0, estimate.high or 0.0
