"""Intervals that stay on their scale (docs/cli.md), in closed form: no scipy, and the SQL
macros ``holodeck_n_eff`` / ``holodeck_wilson_cc_low`` / ``holodeck_wilson_cc_high`` compute the
same numbers (tested equal).

A proportion, or the mean of a score bounded to [0, 1], gets the **Wilson score interval with
continuity correction** (Newcombe 1998, method 4; scipy's ``proportion_ci(method="wilsoncc")``)
on an effective sample size:

- one trial per case: the cases are Bernoulli draws and n_eff = n;
- K trials per case, or a score: the standard error is estimated from the cases (clustered by
  case, docs/cli.md) and n_eff = p̂(1 - p̂)/SE² (as Inspect AI's ``ci_wilson``), capped at the
  number of independent draws there could be (n·K) and shrunk by (z / t(n - 1))² for the
  degrees of freedom the estimated SE has (Korn & Graubard 1998, the survey statisticians'
  interval for proportions from clustered samples). When the cases show no spread (p̂ = 0 or
  1, or every case alike) the variance cannot be estimated from them and the cases alone
  count: n_eff = n (p̂ = 0 or 1, or a score with every case alike) or n·K (pass fractions,
  every case alike, 0 < p̂ < 1).

The continuity correction is what makes the interval valid below 30 cases: plain Wilson
under-covers near 0 and 1 at small n (measured in ``bench/stats_coverage.py``: 0.91 at n = 10,
p = 0.95), the corrected one stays at or above the nominal 95% at n = 10, 30, 100 and K = 1, 5.

A mean in a unit (latency in ms, cost in USD: ≥ 0, no upper bound, and skewed to the right:
a few slow or dear cases) gets **Student's t with Hall's (1992) skewness correction** on the
clustered SE, cut at 0. The plain t interval assumes the mean is near-normal; with a right
skew and few cases it is too short above and too long below (measured: 0.85 at n = 10 for a
lognormal with sigma 1, and it crossed 0 on a skewed latency example). Hall's monotone cubic
transform of the studentized mean removes the skewness term of its Edgeworth expansion; the
interval is x̄ - SE·g⁻¹(t) to x̄ - SE·g⁻¹(-t) with g⁻¹(v) = (3/b)(∛(1 + b(v - b/6)) - 1),
b = g1/√n, g1 the sample skewness of the per-case values and t = t(0.975, n - 1). It needs no
model of the distribution (a log-scale interval is exact only for lognormal data and missed a
two-mode mixture of fast and tool-calling cases: 0.87), no resampling (a cluster bootstrap
would need the trial rows in Python at every read; its BCa interval covered 0.82 at n = 10,
lognormal with sigma 1), and the SQL macros ``holodeck_hall_low`` / ``holodeck_hall_high``
compute it with the same closed form. Coverage: ``bench/stats_coverage.py``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

WILSON_CC = "wilson_cc"
"""One trial per case: Wilson with continuity correction on n."""
WILSON_CC_EFFECTIVE = "wilson_cc_effective_n"
"""Wilson with continuity correction on the effective n of a clustered SE."""
HALL_T = "t_hall_skewness"
"""Student t with Hall's skewness correction on the clustered SE, cut at 0 (units)."""

METHOD_NAMES = {
    WILSON_CC: "Wilson score with continuity correction",
    WILSON_CC_EFFECTIVE: "Wilson score with continuity correction on the effective n",
    HALL_T: "Student t with Hall's skewness correction, at least 0",
    # runs recorded before
    "t_truncated_at_0": "Student t, truncated at 0",
    "wilson": "Wilson score",
    "clustered": "Student t, clustered by case",
    "t": "Student t",
}


def z_value(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def effective_n(p: float, se: float, n: int, max_n: float | None, t: float, z: float) -> float:
    """n_eff of a mean p in [0, 1] with an SE estimated from n cases, with t = t(n - 1).
    ``max_n``: the independent draws there are (n·K pass/fail trials); None for scores."""
    if p <= 0.0 or p >= 1.0:
        return float(n)
    if se <= 0.0:  # no spread: no SE was estimated, so none of its degrees of freedom lost
        return float(n) if max_n is None else max_n
    raw = p * (1 - p) / (se * se)
    raw = raw if max_n is None else min(raw, max_n)
    return raw * (z / t) ** 2


def wilson_cc(p: float, n: float, z: float) -> tuple[float, float]:
    """Newcombe's continuity-corrected Wilson interval of a proportion p observed on n (not
    necessarily an integer); inside [0, 1] and containing p."""
    if n <= 0:
        return 0.0, 1.0
    z2 = z * z
    low_root = math.sqrt(max(0.0, z2 - 2 - 1 / n + 4 * p * (n * (1 - p) + 1)))
    high_root = math.sqrt(max(0.0, z2 + 2 - 1 / n + 4 * p * (n * (1 - p) - 1)))
    # a bound is 0 (1) once the correction 1/(2n) reaches past it, as at 0 (n) successes;
    # on a fractional n below that the closed form has no root (it gave p itself)
    correction = 1 / (2 * n)
    low = 0.0 if p - correction <= 0.0 else (2 * n * p + z2 - 1 - z * low_root) / (2 * (n + z2))
    high = 1.0 if p + correction >= 1.0 else (2 * n * p + z2 + 1 + z * high_root) / (2 * (n + z2))
    return max(0.0, min(low, p)), min(1.0, max(high, p))


def skewness(values: Sequence[float], mean: float, sd: float) -> float:
    """g1 = m₃ / s³: the third central moment (over n) on the sample standard deviation
    (over n - 1); 0 when the values do not vary."""
    cube = sd**3
    if cube <= 0.0:  # no spread, or one too small for a float's cube
        return 0.0
    return sum((x - mean) ** 3 for x in values) / len(values) / cube


def hall_t(mean: float, se: float, skew: float, n: int, t: float) -> tuple[float, float]:
    """Hall's skewness-corrected t interval of a mean in a unit, at least 0 and holding the
    mean (t = t(n - 1) at the interval's level)."""
    b = skew / math.sqrt(n)

    def inverse(v: float) -> float:
        return v if b == 0.0 else 3.0 / b * (math.cbrt(1.0 + b * (v - b / 6.0)) - 1.0)

    low, high = mean - se * inverse(t), mean - se * inverse(-t)
    return max(0.0, min(low, mean)), max(high, mean)
