"""Money, part 2 (docs/cost.md): ``execution.budget`` is a hard stop kept by the call
layer. Every call reserves its worst case before it is sent and settles its usage after, so a
run under half its measured cost stops within the budget at any concurrency, its unfinished
cases are ERROR (budget) with exit 3, and a rerun with a larger budget pays only for the rest
(the loopback server's per-request counters)."""

from __future__ import annotations

import os
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

from holodeck_core.calls.ledger import BudgetStop, Charge, Ledger
from holodeck_core.calls.prices import packaged_price_table
from holodeck_core.cli.main import main
from holodeck_core.models import EvalRun, LLMProvider, Status, TokenUsage
from holodeck_core.models.cost import Budget, HeadingCost
from holodeck_core.testing import run_model_server
from tests.test_cost import RULES, write_agent

CASES = [f"question {n}" for n in range(24)]


def runs(folder: Path) -> list[EvalRun]:
    paths = sorted((folder / "results" / "money").glob("holodeck-pipelines/*.json"))
    return [EvalRun.model_validate_json(p.read_text()) for p in paths]


def budget_block(usd: float) -> str:
    """Written positionally: YAML reads ``1e-06`` (no dot) as a string."""
    return f"execution: {{budget: {{usd: {format(Decimal(repr(usd)), 'f')}}}}}\n"


def worst_call_usd(url: str) -> float:
    """The largest reservation one call of this suite can hold: the judge's (gpt-4o, 40
    output tokens) with a generous input, the same bound the ledger computes."""
    judge = LLMProvider(provider="openai", name="gpt-4o", max_tokens=40, endpoint=url)  # type: ignore[call-arg]
    ledger = Ledger(packaged_price_table())
    hold = ledger.reserve(Charge("judge", judge, "openai", input_tokens=2_000))
    return hold.usd


@pytest.mark.parametrize("parallel", [1, 8, 32])
def test_half_the_measured_cost_stops_the_run_and_a_larger_budget_resumes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parallel: int
) -> None:
    measured_dir, budget_dir = tmp_path / "measured", tmp_path / "budget"
    measured_dir.mkdir()
    budget_dir.mkdir()
    with run_model_server(RULES) as server:
        url = server.openai_base_url
        monkeypatch.setenv("HOLODECK_HOME", str(measured_dir / "home"))
        agent = write_agent(measured_dir, url, CASES)
        assert main(["test", str(agent), "-q", "--parallel", str(parallel)]) == 0
        [measured] = runs(measured_dir)
        cost = measured.report.summary.cost_usd
        assert cost is not None and cost > 0
        unbudgeted_calls = server.stats()["total_calls"]

        server.reset()
        monkeypatch.setenv("HOLODECK_HOME", str(budget_dir / "home"))
        budget = cost / 2
        agent = write_agent(budget_dir, url, CASES, extra=budget_block(budget))
        assert main(["test", str(agent), "-q", "--parallel", str(parallel)]) == 3
        first = server.stats()
        [stopped] = runs(budget_dir)
        verdict = stopped.report.summary.cost and stopped.report.summary.cost.budget
        assert verdict and verdict.stopped_by == "usd" and verdict.refused_calls > 0
        spent = verdict.spent_usd
        assert spent <= budget + parallel * worst_call_usd(url)  # one worst call per slot
        assert spent <= budget  # the reservations hold it under the budget itself
        assert stopped.report.summary.cost_usd == pytest.approx(spent)
        statuses = Counter(
            (r.status, r.error_source) for r in stopped.report.results if r.status is Status.ERROR
        )
        assert statuses and set(statuses) == {(Status.ERROR, "budget")}
        assert any(r.status is Status.PASS for r in stopped.report.results)
        assert all(
            "rerun with a larger execution.budget" in r.errors[0]
            for r in stopped.report.results
            if r.status is Status.ERROR
        )

        server.reset()
        # larger by enough for 32 worst cases in flight at once (each holds its max_tokens)
        agent = write_agent(budget_dir, url, CASES, extra=budget_block(cost * 10))
        assert main(["test", str(agent), "-q", "--parallel", str(parallel)]) == 0
        second = server.stats()
    resumed = runs(budget_dir)[-1]
    assert {r.status for r in resumed.report.results} == {Status.PASS}
    # the rerun made only the calls the first one did not: no request was sent twice
    both = Counter(first["by_key"]) + Counter(second["by_key"])
    assert set(both.values()) == {1}
    assert first["total_calls"] + second["total_calls"] == unbudgeted_calls
    resumed_cost = resumed.report.summary.cost_usd
    assert resumed_cost is not None and resumed.report.summary.cost is not None
    # the resumed run's cost is the whole run's: the agent calls the stopped attempt made for
    # the cases it finished (journaled) plus what the rerun paid (docs/cost.md)
    earlier = sum(resumed.report.summary.cost.resumed.values(), HeadingCost()).usd
    assert earlier is not None and 0 < earlier < spent
    assert spent + resumed_cost - earlier == pytest.approx(cost)  # the run was paid once


def test_a_token_budget_stops_too_and_quiet_still_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_model_server(RULES) as server:
        agent = write_agent(
            tmp_path,
            server.openai_base_url,
            CASES[:6],
            extra="execution: {budget: {tokens: 400}}\n",
        )
        assert main(["test", str(agent), "-q", "--parallel", "1"]) == 3
    out = capsys.readouterr().out
    [run] = runs(tmp_path)
    cost = run.report.summary.cost
    assert cost is not None and cost.budget is not None
    assert cost.budget.stopped_by == "tokens" and cost.budget.spent_tokens <= 400
    assert "budget: 400 tokens: spent " in out and "stopped the run at its tokens limit" in out
    assert list(Path(os.environ["HOLODECK_HOME"]).glob("journal/*/*.jsonl"))  # kept to resume


def test_a_usd_budget_refuses_a_model_without_a_price(tmp_path: Path) -> None:
    with run_model_server(RULES) as server:
        agent = write_agent(
            tmp_path, server.openai_base_url, CASES[:1], model="my-model", extra=budget_block(1.0)
        )
        assert main(["test", str(agent), "-q"]) == 3
        assert server.stats()["total_calls"] == 0  # not sent
    [run] = runs(tmp_path)
    [result] = run.report.results
    assert result.status is Status.ERROR and result.error_source == "budget"
    assert "no price for openai model 'my-model'" in " ".join(result.errors)


def test_the_ledger_reserves_the_worst_case_and_settles_the_actual() -> None:
    model = LLMProvider(provider="openai", name="gpt-4o-mini", max_tokens=1000)  # type: ignore[call-arg]
    ledger = Ledger(packaged_price_table(), Budget(usd=0.002))
    charge = Charge("agent", model, "openai", input_tokens=1000)
    worst = (1000 * 0.15 + 1000 * 0.60) / 1e6  # 0.00075 USD
    first, second = ledger.reserve(charge), ledger.reserve(charge)
    assert first.usd == pytest.approx(worst) and ledger.held_usd == pytest.approx(2 * worst)
    with pytest.raises(BudgetStop, match="budget would be passed"):
        ledger.reserve(charge)  # a third worst case would pass 0.002
    assert ledger.stopped_by == "usd"
    ledger.settle(first, charge, TokenUsage(prompt_tokens=100, completion_tokens=10))
    ledger.settle(second, charge, None)  # failed: nothing booked
    assert ledger.held_usd == pytest.approx(0.0)
    assert ledger.spent_usd == pytest.approx((100 * 0.15 + 10 * 0.60) / 1e6)
    with pytest.raises(BudgetStop, match="budget is spent"):
        ledger.reserve(charge)  # once stopped, no new call starts
