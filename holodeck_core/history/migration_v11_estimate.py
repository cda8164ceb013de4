"""Schema version 11: the run's estimate before it started (docs/cost.md, ``summary.cost.estimate``
of our EvalRun): four columns of ``run_costs`` and of ``v_cost_by_run``, beside the spend and
the budget verdict, so the dashboard compares what was expected with what was spent. Runs
recorded before have NULL there. Frozen once released."""

from __future__ import annotations

from holodeck_core.history.migration_v7_cost import V_COST_BY_RUN

DESCRIPTION_V11 = (
    "columns run_costs.estimate_usd, estimate_source, estimate_calls, estimate_tokens "
    "(the estimate before the run), shown by v_cost_by_run"
)

ESTIMATE_COLUMNS = (
    ("estimate_usd", "DOUBLE"),
    ("estimate_source", "VARCHAR"),
    ("estimate_calls", "BIGINT"),
    ("estimate_tokens", "BIGINT"),
)

_LAST = "any_value(k.budget_stopped_by) AS budget_stopped_by"
V_COST_BY_RUN_V11 = V_COST_BY_RUN.replace(
    _LAST,
    ",\n    ".join([_LAST, *(f"any_value(k.{name}) AS {name}" for name, _ in ESTIMATE_COLUMNS)]),
)

STATEMENTS_V11: tuple[str, ...] = (
    *(f"ALTER TABLE run_costs ADD COLUMN {name} {kind}" for name, kind in ESTIMATE_COLUMNS),
    V_COST_BY_RUN_V11,
)
