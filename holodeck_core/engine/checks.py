"""What the checks of a run just written to the history ask of it (the Dagster ``eval_history``
step, docs/dagster.md): its gate, the regression against the previous run of its configuration
(decided as ``holodeck history compare`` decides), each cell against the agent's baseline cell,
the cost per passing case, the judges' drift on the control set and their agreement with
people. Each is read on the connection that wrote the run, or on a history by its path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from holodeck_core.defaults import ALPHA
from holodeck_core.history.cell_check import CellCheck, cells_against_baseline
from holodeck_core.history.cost_check import CostCheck, cost_check
from holodeck_core.history.drift import Drift, control_agreement, judge_drift
from holodeck_core.history.labels import judge_agreement_of, render_agreement
from holodeck_core.history.regression import RegressionCheck, regression_check
from holodeck_core.runner.gates import GateVerdict, check_gate
from holodeck_core.stats.paired import PairedComparison

if TYPE_CHECKING:
    import duckdb

    from holodeck_core.history.store import History
    from holodeck_core.models import EvalRun
    from holodeck_core.models.evaluation import EvaluationConfig

    Source = History | duckdb.DuckDBPyConnection

__all__ = [
    "Agreement",
    "CellCheck",
    "CostCheck",
    "Drift",
    "GateVerdict",
    "JudgeDrift",
    "PairedComparison",
    "RegressionCheck",
    "agreement_of",
    "cells_of",
    "cost_of",
    "gate_of",
    "judge_drift_of",
    "regression_of",
]


@dataclass(frozen=True)
class Agreement:
    """One judge against people: Cohen's κ (None: too few labels to tell) and the line a
    person reads (``faithfulness (gpt-x): κ 0.62 (95% CI …)``)."""

    metric_name: str
    kappa: float | None
    text: str


def gate_of(run: EvalRun, evaluations: EvaluationConfig | None) -> GateVerdict:
    """The run's summary against ``evaluations.gate`` (no gate: passed)."""
    return check_gate(run.report.summary, evaluations.gate if evaluations else None)


def regression_of(db: Source, run_id: str, evaluations: EvaluationConfig | None) -> RegressionCheck:
    """The run against the previous run of its prompt version, or ``evaluations.baseline``;
    ``evaluations.regression: strict`` fails any case that passed then and fails now."""
    return regression_check(
        db,
        run_id,
        baseline=evaluations.baseline if evaluations else None,
        strict=bool(evaluations and evaluations.regression == "strict"),
        alpha=(evaluations.alpha if evaluations else None) or ALPHA,
    )


def cost_of(
    db: Source,
    run_id: str,
    regression: RegressionCheck,
    evaluations: EvaluationConfig | None,
) -> CostCheck | None:
    """The cost per passing case against the run ``regression`` compared with; None unless
    ``evaluations.max_cost_increase`` asks for it."""
    if evaluations is None or evaluations.max_cost_increase is None:
        return None
    return cost_check(
        db,
        run_id,
        regression.previous,
        evaluations.max_cost_increase,
        not_compared=regression.not_compared,
    )


@dataclass(frozen=True)
class JudgeDrift:
    """How far each judge moved on the ``evaluations.judge_control`` rows since it first scored
    them (empty: the run scored none), and each judge against people on the labelled ones."""

    drift: list[Drift]
    people: list[Agreement]


def judge_drift_of(db: Source, run_id: str) -> JudgeDrift:
    """The judges' drift on the control set; people are asked only when there is drift."""
    drift = judge_drift(db, run_id)
    people = control_agreement(db, run_id) if drift else []
    return JudgeDrift(drift, [agreement_row(row) for row in people])


def agreement_of(db: Source, run_id: str) -> list[Agreement]:
    """Each judge of the run's agent against the agent's human labels (``holodeck labels``)."""
    return [agreement_row(row) for row in judge_agreement_of(db, run_id)]


def agreement_row(row: dict[str, Any]) -> Agreement:
    kappa = row["kappa"]
    return Agreement(
        str(row["metric_name"]), None if kappa is None else float(kappa), render_agreement(row)
    )


def cells_of(
    db: Source,
    runs: dict[str, str],
    baseline: tuple[str, str],
    evaluations: EvaluationConfig | None,
) -> dict[str, CellCheck]:
    """Each cell's run (by cell key) against the agent's baseline cell ``baseline`` (prompt
    version, model candidate), BH-adjusted over ``runs`` (docs/dagster.md)."""
    alpha = (evaluations.alpha if evaluations else None) or ALPHA
    return cells_against_baseline(db, runs, baseline[0], baseline[1], alpha=alpha)
