"""Small statistics for the dashboard: a Wilson interval and a paired comparison (DESIGN §7.8).

Written here, without scipy, for one trial per case (K = 1), the only shape the history holds
today: per-case outcomes are 0/1, the interval uses the t table of ``holodeck_t95`` and the
p-value is the exact McNemar test on the discordant pairs. The shared implementation of §7.8
replaces :func:`paired` when it lands; the views only read :class:`Paired`'s fields.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054
ALPHA = 0.05
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t95(df: int) -> float:
    """Two-sided 95% Student-t critical value (the ``holodeck_t95`` macro's table)."""
    if df < 1:
        return math.nan
    return float(_T95[df - 1]) if df <= len(_T95) else 1.96 + 2.4 / df


def wilson(passed: int, total: int) -> tuple[float, float] | None:
    """The 95% Wilson score interval of ``passed / total`` (None without cases)."""
    if total <= 0:
        return None
    p = passed / total
    denom = 1 + Z95**2 / total
    centre = (p + Z95**2 / (2 * total)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / total + Z95**2 / (4 * total**2)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / (1 << n)
    return min(1.0, 2 * tail)


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


def paired(before: Sequence[bool], after: Sequence[bool], *, alpha: float = ALPHA) -> Paired:
    """Paired pass/fail outcomes of the same cases (same order) in A and B."""
    n = len(before)
    diffs = [int(b) - int(a) for a, b in zip(before, after, strict=True)]
    fixed = sum(1 for d in diffs if d > 0)
    broken = sum(1 for d in diffs if d < 0)
    mean = sum(diffs) / n if n else 0.0
    if n > 1:
        sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
        half = t95(n - 1) * sd / math.sqrt(n)
    else:
        half = math.nan
    p_value = mcnemar_exact(fixed, broken)
    if p_value < alpha and mean < 0:
        verdict = "regression"
    elif p_value < alpha and mean > 0:
        verdict = "improvement"
    else:
        verdict = "no significant change"
    return Paired(n, mean, mean - half, mean + half, p_value, fixed, broken, verdict)
