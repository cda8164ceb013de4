"""How many cases and trials detect a drop of a given size (``holodeck plan --detect``).

From one run's per-case pass fractions: the within-case (trial-to-trial) variance of a
case's outcome, w = mean of xᵢ(1 - xᵢ)·K/(K - 1) (unbiased for pᵢ(1 - pᵢ)). Two runs of the
same cases differ per case by dᵢ whose variance under no change is 2w/K' with K' trials
each; the paired t-test at alpha (two-sided) then needs the smallest n with
P(T < -t(1 - alpha/2, n - 1)) ≥ power, T noncentral t(n - 1, -δ√n/sd_d)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from holodeck_core.defaults import ALPHA, ASSUMED_PASS_RATE
from holodeck_core.stats.estimates import FrozenModel, scipy_stats

POWER = 0.8
TRIAL_OPTIONS = (1, 3, 5, 10)
MAX_CASES = 1_000_000


class PowerRow(FrozenModel):
    trials: int
    sd_diff: float
    cases_needed: int | None
    power_now: float | None = None
    """The power with the run's own number of cases."""


class PowerPlan(FrozenModel):
    detect: float
    alpha: float
    power: float
    cases: int
    trials: int
    pass_rate: float
    within_case_variance: float
    variance_assumed: bool = False
    """The run showed no variance: ``within_case_variance`` is assumed, not measured."""
    rows: list[PowerRow]
    assumptions: list[str]


def paired_power(n: int, sd_diff: float, detect: float, alpha: float = ALPHA) -> float:
    """Power of the two-sided paired t-test with n cases to see a drop of ``detect``."""
    if n < 2:
        return 0.0
    if sd_diff == 0.0:
        return 1.0
    df = n - 1
    critical = float(scipy_stats().t.ppf(1 - alpha / 2, df))
    return float(scipy_stats().nct.cdf(-critical, df, -detect * math.sqrt(n) / sd_diff))


def cases_needed(sd_diff: float, detect: float, alpha: float, power: float) -> int | None:
    """The smallest n reaching ``power`` (None beyond :data:`MAX_CASES`)."""
    if sd_diff == 0.0:
        return 2
    z = float(scipy_stats().norm.ppf(1 - alpha / 2) + scipy_stats().norm.ppf(power))
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
    w, source, assumed = _within_case_variance(pass_fractions, trials, p)
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
        variance_assumed=assumed,
        rows=rows,
        assumptions=[
            "the comparison is paired: both runs evaluate the same cases (history compare)",
            source,
            "the cases' difficulties stay as observed; a change shifts every case alike",
            f"the paired t-test, two-sided at alpha = {alpha}, must reach {power:.0%} power",
        ],
    )


def _measured(pass_fractions: Sequence[float], trials: int, p: float) -> float:
    """The within-case variance the run shows: from its trials (K > 1), else p(1 - p)."""
    n = len(pass_fractions)
    if trials > 1 and n:
        return sum(x * (1 - x) for x in pass_fractions) / n * trials / (trials - 1)
    return p * (1 - p)


def _within_case_variance(
    pass_fractions: Sequence[float], trials: int, p: float
) -> tuple[float, str, bool]:
    """w, how it was found, and whether it is a guess for want of any variance. A run
    without any (every trial of every case agreed) promises no power: p(1 - p) at the
    observed pass rate is assumed instead, or at :data:`ASSUMED_PASS_RATE` when it passed or
    failed everything."""
    w = _measured(pass_fractions, trials, p)
    n = len(pass_fractions)
    if w > 0.0:
        if trials > 1:
            return (
                w,
                (
                    f"the within-case variance w = {w:.4f} is measured from the trials of the "
                    f"run's {n} cases (K = {trials})"
                ),
                False,
            )
        return (
            w,
            (
                f"with one trial per case the within-case variance cannot be measured: w = "
                f"p(1 - p) = {w:.4f} at the observed pass rate {p:.1%} is assumed (the worst "
                "case: every case behaves like a coin of that bias; run with --trials 3+ and "
                "plan again for a sharper answer)"
            ),
            False,
        )
    rate = p if 0.0 < p < 1.0 else ASSUMED_PASS_RATE
    at = "the observed pass rate" if rate == p else "a pass rate of"
    agreed = {1.0: "passed", 0.0: "failed"}.get(p, "passed or failed all its trials")
    return (
        rate * (1 - rate),
        f"the run shows no variance (every one of its {n} case(s) {agreed}), and zero "
        f"variance would promise any power from 2 cases: w = p(1 - p) = "
        f"{rate * (1 - rate):.4f} at {at} {rate:.1%} is assumed instead (a conservative guess, "
        "not a measurement; record a run whose cases disagree for a sharper answer)",
        True,
    )
