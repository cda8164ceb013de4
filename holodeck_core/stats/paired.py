"""Paired comparison of two runs over their shared cases (DESIGN §7.8).

dᵢ = xᵢᴮ - xᵢᴬ per shared case (pass fractions, or one metric's per-case mean scores); the
mean difference, SE = sd(d)/√n, a t(n - 1) interval and the paired t-test's p-value. When
both runs made one trial per case and the outcome is pass/fail, the exact McNemar test on
the discordant pairs gives the p-value instead (the t-test is poor on 0/±1 differences of
few discordant cases). Pairing removes the case-to-case spread in difficulty, so it detects
a change with far fewer cases than comparing two independent pass rates."""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import StrEnum
from typing import Literal

from holodeck_core.defaults import ALPHA, CONFIDENCE
from holodeck_core.stats.estimates import (
    _Frozen,
    _scipy_stats,
    clustered_se,
    t_quantile,
)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """The two-sided exact McNemar p-value on the discordant pairs, in closed form: scipy's
    ``binomtest(min, only_a + only_b, 0.5)`` and the SQL macro ``holodeck_mcnemar_p``."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / (1 << n)
    return min(1.0, 2 * tail)


class Verdict(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    NO_CHANGE = "no significant change"


class PairedComparison(_Frozen):
    n: int
    mean_a: float | None
    mean_b: float | None
    mean_diff: float | None
    se: float | None
    low: float | None
    high: float | None
    p_value: float | None
    test: Literal["mcnemar_exact", "paired_t", "none"]
    alpha: float = ALPHA
    higher_is_better: bool = True
    discordant: tuple[int, int] | None = None
    """McNemar: (passed in A only, passed in B only)."""
    verdict: Verdict = Verdict.NO_CHANGE

    def render(self, *, percent: bool = True) -> str:
        def f(v: float | None, sign: str = "") -> str:
            if v is None:
                return "-"
            return f"{v:{sign}.1%}" if percent else f"{v:{sign}.4f}"

        text = f"Δ {f(self.mean_diff, '+')}"
        if self.low is not None and self.high is not None:
            text += f" (95% CI {f(self.low, '+')} to {f(self.high, '+')})"
        if self.p_value is not None:
            name = "exact McNemar" if self.test == "mcnemar_exact" else "paired t"
            text += f", p = {self.p_value:.3g} ({name}, n = {self.n})"
        return f"{text}: {self.verdict.value}"


def paired_comparison(
    a: Mapping[str, float],
    b: Mapping[str, float],
    *,
    binary: bool = False,
    alpha: float = ALPHA,
    higher_is_better: bool = True,
) -> PairedComparison:
    """B (after) against A (before) on the keys both have. ``binary``: every value is 0 or
    1 (one pass/fail trial per case), so McNemar's exact test applies."""
    keys = sorted(a.keys() & b.keys())
    n = len(keys)
    if n == 0:
        return PairedComparison(
            n=0,
            mean_a=None,
            mean_b=None,
            mean_diff=None,
            se=None,
            low=None,
            high=None,
            p_value=None,
            test="none",
            alpha=alpha,
            higher_is_better=higher_is_better,
        )
    xa = [float(a[k]) for k in keys]
    xb = [float(b[k]) for k in keys]
    d = [y - x for x, y in zip(xa, xb, strict=True)]
    mean = sum(d) / n
    se = low = high = p = None
    discordant = None
    test: Literal["mcnemar_exact", "paired_t", "none"] = "none"
    if n >= 2:
        se = clustered_se(d)
        half = t_quantile(CONFIDENCE, n - 1) * se
        low, high = mean - half, mean + half
    if binary:
        only_a = sum(1 for x, y in zip(xa, xb, strict=True) if x > y)
        only_b = sum(1 for x, y in zip(xa, xb, strict=True) if y > x)
        discordant = (only_a, only_b)
        test = "mcnemar_exact"
        p = mcnemar_exact(only_a, only_b)
    elif se is not None:
        test = "paired_t"
        # se = 0: every case moved by exactly the same amount (t is 0 or infinite)
        p = float(_scipy_stats().ttest_rel(xb, xa).pvalue) if se else float(mean == 0.0)
    verdict = Verdict.NO_CHANGE
    if p is not None and p < alpha and mean != 0.0 and not math.isnan(p):
        better = mean > 0 if higher_is_better else mean < 0
        verdict = Verdict.IMPROVEMENT if better else Verdict.REGRESSION
    return PairedComparison(
        n=n,
        mean_a=sum(xa) / n,
        mean_b=sum(xb) / n,
        mean_diff=mean,
        se=se,
        low=low,
        high=high,
        p_value=p,
        test=test,
        alpha=alpha,
        higher_is_better=higher_is_better,
        discordant=discordant,
        verdict=verdict,
    )
