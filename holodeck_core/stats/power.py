"""How many cases and trials detect a drop of a given size (``holodeck plan --detect``).

From one run's per-case pass fractions: the within-case (trial-to-trial) variance of a
case's outcome, w = mean of xᵢ(1 - xᵢ)·K/(K - 1) (unbiased for pᵢ(1 - pᵢ)). Two runs of the
same cases differ per case by dᵢ whose variance under no change is 2w/K' with K' trials
each; the paired t-test at alpha (two-sided) then needs the smallest n with
P(T < -t(1 - alpha/2, n - 1)) ≥ power, T noncentral t(n - 1, -δ√n/sd_d)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from holodeck_core.defaults import ALPHA
from holodeck_core.stats.estimates import _Frozen, _scipy_stats

POWER = 0.8
TRIAL_OPTIONS = (1, 3, 5, 10)
MAX_CASES = 1_000_000


class PowerRow(_Frozen):
    trials: int
    sd_diff: float
    cases_needed: int | None
    power_now: float | None = None
    """The power with the run's own number of cases."""


class PowerPlan(_Frozen):
    detect: float
    alpha: float
    power: float
    cases: int
    trials: int
    pass_rate: float
    within_case_variance: float
    rows: list[PowerRow]
    assumptions: list[str]


def paired_power(n: int, sd_diff: float, detect: float, alpha: float = ALPHA) -> float:
    """Power of the two-sided paired t-test with n cases to see a drop of ``detect``."""
    if n < 2:
        return 0.0
    if sd_diff == 0.0:
        return 1.0
    df = n - 1
    critical = float(_scipy_stats().t.ppf(1 - alpha / 2, df))
    return float(_scipy_stats().nct.cdf(-critical, df, -detect * math.sqrt(n) / sd_diff))


def cases_needed(sd_diff: float, detect: float, alpha: float, power: float) -> int | None:
    """The smallest n reaching ``power`` (None beyond :data:`MAX_CASES`)."""
    if sd_diff == 0.0:
        return 2
    z = float(_scipy_stats().norm.ppf(1 - alpha / 2) + _scipy_stats().norm.ppf(power))
    n = max(2, math.ceil((z * sd_diff / detect) ** 2))  # the normal approximation: a start
    while n <= MAX_CASES and paired_power(n, sd_diff, detect, alpha) < power:
        n += max(1, n // 100)
    while n > 2 and paired_power(n - 1, sd_diff, detect, alpha) >= power:
        n -= 1
    return n if n <= MAX_CASES else None


def plan_power(
    pass_fractions: Sequence[float],
    trials: int,
    detect: float,
    *,
    alpha: float = ALPHA,
    power: float = POWER,
    trial_options: Sequence[int] = TRIAL_OPTIONS,
) -> PowerPlan:
    if not 0 < detect < 1:
        raise ValueError("the drop to detect is a fraction between 0 and 1 (0.05 = 5 points)")
    n = len(pass_fractions)
    p = sum(pass_fractions) / n if n else 0.0
    if trials > 1:
        w = sum(x * (1 - x) for x in pass_fractions) / n * trials / (trials - 1) if n else 0.0
        source = (
            f"the within-case variance w = {w:.4f} is measured from the trials of the run's "
            f"{n} cases (K = {trials})"
        )
    else:
        w = p * (1 - p)
        source = (
            f"with one trial per case the within-case variance cannot be measured: w = "
            f"p(1 - p) = {w:.4f} at the observed pass rate {p:.1%} is assumed (the worst "
            "case: every case behaves like a coin of that bias; run with --trials 3+ and "
            "plan again for a sharper answer)"
        )
    rows = []
    for k in sorted({*trial_options, trials}):
        sd = math.sqrt(2 * w / k)
        rows.append(
            PowerRow(
                trials=k,
                sd_diff=sd,
                cases_needed=cases_needed(sd, detect, alpha, power),
                power_now=paired_power(n, sd, detect, alpha) if n else None,
            )
        )
    return PowerPlan(
        detect=detect,
        alpha=alpha,
        power=power,
        cases=n,
        trials=trials,
        pass_rate=p,
        within_case_variance=w,
        rows=rows,
        assumptions=[
            "the comparison is paired: both runs evaluate the same cases (history compare)",
            source,
            "the cases' difficulties stay as observed; a change shifts every case alike",
            f"the paired t-test, two-sided at alpha = {alpha}, must reach {power:.0%} power",
        ],
    )
