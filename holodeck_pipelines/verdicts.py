"""The checks of ``eval_history``: the gate, the statistical ones (docs/architecture.md:
``no_regression``, decided as ``holodeck history compare`` decides, ``judge_drift``,
``judge_agreement`` and, when ``evaluations.max_cost_increase`` is set, ``cost_regression``) and
``no_errored_cases``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import dagster as dg

from holodeck_core.engine.checks import (
    CellCheck,
    CostCheck,
    PairedComparison,
    RegressionCheck,
    agreement_of,
    cost_of,
    gate_of,
    judge_drift_of,
    regression_of,
)
from holodeck_core.models import EvalRun
from holodeck_core.models.evaluation import EvaluationConfig

if TYPE_CHECKING:
    import duckdb

    from holodeck_core.engine import History


@dataclass(frozen=True)
class Skipped:
    """A check that cannot be evaluated for this run (nothing to compare with, no labels):
    no evaluation is emitted, so the UI shows it as skipped, never as passed; the reason goes
    to the asset's metadata and log (docs/dagster.md)."""

    check_name: str
    reason: str
    passed: bool = True  # fails no partition: read with the evaluated checks' results


Verdict = dg.AssetCheckResult | Skipped


CHECKS = {
    "pass_rate_gate": "The pass rate and error count meet evaluations.gate.",
    "no_regression": "No significant drop of the paired pass fraction against the previous run "
    "of this cell, its prompt version and model candidate (or evaluations.baseline); with "
    "evaluations.regression: strict, no case that passed then fails now.",
    "matrix_vs_baseline": "No significant drop of the paired pass fraction against the newest "
    "run of the agent's baseline cell (its first prompt version x its own model), "
    "Benjamini-Hochberg adjusted over the cells evaluated together.",
    "judge_agreement": "Each judge agrees with the human labels of this agent's cases (Cohen's "
    "kappa at least evaluations.min_judge_kappa).",
    "judge_drift": "The judges score the evaluations.judge_control rows as they first did "
    "(within evaluations.judge_drift_max).",
    "no_errored_cases": "Every case could be evaluated (no ERROR status).",
}
COST_CHECK = {
    "cost_regression": "The cost per passing case rose by at most evaluations.max_cost_increase "
    "against the run no_regression compares with (an unknown cost: skipped, with the reason)."
}


def checks_of(evaluations: EvaluationConfig | None) -> dict[str, str]:
    """Each check of ``eval_history`` and what it asserts: ``cost_regression`` only when
    ``evaluations.max_cost_increase`` is set."""
    wants_cost = evaluations is not None and evaluations.max_cost_increase is not None
    return {**CHECKS, **(COST_CHECK if wants_cost else {})}


def run_checks(
    con: duckdb.DuckDBPyConnection, run: EvalRun, evaluations: EvaluationConfig | None
) -> list[Verdict]:
    """Every check of a run just written to the history ``con`` is connected to."""
    run_id = run.metadata.run_id or ""
    summary = run.report.summary
    gate = gate_of(run, evaluations)
    regression = regression_of(con, run_id, evaluations)
    cost = cost_of(con, run_id, regression, evaluations)
    return [
        dg.AssetCheckResult(
            check_name="pass_rate_gate",
            passed=gate.passed,
            severity=dg.AssetCheckSeverity.ERROR,
            description=gate.description,
            metadata={
                "pass_rate": summary.pass_rate / 100,
                "errored": summary.errored,
                "gate": gate.rule,
            },
        ),
        regression_result(regression),
        *([] if cost is None else [cost_result(cost)]),
        drift_result(con, run_id, evaluations),
        agreement_result(con, run_id, evaluations),
        dg.AssetCheckResult(
            check_name="no_errored_cases",
            passed=summary.errored == 0,
            severity=dg.AssetCheckSeverity.WARN,
            description=f"{summary.errored} cases could not be evaluated",
        ),
    ]


def regression_result(check: RegressionCheck) -> Verdict:
    """The ``no_regression`` check, decided as ``holodeck history compare`` decides."""
    previous, comparison = check.previous, check.comparison
    if check.not_compared is not None:
        return Skipped("no_regression", f"not compared: {check.not_compared}")
    if comparison is None:
        return Skipped("no_regression", "no previous run of this cell to compare with")
    assert comparison.paired is not None  # compare_runs always pairs
    paired = comparison.paired.pass_fraction
    metadata: dict[str, Any] = {
        "previous_run_id": previous or "",
        "verdict": "strict" if comparison.strict else paired.verdict.value,
        "regressed_cases": ", ".join(f.case_id for f in comparison.regressions[:20]),
        "flaky_cases": ", ".join(comparison.flaky[:20]),
        **paired_metadata(paired, ("mean_diff", "se", "low", "high", "p_value", "p_adjusted")),
    }
    return dg.AssetCheckResult(
        check_name="no_regression",
        passed=not comparison.is_regression,
        severity=dg.AssetCheckSeverity.WARN,
        description=("; ".join(comparison.reasons) or f"against run {previous}: {paired.render()}"),
        metadata=metadata,
    )


def paired_metadata(paired: PairedComparison, floats: tuple[str, ...]) -> dict[str, Any]:
    """A paired comparison's size, its adjustment and the ``floats`` it has, as a check's
    metadata (``no_regression`` and ``matrix_vs_baseline`` show the same shape)."""
    metadata: dict[str, Any] = {
        "shared_cases": paired.n,
        "adjustment": paired.adjustment.value,
        "family_size": paired.family_size,
    }
    for key in floats:
        value = getattr(paired, key)
        if value is not None:
            metadata[key] = dg.MetadataValue.float(value)
    return metadata


def drift_result(
    db: History | duckdb.DuckDBPyConnection, run_id: str, evaluations: EvaluationConfig | None
) -> Verdict:
    limit = evaluations.judge_drift_max if evaluations else None
    found = judge_drift_of(db, run_id)
    drift, people = found.drift, found.people
    if not drift:
        return Skipped("judge_drift", "no evaluations.judge_control rows were scored")
    worst = max(abs(d.drift) for d in drift)
    passed = limit is None or worst <= limit
    metadata: dict[str, Any] = {
        f"drift/{d.metric_name}": dg.MetadataValue.float(d.drift) for d in drift
    }
    metadata |= {
        f"control_kappa/{r.metric_name}": dg.MetadataValue.float(r.kappa)
        for r in people
        if r.kappa is not None
    }
    return dg.AssetCheckResult(
        check_name="judge_drift",
        passed=passed,
        severity=dg.AssetCheckSeverity.WARN,
        description=", ".join(f"{d.metric_name} {d.drift:+.3f} (n={d.n})" for d in drift)
        + ("" if passed else f": beyond evaluations.judge_drift_max {limit}")
        + "".join(f"; against people on the control set: {r.text}" for r in people),
        metadata=metadata,
    )


def agreement_result(
    db: History | duckdb.DuckDBPyConnection, run_id: str, evaluations: EvaluationConfig | None
) -> Verdict:
    """``judge_agreement``: Cohen's κ of each judge against the agent's human labels
    (docs/cli.md), a warning below ``evaluations.min_judge_kappa``."""
    minimum = evaluations.min_judge_kappa if evaluations else None
    rated = [r for r in agreement_of(db, run_id) if r.kappa is not None]
    if not rated:
        return Skipped(
            "judge_agreement",
            "no human labels of this agent's judged cases yet (holodeck labels import)",
        )
    low = [r for r in rated if minimum is not None and r.kappa is not None and r.kappa < minimum]
    return dg.AssetCheckResult(
        check_name="judge_agreement",
        passed=not low,
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(r.text for r in rated)
        + (f": below evaluations.min_judge_kappa {minimum}" if low else ""),
        metadata={
            f"kappa/{r.metric_name}": dg.MetadataValue.float(r.kappa)
            for r in rated
            if r.kappa is not None
        },
    )


def cost_result(check: CostCheck) -> Verdict:
    """``cost_regression``: the cost per passing case against the no_regression check's run.
    Not compared (no baseline, an unknown cost) it is skipped with the reason, as
    ``no_regression`` is with nothing to compare: a skip is no warning."""
    if check.status == "skipped":
        return Skipped("cost_regression", check.render().removeprefix("skipped: "))
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


def matrix_result(check: CellCheck, baseline: str) -> Verdict:
    """``matrix_vs_baseline``: the cell against the baseline cell (named ``baseline``)."""
    paired = check.paired
    if check.baseline is None:
        return Skipped(
            "matrix_vs_baseline", f"no healthy run of the baseline cell ({baseline}) yet"
        )
    if paired is None:
        return Skipped("matrix_vs_baseline", f"not compared: {check.not_compared}")
    metadata: dict[str, Any] = {
        "baseline_run_id": check.baseline,
        "baseline_cell": baseline,
        "verdict": paired.verdict.value,
        **paired_metadata(paired, ("mean_diff", "low", "high", "p_value", "p_adjusted")),
    }
    return dg.AssetCheckResult(
        check_name="matrix_vs_baseline",
        passed=not check.regressed,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"against the baseline cell ({baseline}, run {check.baseline}): "
        + paired.render(),
        metadata=metadata,
    )
