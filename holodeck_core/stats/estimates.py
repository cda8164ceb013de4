"""Run statistics (DESIGN §7.7): the pass rate and metric means with their 95% intervals,
pass@k and pass^k.

The unit of analysis is the case: with K trials per case, the case's pass fraction
xᵢ = passesᵢ / K (or its mean score) is one observation, and the standard error is the
cluster-robust one with the case as the cluster (Miller 2024, eq. 4 for equal cluster
sizes): SE = sqrt(Σ(xᵢ - x̄)² / (n(n - 1))). With K = 1 the pass rate gets a Wilson interval,
which behaves at 0% and 100% where the normal one does not."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from holodeck_core.defaults import CONFIDENCE
from holodeck_core.defaults import T975 as T975_TABLE
from holodeck_core.stats.trials import Reducer, is_flaky


def _scipy_stats() -> Any:
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
    return float(_scipy_stats().t.ppf(0.5 + confidence / 2, df))


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Estimate(_Frozen):
    """A mean with its standard error and confidence interval (None with fewer than two
    observations: no spread can be measured)."""

    mean: float
    se: float | None = None
    low: float | None = None
    high: float | None = None
    n: int = Field(ge=0)
    method: Literal["wilson", "clustered", "t"]
    confidence: float = CONFIDENCE

    def render(self, *, percent: bool = False) -> str:
        """``0.600 (95% CI 0.412 to 0.788, SE 0.096, n=25)``."""

        def f(v: float) -> str:
            return f"{v:.1%}" if percent else f"{v:.3f}"

        text = f(self.mean)
        if self.low is not None and self.high is not None:
            text += f" (95% CI {f(self.low)} to {f(self.high)}"
            text += f", SE {f(self.se)}" if self.se is not None else ""
            text += f", n={self.n})"
        return text


class RunStatistics(_Frozen):
    """What §7.7 stores with a run (additively: the counts stay where they were)."""

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
        default_factory=list, description="Cases whose trials disagree (0 < passes < K)."
    )


@dataclass(frozen=True)
class CaseOutcome:
    """One case of a run, as the statistics see it."""

    case_id: str
    passes: int
    trials: int
    scores: Mapping[str, float] = field(default_factory=dict)
    """The case's mean score per metric, over its trials (and turns)."""

    @property
    def pass_fraction(self) -> float:
        return self.passes / self.trials


def wilson(successes: int, n: int, confidence: float = CONFIDENCE) -> Estimate:
    """The Wilson score interval of a proportion, in closed form (equal to scipy's
    ``binomtest(...).proportion_ci(method="wilson")``, tested): a K = 1 run needs no scipy."""
    if n == 0:
        return Estimate(mean=0.0, n=0, method="wilson", confidence=confidence)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    denominator = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return Estimate(
        mean=p,
        se=math.sqrt(p * (1 - p) / n),
        low=max(0.0, center - half),
        high=min(1.0, center + half),
        n=n,
        method="wilson",
        confidence=confidence,
    )


def clustered_se(values: Sequence[float]) -> float:
    """SE of the mean of per-cluster means: sqrt(Σ(xᵢ - x̄)² / (n(n - 1)))."""
    n = len(values)
    mean = sum(values) / n
    return math.sqrt(sum((x - mean) ** 2 for x in values) / (n * (n - 1)))


def mean_estimate(
    values: Sequence[float], *, clustered: bool = False, confidence: float = CONFIDENCE
) -> Estimate:
    """Mean ± t(1 - alpha/2, n - 1)·SE of per-case values."""
    n = len(values)
    method: Literal["clustered", "t"] = "clustered" if clustered else "t"
    if n == 0:
        return Estimate(mean=0.0, n=0, method=method, confidence=confidence)
    mean = sum(values) / n
    if n < 2:
        return Estimate(mean=mean, n=n, method=method, confidence=confidence)
    se = clustered_se(values)
    half = t_quantile(confidence, n - 1) * se
    return Estimate(
        mean=mean,
        se=se,
        low=mean - half,
        high=mean + half,
        n=n,
        method=method,
        confidence=confidence,
    )


def pass_rate_estimate(cases: Sequence[CaseOutcome]) -> Estimate:
    """Wilson when every case ran once; else the clustered interval of the pass fractions."""
    if all(c.trials == 1 for c in cases):
        return wilson(sum(c.passes for c in cases), len(cases))
    return mean_estimate([c.pass_fraction for c in cases], clustered=True)


def pass_at_k(passes: int, trials: int, k: int) -> float:
    """Unbiased pass@k of one case: 1 - C(K - c, k) / C(K, k)."""
    return 1.0 - math.comb(trials - passes, k) / math.comb(trials, k)


def pass_hat_k(passes: int, trials: int, k: int) -> float:
    """Unbiased pass^k of one case (all k of k trials pass): C(c, k) / C(K, k)."""
    return math.comb(passes, k) / math.comb(trials, k)


def run_statistics(
    cases: Sequence[CaseOutcome], *, trials: int = 1, reducer: Reducer = Reducer.ALL
) -> RunStatistics:
    """§7.7 for one run."""
    clustered = trials > 1
    names = sorted({name for case in cases for name in case.scores})
    metrics = {
        name: mean_estimate(
            [c.scores[name] for c in cases if name in c.scores], clustered=clustered
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
        flaky_cases=[c.case_id for c in cases if is_flaky(c.passes, c.trials)],
    )


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)
