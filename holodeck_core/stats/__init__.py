"""The statistics of a verdict (docs/cli.md; E. Miller, "Adding Error Bars to Evals",
2024): one pure implementation, no I/O, used by the runner, the history views' checks, the
CLI and the Dagster checks.

Distributions and tests come from scipy; only the clustered standard error and the unbiased
pass@k / pass^k estimators are written here (scipy has neither)."""

from holodeck_core.stats.estimates import (
    CaseOutcome,
    Estimate,
    RunStatistics,
    mean_estimate,
    pass_at_k,
    pass_hat_k,
    pass_rate_estimate,
    run_statistics,
    wilson,
)
from holodeck_core.stats.paired import PairedComparison, Verdict, paired_comparison
from holodeck_core.stats.power import PowerPlan, plan_power
from holodeck_core.stats.trials import Reducer, reduce_status

__all__ = [
    "CaseOutcome",
    "Estimate",
    "PairedComparison",
    "PowerPlan",
    "Reducer",
    "RunStatistics",
    "Verdict",
    "mean_estimate",
    "paired_comparison",
    "pass_at_k",
    "pass_hat_k",
    "pass_rate_estimate",
    "plan_power",
    "reduce_status",
    "run_statistics",
    "wilson",
]
