"""The dashboard's view of the shared statistics (:mod:`holodeck_core.stats`, DESIGN §7.8):
the Wilson interval of a run's pass rate and the paired comparison of two runs' pass/fail
outcomes (one trial per case: the McNemar mid-p test), in the shapes the views render."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from holodeck_core.defaults import MAX_ERROR_SHARE
from holodeck_core.stats.estimates import wilson as wilson_estimate
from holodeck_core.stats.paired import mcnemar_midp, paired_comparison

__all__ = ["INFRASTRUCTURE_ERROR_SHARE", "Paired", "mcnemar_midp", "paired", "wilson"]

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


@dataclass(frozen=True)
class Paired:
    """Run B against baseline A over their shared cases."""

    n: int
    mean_diff: float
    low: float
    high: float
    p_value: float
    fixed: int
    broken: int
    verdict: str


def paired(before: Sequence[bool], after: Sequence[bool]) -> Paired:
    """Paired pass/fail outcomes of the same cases (same order) in A and B."""
    if len(before) != len(after):
        raise ValueError("paired outcomes need the same cases in both runs")
    result = paired_comparison(
        {str(i): float(x) for i, x in enumerate(before)},
        {str(i): float(x) for i, x in enumerate(after)},
        binary=True,
    )
    broken, fixed = result.discordant or (0, 0)
    return Paired(
        n=result.n,
        mean_diff=result.mean_diff or 0.0,
        low=math.nan if result.low is None else result.low,
        high=math.nan if result.high is None else result.high,
        p_value=1.0 if result.p_value is None else result.p_value,
        fixed=fixed,
        broken=broken,
        verdict=result.verdict.value,
    )
