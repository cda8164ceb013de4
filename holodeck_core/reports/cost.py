"""A run's money for people and for CI: one line per heading, the total and the budget
verdict (console and Markdown), and flat properties (JUnit). An unknown price is shown as
unknown, never as 0."""

from __future__ import annotations

from holodeck_core.models.cost import LEDGER, BudgetVerdict, HeadingCost, RunCost, cost_per_pass
from holodeck_core.stats.display import money


def usd(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.6f} USD"


def _heading(name: str, cost: HeadingCost) -> str:
    unpriced = f", {cost.unpriced_calls} without a price" if cost.unpriced_calls else ""
    understated = (
        f", {cost.understated_calls} with impossible usage" if cost.understated_calls else ""
    )
    calls = f"{cost.calls} call{'s' if cost.calls != 1 else ''}"
    return f"{name} {usd(cost.usd)} ({calls}, {cost.tokens} tokens{unpriced}{understated})"


def resumed_line(cost: RunCost) -> str:
    """``resumed: 0.000120 USD of it paid by an earlier attempt (3 calls, 412 tokens) …``."""
    earlier = sum(cost.resumed.values(), HeadingCost())
    return (
        f"resumed: {usd(earlier.usd)} of it paid by an earlier attempt ({earlier.calls} "
        f"calls, {earlier.tokens} tokens: the agent calls of the cases resumed from the journal)"
    )


def cost_lines(cost: RunCost, passed: int | None = None) -> list[str]:
    """``cost: …`` (and its cost per passing case, given ``passed``) with its headings, then
    ``budget: …`` when the run had one."""
    taken = f", taken {cost.prices_taken}" if cost.prices_taken else ""
    parts = "; ".join(_heading(name, h) for name, h in cost.headings.items()) or "no model calls"
    each = cost_per_pass(cost.total_usd, passed)
    per_pass = f" ({money(each)} per passing case)" if each is not None else ""
    lines = [f"cost: {usd(cost.total_usd)}{per_pass}: {parts} (prices {cost.price_table}{taken})"]
    if cost.resumed:
        lines.append(resumed_line(cost))
    if cost.estimate is not None:
        lines.append(estimate_line(cost))
    batched = [h for h in cost.headings.values() if h.batch_calls]
    if batched:
        calls = sum(h.batch_calls or 0 for h in batched)
        spent = sum(h.batch_usd or 0.0 for h in batched)
        lines.append(f"batch: {calls} call(s) answered by batches, {usd(spent)} at batch prices")
    understated = sum(h.understated_calls for h in cost.headings.values())
    if understated:
        lines.append(
            f"usage: {understated} call(s) reported fewer tokens than their request or reply "
            "allows: charged at an estimate from the text"
        )
    budget = cost.budget
    if budget is not None:
        limits = (
            " and ".join(
                ([f"{budget.usd:g} USD"] if budget.usd is not None else [])
                + ([f"{budget.tokens} tokens"] if budget.tokens is not None else [])
            )
            or "shared (holodeck.yaml budget:)"
        )
        verdict = budget_verdict_text(budget)
        lines.append(
            f"budget: {limits}: spent {usd(budget.spent_usd)} and "
            f"{budget.spent_tokens} tokens, {verdict}"
        )
    return lines


def budget_verdict_text(budget: BudgetVerdict) -> str:
    """Whether the budget stopped the run (or could not be checked), and how to resume."""
    stopped = budget.stopped_by
    if stopped and stopped.endswith(LEDGER):
        scope = stopped.split(".")[0]
        return (
            f"not checked: the {scope} budget's ledger could not be read, "
            f"{budget.refused_calls} call(s) not sent: make it readable and rerun to resume"
        )
    if stopped:
        return (
            f"stopped the run at its {stopped} limit, {budget.refused_calls} call(s) not sent: "
            "rerun with a larger budget to resume"
        )
    refused = f" ({budget.refused_calls} call(s) refused)" if budget.refused_calls else ""
    return "within budget" + refused


def estimate_line(cost: RunCost) -> str:
    """``estimate: …`` (what the plan expected before the run) against the spend."""
    estimate = cost.estimate
    assert estimate is not None
    source = "sizes of the prompt and cases" if estimate.source == "sizes" else estimate.source
    ratio = (
        f": spent {cost.total_usd / estimate.usd:.0%} of it"
        if estimate.usd and cost.total_usd is not None
        else ""
    )
    return (
        f"estimate: {usd(estimate.usd)} before the run ({estimate.calls} calls, "
        f"{estimate.tokens} tokens, from {source}){ratio}"
    )


def cost_properties(cost: RunCost) -> dict[str, str]:
    """``cost.total_usd``, ``cost.<heading>.usd|tokens|calls``, ``estimate.*``, ``budget.*``."""
    out = {"cost.total_usd": _number(cost.total_usd), "cost.price_table": cost.price_table}
    if cost.estimate is not None:
        out["estimate.usd"] = _number(cost.estimate.usd)
        out["estimate.calls"] = str(cost.estimate.calls)
        out["estimate.tokens"] = str(cost.estimate.tokens)
        out["estimate.source"] = cost.estimate.source
    for name, heading in cost.headings.items():
        out[f"cost.{name}.usd"] = _number(heading.usd)
        out[f"cost.{name}.tokens"] = str(heading.tokens)
        out[f"cost.{name}.calls"] = str(heading.calls)
    if cost.budget is not None:
        out["budget.usd"] = _number(cost.budget.usd)
        out["budget.tokens"] = "" if cost.budget.tokens is None else str(cost.budget.tokens)
        out["budget.spent_usd"] = _number(cost.budget.spent_usd)
        out["budget.spent_tokens"] = str(cost.budget.spent_tokens)
        out["budget.verdict"] = (
            f"stopped:{cost.budget.stopped_by}" if cost.budget.stopped_by else "ok"
        )
    return out


def _number(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.6g}"
