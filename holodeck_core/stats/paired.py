"""Paired comparison of two runs over their shared cases (docs/architecture.md).

dᵢ = xᵢᴮ - xᵢᴬ per shared case (pass fractions, or one metric's per-case mean scores); the
mean difference, SE = sd(d)/√n, a t(n - 1) interval and the paired t-test's p-value. When
both runs made one trial per case and the outcome is pass/fail, McNemar's test on the
discordant pairs gives the p-value instead (the t-test is poor on 0/±1 differences of few
discordant cases), in its **mid-p** version (docs/cli.md; Fagerland, Lydersen & Laake 2013):
the exact binomial p-value less half the probability of the observed count, which keeps the
exact test's validity in practice without its conservatism at few discordant pairs.
:func:`adjust_family` adjusts the p-values of several comparisons together
(:mod:`holodeck_core.stats.multiple`). Pairing removes the case-to-case spread in difficulty,
so it detects a change with far fewer cases than comparing two independent pass rates."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Literal

from holodeck_core.defaults import ALPHA, CONFIDENCE
from holodeck_core.stats.display import number, p_value, points
from holodeck_core.stats.estimates import (
    FrozenModel,
    clustered_se,
    scipy_stats,
    t_quantile,
)
from holodeck_core.stats.multiple import ADJUSTMENT_NAMES, Adjustment, adjust_pvalues


def mcnemar_midp(only_a: int, only_b: int) -> float:
    """The two-sided McNemar mid-p value on the discordant pairs, in closed form: 2·(P(X <
    b) + P(X = b)/2) for X ~ Binomial(b + c, 1/2), b = min(b, c) (the SQL macro
    ``holodeck_mcnemar_midp``)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    low = min(only_a, only_b)
    below = sum(math.comb(n, i) for i in range(low))
    return min(1.0, (2 * below + math.comb(n, low)) / (1 << n))


class Verdict(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    NO_CHANGE = "no significant change"


class PairedComparison(FrozenModel):
    n: int
    mean_a: float | None
    mean_b: float | None
    mean_diff: float | None
    se: float | None
    low: float | None
    high: float | None
    p_value: float | None
    test: Literal["mcnemar_midp", "paired_t", "none"]
    alpha: float = ALPHA
    higher_is_better: bool = True
    discordant: tuple[int, int] | None = None
    """McNemar: (passed in A only, passed in B only)."""
    p_adjusted: float | None = None
    """The p-value adjusted over the comparison's family (None: decided alone)."""
    adjustment: Adjustment = Adjustment.NONE
    family_size: int = 1
    verdict: Verdict = Verdict.NO_CHANGE

    def render(self, *, percent: bool = True, unit: str = "") -> str:
        """``Δ +32.0 pp (95% CI +12.3 to +51.7 pp), p = 0.0026 (paired t, n = 25)…``:
        ``percent``, a difference of pass fractions; else of a metric's means in ``unit``."""

        def f(v: float | None) -> str:
            if v is None:
                return "-"
            return points(v, unit=False) if percent else number(v, sign=True)

        suffix = " pp" if percent else (f" {unit}" if unit else "")
        text = f"Δ {f(self.mean_diff)}{suffix}"
        if self.low is not None and self.high is not None:
            text += f" (95% CI {f(self.low)} to {f(self.high)}{suffix})"
        if self.p_value is not None:
            name = "McNemar mid-p" if self.test == "mcnemar_midp" else "paired t"
            text += f", {p_value(self.p_value)} ({name}, n = {self.n})"
        if self.p_adjusted is not None:
            text += (
                f", {ADJUSTMENT_NAMES[self.adjustment]}-adjusted "
                f"{p_value(self.p_adjusted)} over {self.family_size} comparison(s)"
            )
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
    test: Literal["mcnemar_midp", "paired_t", "none"] = "none"
    if n >= 2:
        se = clustered_se(d)
        half = t_quantile(CONFIDENCE, n - 1) * se
        low, high = mean - half, mean + half
    if binary:
        only_a = sum(1 for x, y in zip(xa, xb, strict=True) if x > y)
        only_b = sum(1 for x, y in zip(xa, xb, strict=True) if y > x)
        discordant = (only_a, only_b)
        test = "mcnemar_midp"
        p = mcnemar_midp(only_a, only_b)
    elif se is not None:
        test = "paired_t"
        # se = 0: every case moved by exactly the same amount (t is 0 or infinite)
        p = float(scipy_stats().ttest_rel(xb, xa).pvalue) if se else float(mean == 0.0)
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
        verdict=decide(mean, p, alpha, higher_is_better),
    )


def decide(mean: float, p: float | None, alpha: float, higher_is_better: bool) -> Verdict:
    if p is None or math.isnan(p) or p >= alpha or mean == 0.0:
        return Verdict.NO_CHANGE
    better = mean > 0 if higher_is_better else mean < 0
    return Verdict.IMPROVEMENT if better else Verdict.REGRESSION


def adjust_family(
    comparisons: Sequence[PairedComparison], method: Adjustment = Adjustment.BH
) -> list[PairedComparison]:
    """The comparisons with their p-values adjusted together and their verdicts decided on
    the adjusted p (those without a p-value stay as they are and do not count)."""
    tested = [i for i, c in enumerate(comparisons) if c.p_value is not None]
    adjusted = adjust_pvalues([comparisons[i].p_value or 0.0 for i in tested], method)
    out = list(comparisons)
    for i, p in zip(tested, adjusted, strict=True):
        c = comparisons[i]
        out[i] = c.model_copy(
            update={
                "p_adjusted": p,
                "adjustment": method,
                "family_size": len(tested),
                "verdict": decide(c.mean_diff or 0.0, p, c.alpha, c.higher_is_better),
            }
        )
    return out
