"""A suite's money (docs/cost.md): which trials the budget stopped, and the run's spend per
heading with the price table it was priced at and the budget's verdict."""

from __future__ import annotations

from typing import Any

from holodeck_core.calls.ledger import NOT_SENT
from holodeck_core.calls.prices import load_price_table
from holodeck_core.models import Status, TestResult
from holodeck_core.models.cost import (
    LEDGER,
    BudgetLimit,
    CallCosts,
    RunCost,
    RunEstimate,
    total_usd,
)
from holodeck_core.models.results import all_metric_results
from holodeck_core.runner.case_run import CaseRun

BUDGET_STOPPED = (
    "budget: the run's budget stopped a model call this case needed; rerun with a larger "
    "execution.budget to resume it (finished cases are not paid for again)"
)
SHARED_BUDGET_STOPPED = (
    "budget: the project's {scope} budget (holodeck.yaml budget.{scope}) stopped a model call "
    "this case needed; rerun when it allows more to resume it (finished cases are not paid "
    "for again)"
)

LEDGER_UNREADABLE = (
    "budget ledger: the project's {scope} budget (holodeck.yaml budget.{scope}) could not be "
    "checked, so a model call this case needed was not sent: {reason}; fix what stops the "
    "ledger being read (a process holding the history, a history file that is not a valid "
    "database), then rerun to resume it (finished cases are not paid for again)"
)


MATRIX_BUDGET_STOPPED = (
    "budget: the agent's execution.budget over every cell of the run (`holodeck matrix`, a "
    "Dagster run of several cells) stopped a model call this case needed; rerun with a larger "
    "budget to resume it (finished cases are not paid for again)"
)


def stopped_message(stopped_by: BudgetLimit | None, reason: str | None = None) -> str:
    """What a case the budget stopped says: which budget (or its unreadable ledger, with
    ``reason``), and how to resume."""
    if stopped_by is None or stopped_by in ("usd", "tokens"):
        return BUDGET_STOPPED
    scope = stopped_by.split(".")[0]
    if scope == "matrix":
        return MATRIX_BUDGET_STOPPED
    if stopped_by.endswith(LEDGER):
        return LEDGER_UNREADABLE.format(scope=scope, reason=reason or "unknown error")
    return SHARED_BUDGET_STOPPED.format(scope=scope)


def budget_verdict(
    result: TestResult,
    run: CaseRun,
    refused: set[str],
    stopped_by: BudgetLimit | None = None,
    reason: str | None = None,
) -> TestResult:
    """``result``, or ERROR with ``error_source: budget`` when the budget refused a call of
    the trial's agent, one made for its case, or one it waited on (G-Eval's shared steps)."""
    stopped = run.budget_stopped or (result.test_id or "") in refused
    stopped = stopped or (
        result.status is Status.ERROR
        and any(NOT_SENT in (m.error or "") for m in all_metric_results(result))
    )
    if not stopped:
        return result
    return result.model_copy(
        update={
            "passed": False,
            "status": Status.ERROR,
            "error_source": "budget",
            "errors": [stopped_message(stopped_by, reason), *result.errors],
        }
    )


def with_case_costs(results: list[TestResult], costs: CallCosts) -> list[TestResult]:
    return [r.model_copy(update={"cost": costs.cases.get(r.test_id or "")}) for r in results]


def run_cost(
    costs: CallCosts, pricing: dict[str, Any] | None, estimate: RunEstimate | None = None
) -> RunCost:
    prices = load_price_table(pricing)
    headings = costs.headings()
    return RunCost(
        price_table=prices.version,
        prices_taken=prices.taken,
        headings=headings,
        outside=costs.outside,
        resumed=costs.resumed,
        total_usd=total_usd(headings),
        budget=costs.budget,
        estimate=estimate,
    )
