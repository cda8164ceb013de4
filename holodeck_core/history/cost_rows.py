"""A run's ``call_costs`` rows (per case and heading) and its ``run_costs`` row (the price
table and the budget verdict), schema version 6. Runs without cost data (HoloDeck's files,
runs recorded before costs were) have none."""

from __future__ import annotations

from typing import Any

from holodeck_core.history.tabular import TableRows
from holodeck_core.models import EvalRun
from holodeck_core.models.cost import HeadingCost


def cost_tables(run: EvalRun, run_id: str, case_ids: list[str]) -> dict[str, TableRows]:
    cost = run.report.summary.cost
    calls: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    if cost is not None:
        results = run.report.results
        per_case = [(cid, r.cost or {}) for cid, r in zip(case_ids, results, strict=True)]
        for case_id, headings in [*per_case, ("", cost.outside)]:
            calls += [_row(run_id, case_id, h, c) for h, c in headings.items() if c.calls]
        budget, estimate = cost.budget, cost.estimate
        runs.append(
            {
                "run_id": run_id,
                "price_table": cost.price_table,
                "prices_taken": cost.prices_taken,
                "total_usd": cost.total_usd,
                "budget_usd": budget.usd if budget else None,
                "budget_tokens": budget.tokens if budget else None,
                "spent_usd": budget.spent_usd if budget else None,
                "spent_tokens": budget.spent_tokens if budget else None,
                "budget_stopped_by": budget.stopped_by if budget else None,
                "refused_calls": budget.refused_calls if budget else None,
                "estimate_usd": estimate.usd if estimate else None,
                "estimate_source": estimate.source if estimate else None,
                "estimate_calls": estimate.calls if estimate else None,
                "estimate_tokens": estimate.tokens if estimate else None,
                **_batch_columns(sum(cost.headings.values(), HeadingCost())),
            }
        )
    return {
        "call_costs": TableRows.of_dicts("call_costs", calls),
        "run_costs": TableRows.of_dicts("run_costs", runs),
    }


def _row(run_id: str, case_id: str, heading: str, cost: HeadingCost) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "case_id": case_id,
        "heading": heading,
        "calls": cost.calls,
        "prompt_tokens": cost.prompt_tokens,
        "completion_tokens": cost.completion_tokens,
        "cost_usd": cost.usd,
        "unpriced_calls": cost.unpriced_calls,
        **_batch_columns(cost),
    }


def _batch_columns(cost: HeadingCost) -> dict[str, Any]:
    """What batches answered of ``cost`` (NULL: nothing went through a batch)."""
    return {"batch_calls": cost.batch_calls, "batch_usd": cost.batch_usd}
