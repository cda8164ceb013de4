"""The statistical checks of ``eval_history`` (DESIGN §7.8): ``no_regression``, decided as
``holodeck history compare`` decides, ``judge_drift``, ``judge_agreement`` and, when
``evaluations.max_cost_increase`` is set, ``cost_regression``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import dagster as dg

from holodeck_core.history.cost_check import CostCheck
from holodeck_core.history.drift import control_agreement, judge_drift
from holodeck_core.history.labels import judge_agreement_of, render_agreement
from holodeck_core.history.regression import RegressionCheck
from holodeck_core.history.store import History
from holodeck_core.models.evaluation import EvaluationConfig

if TYPE_CHECKING:
    import duckdb


def regression_result(check: RegressionCheck) -> dg.AssetCheckResult:
    """The ``no_regression`` check, decided as ``holodeck history compare`` decides."""
    previous, comparison = check.previous, check.comparison
    if check.not_compared is not None:
        return dg.AssetCheckResult(
            check_name="no_regression",
            passed=True,
            severity=dg.AssetCheckSeverity.WARN,
            description=f"not compared: {check.not_compared}",
            metadata={"previous_run_id": "", "infrastructure_failure": True, "status": "skipped"},
        )
    if comparison is None:
        return dg.AssetCheckResult(
            check_name="no_regression",
            passed=True,
            severity=dg.AssetCheckSeverity.WARN,
            description="nothing to compare with yet",
            metadata={"previous_run_id": "", "status": "skipped"},
        )
    assert comparison.paired is not None  # compare_runs always pairs
    paired = comparison.paired.pass_fraction
    metadata: dict[str, Any] = {
        "previous_run_id": previous or "",
        "verdict": "strict" if comparison.strict else paired.verdict.value,
        "regressed_cases": ", ".join(f.case_id for f in comparison.regressions[:20]),
        "flaky_cases": ", ".join(comparison.flaky[:20]),
        "shared_cases": paired.n,
        "adjustment": paired.adjustment.value,
        "family_size": paired.family_size,
    }
    for key in ("mean_diff", "se", "low", "high", "p_value", "p_adjusted"):
        value = getattr(paired, key)
        if value is not None:
            metadata[key] = dg.MetadataValue.float(value)
    return dg.AssetCheckResult(
        check_name="no_regression",
        passed=not comparison.is_regression,
        severity=dg.AssetCheckSeverity.WARN,
        description=("; ".join(comparison.reasons) or f"against run {previous}: {paired.render()}"),
        metadata=metadata,
    )


def drift_result(
    db: History | duckdb.DuckDBPyConnection, run_id: str, evaluations: EvaluationConfig | None
) -> dg.AssetCheckResult:
    limit = evaluations.judge_drift_max if evaluations else None
    drift = judge_drift(db, run_id)
    if not drift:
        return dg.AssetCheckResult(
            check_name="judge_drift",
            passed=True,
            severity=dg.AssetCheckSeverity.WARN,
            description="no evaluations.judge_control rows were scored",
        )
    worst = max(abs(d.drift) for d in drift)
    passed = limit is None or worst <= limit
    people = control_agreement(db, run_id)
    metadata: dict[str, Any] = {
        f"drift/{d.metric_name}": dg.MetadataValue.float(d.drift) for d in drift
    }
    metadata |= {
        f"control_kappa/{r['metric_name']}": dg.MetadataValue.float(float(r["kappa"]))
        for r in people
        if r["kappa"] is not None
    }
    return dg.AssetCheckResult(
        check_name="judge_drift",
        passed=passed,
        severity=dg.AssetCheckSeverity.WARN,
        description=", ".join(f"{d.metric_name} {d.drift:+.3f} (n={d.n})" for d in drift)
        + ("" if passed else f": beyond evaluations.judge_drift_max {limit}")
        + "".join(f"; against people on the control set: {render_agreement(r)}" for r in people),
        metadata=metadata,
    )


def agreement_result(
    db: History | duckdb.DuckDBPyConnection, run_id: str, evaluations: EvaluationConfig | None
) -> dg.AssetCheckResult:
    """``judge_agreement``: Cohen's κ of each judge against the agent's human labels (DESIGN
    §8.7), a warning below ``evaluations.min_judge_kappa``."""
    minimum = evaluations.min_judge_kappa if evaluations else None
    rows = judge_agreement_of(db, run_id)
    rated = [r for r in rows if r["kappa"] is not None]
    if not rated:
        return dg.AssetCheckResult(
            check_name="judge_agreement",
            passed=True,
            severity=dg.AssetCheckSeverity.WARN,
            description="no human labels of this agent's judged cases yet (holodeck labels import)",
        )
    low = [r for r in rated if minimum is not None and r["kappa"] < minimum]
    return dg.AssetCheckResult(
        check_name="judge_agreement",
        passed=not low,
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(render_agreement(r) for r in rated)
        + (f": below evaluations.min_judge_kappa {minimum}" if low else ""),
        metadata={
            f"kappa/{r['metric_name']}": dg.MetadataValue.float(float(r["kappa"])) for r in rated
        },
    )


def cost_result(check: CostCheck) -> dg.AssetCheckResult:
    """``cost_regression``: the cost per passing case against the no_regression check's run.
    Not compared (no baseline, an unknown cost) it passes with the reason, ``status: skipped``,
    as ``no_regression`` does with nothing to compare: a skip is no warning."""
    metadata: dict[str, Any] = {
        "baseline_run_id": check.baseline or "",
        "max_cost_increase": dg.MetadataValue.float(check.limit),
        "status": check.status,
    }
    for key, value in (
        ("cost_per_pass_usd", check.after),
        ("baseline_cost_per_pass_usd", check.before),
        ("increase", check.increase),
    ):
        if value is not None:
            metadata[key] = dg.MetadataValue.float(value)
    return dg.AssetCheckResult(
        check_name="cost_regression",
        passed=check.passed,
        severity=dg.AssetCheckSeverity.WARN,
        description=check.render(),
        metadata=metadata,
    )
