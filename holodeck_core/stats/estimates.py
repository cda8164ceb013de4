"""Run statistics (docs/cli.md): the pass rate and metric means with their 95% intervals,
pass@k and pass^k.

The unit of analysis is the case: with K trials per case, the case's pass fraction
xᵢ = passesᵢ / K (or its mean score) is one observation, and the standard error is the
cluster-robust one with the case as the cluster (Miller 2024, eq. 4 for equal cluster
sizes): SE = sqrt(Σ(xᵢ - x̄)² / (n(n - 1))). Intervals stay on their scale (docs/cli.md,
:mod:`holodeck_core.stats.intervals`): the pass rate and 0-1 scores get Wilson's interval with
continuity correction on their effective n, means in a unit Student's t with Hall's skewness
correction, at least 0."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from holodeck_core.defaults import CONFIDENCE, MAX_ERROR_SHARE
from holodeck_core.defaults import T975 as T975_TABLE
from holodeck_core.stats.display import number
from holodeck_core.stats.health import infrastructure_failure
from holodeck_core.stats.intervals import (
    HALL_T,
    METHOD_NAMES,
    WILSON_CC,
    WILSON_CC_EFFECTIVE,
    effective_n,
    hall_t,
    skewness,
    wilson_cc,
    z_value,
)
from holodeck_core.stats.trials import Reducer, is_flaky


def scipy_stats() -> Any:
    """scipy.stats, imported on first use (~0.7 s): loading agent.yaml and scoring a run at
    95% must not pay for it (:func:`t975`); paired tests and power analysis do."""
    from scipy import stats

    return stats


def t975(df: int) -> float:
    """Student's t(0.975, df) to a relative 3e-7, without scipy: the table up to df = 30, the
    Cornish-Fisher series in z = Φ⁻¹(0.975) beyond (as ``holodeck_t975`` computes it)."""
    if df <= len(T975_TABLE):
        return T975_TABLE[df - 1]
    z = NormalDist().inv_cdf(0.975)
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * df**4)
    )


def t_quantile(confidence: float, df: int) -> float:
    """The two-sided ``confidence`` quantile of Student's t: at 95% without scipy."""
    if confidence == CONFIDENCE:
        return t975(df)
    return float(scipy_stats().t.ppf(0.5 + confidence / 2, df))


class FrozenModel(BaseModel):
    """The base of the statistics' values: immutable, no unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)


IntervalMethod = Literal[
    "wilson_cc",
    "wilson_cc_effective_n",
    "t_hall_skewness",
    "t_truncated_at_0",
    "wilson",
    "clustered",
    "t",
]
"""The first three are this release's (:mod:`holodeck_core.stats.intervals`); the others are
read from runs recorded before it."""


class Estimate(FrozenModel):
    """A mean with its standard error and confidence interval (None without observations, or
    for a mean in a unit with fewer than two: no spread can be measured)."""

    mean: float
    se: float | None = None
    low: float | None = None
    high: float | None = None
    n: int = Field(ge=0)
    method: IntervalMethod
    n_effective: float | None = Field(
        None, description="The effective sample size the Wilson interval was computed on."
    )
    confidence: float = CONFIDENCE

    @property
    def method_name(self) -> str:
        return METHOD_NAMES[self.method]

    def render(self, *, percent: bool = False, method: bool = True) -> str:
        """``0.6 (95% CI 0.412 to 0.788, SE 0.096; n = 25, interval method: …)``; without
        ``method`` the method is left to one line for the whole run."""

        def f(v: float) -> str:
            return f"{v:.1%}" if percent else number(v)

        text = f(self.mean)
        if self.low is not None and self.high is not None:
            text += f" ({self.confidence:.0%} CI {f(self.low)} to {f(self.high)}"
            text += f", SE {f(self.se)}" if self.se is not None else ""
            text += f"; n = {self.n}"
            effective = self.n_effective if self.method == WILSON_CC_EFFECTIVE else None
            if method:
                text += f", interval method: {self.method_name}"
                text += "" if effective is None else f" ({effective:.1f})"
            elif effective is not None:
                text += f", effective n {effective:.1f}"
            text += ")"
        return text


class RunStatistics(FrozenModel):
    """The statistics stored with a run (docs/cli.md) (additively: the counts stay where they
    were)."""

    cases: int = Field(ge=0)
    trials: int = Field(ge=1, description="K: trials per case.")
    reducer: Reducer = Reducer.ALL
    pass_rate: Estimate = Field(description="Mean of the per-case pass fractions.")
    metrics: dict[str, Estimate] = Field(
        default_factory=dict, description="Per metric: the mean of the per-case mean scores."
    )
    pass_at_k: dict[int, float] | None = Field(None, description="k → pass@k (K > 1).")
    pass_hat_k: dict[int, float] | None = Field(None, description="k → pass^k (K > 1).")
    flaky_cases: list[str] = Field(
        default_factory=list,
        description="Cases whose trials that ran disagree (0 < passes < K - errors).",
    )
    errored_cases: int = Field(0, ge=0, description="Cases whose status is ERROR.")
    infrastructure_failure: bool = Field(
        False,
        description="More than evaluations.max_error_share of the cases ERROR (docs/cli.md): "
        "kept out of trends, baselines and comparisons.",
    )
    max_error_share: float = MAX_ERROR_SHARE


@dataclass(frozen=True)
class CaseOutcome:
    """One case of a run, as the statistics see it."""

    case_id: str
    passes: int
    trials: int
    scores: Mapping[str, float] = field(default_factory=dict)
    """The case's mean score per metric, over its trials (and turns)."""
    units: frozenset[str] = frozenset()
    """The metrics whose scores are in a unit (ms, USD: ≥ 0, unbounded), not 0-1."""
    errors: int = 0
    """Trials that ERROR (after retries)."""

    @property
    def pass_fraction(self) -> float:
        return self.passes / self.trials


def wilson(successes: int, n: int, confidence: float = CONFIDENCE) -> Estimate:
    """A proportion of n independent trials: Wilson with continuity correction (equal to
    scipy's ``binomtest(...).proportion_ci(method="wilsoncc")``, tested)."""
    if n == 0:
        return Estimate(mean=0.0, n=0, method=WILSON_CC, confidence=confidence)
    p = successes / n
    low, high = wilson_cc(p, n, z_value(confidence))
    return Estimate(
        mean=p,
        se=math.sqrt(p * (1 - p) / n),
        low=low,
        high=high,
        n=n,
        method=WILSON_CC,
        n_effective=float(n),
        confidence=confidence,
    )


def clustered_se(values: Sequence[float]) -> float:
    """SE of the mean of per-cluster means: sqrt(Σ(xᵢ - x̄)² / (n(n - 1)))."""
    n = len(values)
    if min(values) == max(values):  # exactly 0, not the rounding noise of sum(values) / n
        return 0.0
    mean = sum(values) / n
    return math.sqrt(sum((x - mean) ** 2 for x in values) / (n * (n - 1)))


def mean_estimate(
    values: Sequence[float],
    *,
    bounded: bool = True,
    trials: int | None = None,
    confidence: float = CONFIDENCE,
) -> Estimate:
    """The mean of per-case values with its clustered SE. ``bounded``: the values lie in
    [0, 1] (pass fractions of ``trials`` trials, or normalized scores: ``trials`` None) and
    the interval is Wilson's on the effective n; else (a unit, ≥ 0) Student's t with Hall's
    skewness correction, at least 0."""
    n = len(values)
    method = WILSON_CC_EFFECTIVE if bounded else HALL_T
    if n == 0:
        return Estimate(mean=0.0, n=0, method=method, confidence=confidence)
    mean = sum(values) / n
    if n < 2:
        if not bounded:
            return Estimate(mean=mean, n=n, method=method, confidence=confidence)
        low, high = wilson_cc(mean, n, z_value(confidence))
        return Estimate(
            mean=mean,
            low=low,
            high=high,
            n=n,
            method=method,
            n_effective=float(n),
            confidence=confidence,
        )
    se = clustered_se(values)
    t = t_quantile(confidence, n - 1)
    n_eff: float | None = None
    if bounded:
        z = z_value(confidence)
        n_eff = effective_n(mean, se, n, None if trials is None else float(n * trials), t, z)
        low, high = wilson_cc(mean, n_eff, z)
    else:
        low, high = hall_t(mean, se, skewness(values, mean, se * math.sqrt(n)), n, t)
    return Estimate(
        mean=mean,
        se=se,
        low=low,
        high=high,
        n=n,
        method=method,
        n_effective=n_eff,
        confidence=confidence,
    )


def pass_rate_estimate(cases: Sequence[CaseOutcome]) -> Estimate:
    """Wilson (continuity-corrected) on n when every case ran once; else on the effective n
    of the clustered SE of the pass fractions."""
    if all(c.trials == 1 for c in cases):
        return wilson(sum(c.passes for c in cases), len(cases))
    return mean_estimate([c.pass_fraction for c in cases], trials=max(c.trials for c in cases))


def pass_at_k(passes: int, trials: int, k: int) -> float:
    """Unbiased pass@k of one case: 1 - C(K - c, k) / C(K, k)."""
    return 1.0 - math.comb(trials - passes, k) / math.comb(trials, k)


def pass_hat_k(passes: int, trials: int, k: int) -> float:
    """Unbiased pass^k of one case (all k of k trials pass): C(c, k) / C(K, k)."""
    return math.comb(passes, k) / math.comb(trials, k)


def run_statistics(
    cases: Sequence[CaseOutcome],
    *,
    trials: int = 1,
    reducer: Reducer = Reducer.ALL,
    errored: int = 0,
    max_error_share: float | None = None,
) -> RunStatistics:
    """The statistics of one run; ``errored`` of its cases are ERROR (docs/cli.md)."""
    clustered = trials > 1
    names = sorted({name for case in cases for name in case.scores})
    in_units = {name for case in cases for name in case.units}
    metrics = {
        name: mean_estimate(
            [c.scores[name] for c in cases if name in c.scores], bounded=name not in in_units
        )
        for name in names
    }
    at_k = hat_k = None
    if clustered and cases:
        ks = range(1, trials + 1)
        at_k = {k: _mean([pass_at_k(c.passes, c.trials, k) for c in cases]) for k in ks}
        hat_k = {k: _mean([pass_hat_k(c.passes, c.trials, k) for c in cases]) for k in ks}
    return RunStatistics(
        cases=len(cases),
        trials=trials,
        reducer=reducer,
        pass_rate=pass_rate_estimate(cases),
        metrics=metrics,
        pass_at_k=at_k,
        pass_hat_k=hat_k,
        flaky_cases=[c.case_id for c in cases if is_flaky(c.passes, c.trials, c.errors)],
        errored_cases=errored,
        infrastructure_failure=infrastructure_failure(errored, len(cases), max_error_share),
        max_error_share=MAX_ERROR_SHARE if max_error_share is None else max_error_share,
    )


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)
