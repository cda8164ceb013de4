"""The dashboard's money (docs/cost.md): each filtered run's cost and cost per passing case,
the one cost every screen shows (``eval_runs.cost_usd``), the part of it batches answered, and
the runs a budget stopped. An
unknown cost stays None here and is shown as unknown, never as 0."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from holodeck_core.dashboard import ui
from holodeck_core.dashboard.data import FILTERED_RUNS, Filters, connect, rows
from holodeck_core.history.store import History
from holodeck_core.models.cost import LEDGER, cost_per_pass

if TYPE_CHECKING:
    import duckdb
    import pandas as pd  # type: ignore[import-untyped]

COSTS = """
SELECT f.run_id, f.agent_name, f.prompt_version, f.model_candidate, f.finished_at, f.passed,
       f.cost_usd, f.cost_per_pass, k.batch_usd
FROM ({runs}) f
LEFT JOIN run_costs k ON k.run_id = f.run_id
ORDER BY f.finished_at, f.run_id
"""

BUDGETS = """
SELECT c.run_id, r.agent_name, c.prompt_version, c.finished_at, c.budget_usd, c.budget_tokens,
       c.spent_usd, c.spent_tokens, c.budget_stopped_by, k.refused_calls, c.estimate_usd,
       c.estimate_source
FROM v_cost_by_run c JOIN eval_runs r USING (run_id) JOIN run_costs k USING (run_id)
"""
STOPS_SHOWN = 20


@dataclass
class CostData:
    runs: pd.DataFrame
    """The filtered runs, oldest first: ``cost_usd`` and ``cost_per_pass`` (NaN: unknown), and
    ``batch_usd``, the part of the cost batches answered at the batch prices (NaN: none)."""
    stops: list[dict[str, Any]]
    """The runs of the filtered agents a budget stopped, newest first, even those left out
    as infrastructure failures (a stopped run's cases mostly ERROR with ``budget``)."""


def costs(db: History, filters: Filters) -> CostData:
    where, params = filters.where()
    with connect(db) as con:
        runs = con.execute(COSTS.format(runs=FILTERED_RUNS + where), params).df()
        agents = f" AND r.agent_name IN ({', '.join('?' for _ in filters.agents)})"
        stops = rows(
            con.execute(
                f"{BUDGETS} WHERE c.budget_stopped_by IS NOT NULL"
                f"{agents if filters.agents else ''} "
                f"ORDER BY c.finished_at DESC, c.run_id LIMIT {STOPS_SHOWN}",
                filters.agents,
            )
        )
    return CostData(runs, stops)


def run_money(con: duckdb.DuckDBPyConnection, run: dict[str, Any]) -> dict[str, Any]:
    """A run's cost per passing case, its budget verdict and the estimate made before it
    (Compare's headline, the Explorer's run line)."""
    found = rows(con.execute(f"{BUDGETS} WHERE c.run_id = ?", [run["run_id"]]))
    spent = None if run["cost_usd"] is None else float(run["cost_usd"])
    return {
        "cost_per_pass": cost_per_pass(spent, run["passed"]),
        "budget": budget_text(found[0]) if found else "-",
        "estimate": estimate_text(found[0] if found else None, run["cost_usd"]),
    }


def estimate_text(row: dict[str, Any] | None, spent: float | None) -> str:
    """``$0.0120 (from sizes): spent 95% of it``, ``unknown (from run …)`` when a model had no
    price, or ``-`` for a run recorded without one."""
    if row is None or row["estimate_source"] is None:
        return "-"
    expected = row["estimate_usd"]
    text = f"{ui.usd(expected)} (from {row['estimate_source']})"
    if expected and spent is not None:
        text += f": spent {float(spent) / float(expected):.0%} of it"
    return text


def budget_text(row: dict[str, Any]) -> str:
    """``stopped at its usd limit (1.0 USD): spent ..., 12 call(s) not sent``, ``within
    budget (...)``, ``not checked: …`` when a shared budget's ledger could not be read, or
    ``-`` for a run without a budget."""
    limits = [f"{row['budget_usd']:g} USD"] if row["budget_usd"] is not None else []
    limits += [f"{row['budget_tokens']:,} tokens"] if row["budget_tokens"] is not None else []
    spent = ui.usd(row["spent_usd"])
    used = f"spent {spent} and {row['spent_tokens'] or 0:,} tokens"
    stopped = str(row["budget_stopped_by"] or "")
    if stopped.endswith(LEDGER):
        scope = stopped.split(".")[0]
        return f"not checked: the {scope} budget's ledger could not be read ({used})"
    if not limits:
        return "-"
    if row["budget_stopped_by"]:
        refused = row["refused_calls"] or 0
        return (
            f"stopped at its {row['budget_stopped_by']} limit ({' and '.join(limits)}): "
            f"{used}, {refused} call(s) not sent"
        )
    return f"within budget ({' and '.join(limits)}): {used}"
