"""Money, part 1 (docs/cost.md): prices as data, and what a run paid under each heading
(agent turns, judges, prompt tools; embeddings and rerankers in test_retrieval) in the EvalRun,
DuckDB, the Markdown and JUnit reports and the console. An unknown price is unknown, never 0."""

from __future__ import annotations

import os
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import duckdb
import pytest

from holodeck_core.calls.prices import load_price_table, packaged_price_table
from holodeck_core.cli.main import main
from holodeck_core.errors import ConfigError
from holodeck_core.models import EvalRun, TokenUsage
from holodeck_core.stats.display import money
from holodeck_core.testing import run_model_server

RULES: dict[str, Any] = {
    "rules": [
        {"match": {"user": "Task: write G-Eval evaluation steps"}, "json": {"steps": ["a", "b"]}},
        {"match": {"user": "Task: score a test case"}, "json": {"score": 9, "reason": "fine"}},
        {
            "match": {"user": "^please shorten (.+)"},
            "tool_calls": [{"name": "summarize", "arguments": {"text": "$1"}}],
            "reply": "Done: {tool_result}",
        },
        {"match": {"user": "^Summarize: (.*)$"}, "reply": "short $1"},
        {"match": {"user": r"^question (\d+)"}, "reply": "The answer to question $1 is Paris."},
    ]
}
PROMPT_TOOL = """\
tools:
  - type: prompt
    name: summarize
    description: Summarize a text
    template: 'Summarize: {{text}}'
    parameters:
      text: {type: string, description: The text}
    model: {name: gpt-4.1-nano}
"""


def write_agent(
    folder: Path,
    url: str,
    cases: list[str],
    *,
    model: str = "gpt-4o-mini",
    judge: str = "gpt-4o",
    extra: str = "",
) -> Path:
    agent = folder / "agent.yaml"
    key = "api_key: sk-test-key-1234"
    agent.write_text(
        textwrap.dedent(f"""\
            name: money
            model: {{provider: openai, name: {model}, endpoint: "{url}", {key}, max_tokens: 60}}
            instructions: {{inline: "Answer briefly."}}
            evaluations:
              model: {{provider: openai, name: {judge}, endpoint: "{url}", {key}, max_tokens: 40}}
              metrics: [{{type: geval, name: Correct, criteria: 'Is it right?'}}]
            """)
        + extra
        + "test_cases:\n"
        + "".join(f"  - {{id: c{case.split()[-1]}, input: '{case}'}}\n" for case in cases)
    )
    return agent


def only_run(folder: Path) -> tuple[Path, EvalRun]:
    [path] = (folder / "results" / "money").glob("holodeck-pipelines/*.json")
    return path, EvalRun.model_validate_json(path.read_text())


def per_million(usage: TokenUsage, rates: tuple[float, float]) -> float:
    return (usage.prompt_tokens * rates[0] + usage.completion_tokens * rates[1]) / 1e6


def test_the_price_table_is_per_provider_dated_and_overridable(tmp_path: Path) -> None:
    table = packaged_price_table()
    assert table.taken and table.version
    usage = TokenUsage(prompt_tokens=1_000_000, completion_tokens=1_000_000)
    assert table.cost_usd("gpt-4o-mini", usage, "openai") == pytest.approx(0.75)
    assert table.cost_usd("gpt-4o-mini-2024-07-18", usage, "openai") == pytest.approx(0.75)
    assert table.cost_usd("gpt-4o-mini", usage, "anthropic") is None  # another provider's row
    assert table.cost_usd("my-finetune", usage, "openai") is None  # unknown, not 0
    assert table.embedding_price("text-embedding-3-small", "openai") == pytest.approx(0.02)
    pricing = {
        "providers": {"openai": {"models": {"my-finetune": {"input": 1, "output": 2}}}},
        "models": {"gpt-4o": {"input": 100, "output": 100}},
    }
    mine = load_price_table(pricing)
    assert mine.cost_usd("my-finetune", usage, "openai") == pytest.approx(3.0)
    assert mine.cost_usd("gpt-4o", usage, "openai") == pytest.approx(200.0)  # override wins
    assert mine.version.startswith(f"{table.version}+")
    with pytest.raises(ConfigError, match=r"pricing: invalid price table \(models\.x\.input"):
        load_price_table({"models": {"x": {"input": -1, "output": 1}}})


def test_a_run_records_its_spend_per_heading_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = ["question 1", "question 2", "please shorten alpha beta 3"]
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, server.openai_base_url, cases, extra=PROMPT_TOOL)
        assert main(["test", str(agent)]) == 0
        out = capsys.readouterr().out
        assert main(["test", str(agent), "--output", str(tmp_path / "r.md")]) == 0
        assert main(["test", str(agent), "--output", str(tmp_path / "r.xml")]) == 0
    runs = sorted((tmp_path / "results" / "money").glob("holodeck-pipelines/*.json"))
    run = EvalRun.model_validate_json(runs[0].read_text())
    cost = run.report.summary.cost
    assert cost is not None and cost.price_table == packaged_price_table().version
    agent_cost, judge, tool = (cost.headings[h] for h in ("agent", "judge", "prompt_tool"))
    assert (agent_cost.calls, tool.calls) == (4, 1)  # the shorten case takes two agent turns
    assert judge.calls == 4  # G-Eval's steps once, a score per case
    [invocation] = [i for r in run.report.results for i in r.tool_invocations]
    assert invocation.usage is not None
    assert tool.usd == pytest.approx(per_million(invocation.usage, (0.10, 0.40)))  # gpt-4.1-nano
    agent_tokens = TokenUsage()
    for result in run.report.results:
        assert result.token_usage is not None
        agent_tokens = agent_tokens + result.token_usage
    agent_only = agent_tokens.model_copy(
        update={
            "prompt_tokens": agent_tokens.prompt_tokens - invocation.usage.prompt_tokens,
            "completion_tokens": agent_tokens.completion_tokens
            - invocation.usage.completion_tokens,
        }
    )
    assert agent_cost.usd == pytest.approx(per_million(agent_only, (0.15, 0.60)))
    assert judge.usd is not None and judge.usd > 0
    total = (agent_cost.usd or 0) + judge.usd + (tool.usd or 0)
    assert run.report.summary.cost_usd == pytest.approx(total) == cost.total_usd
    by_case = {r.test_id: r.cost for r in run.report.results}
    assert set(by_case["c3"] or {}) == {"agent", "prompt_tool", "judge"}
    assert sum(c["agent"].calls for c in by_case.values() if c) == 4
    # the console, DuckDB, Markdown and JUnit say the same
    each = money(run.report.summary.cost_per_pass)
    assert f"cost: {total:.6f} USD ({each} per passing case): agent {agent_cost.usd:.6f}" in out
    assert f"judge {judge.usd:.6f} USD (4 calls" in out
    db = Path(os.environ["HOLODECK_HOME"]) / "history.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute(
            "SELECT agent_usd, judge_usd, prompt_tool_usd, cost_usd, calls, price_table "
            "FROM v_cost_by_run WHERE run_id = ?",
            [run.metadata.run_id],
        ).fetchone()
        cases_sum = con.execute(
            "SELECT sum(cost_usd) FROM v_cost_by_case WHERE run_id = ?", [run.metadata.run_id]
        ).fetchone()
    assert row is not None and cases_sum is not None
    assert row[:4] == pytest.approx((agent_cost.usd, judge.usd, tool.usd, total))
    assert row[4:] == (9, cost.price_table)
    assert cases_sum[0] == pytest.approx(total)
    markdown = (tmp_path / "r.md").read_text()
    assert "## Cost" in markdown and "- cost: " in markdown and "prompt_tool " in markdown
    properties = {
        p.get("name"): p.get("value")
        for p in ET.parse(tmp_path / "r.xml").getroot().iter("property")
    }
    assert properties["cost.price_table"] == cost.price_table
    assert {"cost.total_usd", "cost.agent.usd", "cost.agent.calls"} <= properties.keys()
    # the estimate made before each run: the first from sizes, each next one measured on the
    # run before (cold caches assumed: it expects what the first spent), in all the same places
    estimate = cost.estimate
    assert estimate is not None and estimate.source == "sizes" and estimate.usd
    assert f"estimate: {estimate.usd:.6f} USD before the run ({estimate.calls} calls" in out
    second, third = (EvalRun.model_validate_json(p.read_text()) for p in runs[1:])
    expected = [c.estimate for c in (second.report.summary.cost, third.report.summary.cost) if c]
    assert [e.source for e in expected if e] == [
        f"run {run.metadata.run_id[:12]}",
        f"run {(second.metadata.run_id or '')[:12]}",
    ]
    assert expected[0] and expected[0].usd == pytest.approx(total)  # the same replies
    with duckdb.connect(str(db), read_only=True) as con:
        stored = con.execute(
            "SELECT estimate_usd, estimate_source, estimate_calls, estimate_tokens "
            "FROM v_cost_by_run WHERE run_id = ?",
            [run.metadata.run_id],
        ).fetchone()
    assert stored == (pytest.approx(estimate.usd), "sizes", estimate.calls, estimate.tokens)
    # the judge answers cached by the first run are not paid again: a small share of it
    assert f"from run {run.metadata.run_id[:12]}): spent " in markdown
    assert expected[1] is not None and properties["estimate.source"] == expected[1].source
    assert float(properties["estimate.usd"]) == pytest.approx(expected[1].usd, rel=1e-5)


def test_an_unknown_price_is_unknown_never_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, server.openai_base_url, ["question 1"], model="my-model")
        assert main(["test", str(agent)]) == 0
    out = capsys.readouterr().out
    _, run = only_run(tmp_path)
    cost = run.report.summary.cost
    assert cost is not None and run.report.summary.cost_usd is None
    assert cost.headings["agent"].usd is None and cost.headings["agent"].unpriced_calls == 1
    assert cost.headings["judge"].usd is not None  # the judge's model has a price
    assert "cost: unknown: agent unknown (1 call, " in out and "1 without a price" in out
    db = Path(os.environ["HOLODECK_HOME"]) / "history.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute("SELECT agent_usd, judge_usd, cost_usd FROM v_cost_by_run").fetchone()
    assert row is not None and row[0] is None and row[1] > 0 and row[2] is None


def test_holodeck_yaml_pricing_prices_a_model_the_table_lacks(tmp_path: Path) -> None:
    (tmp_path / "holodeck.yaml").write_text(
        "pricing:\n  providers:\n    openai:\n      models:\n"
        "        my-model: {input: 1000000, output: 2000000}\n"  # $1 a prompt token, $2 an answer
    )
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, server.openai_base_url, ["question 1"], model="my-model")
        assert main(["test", str(agent), "-q"]) == 0
    _, run = only_run(tmp_path)
    [result] = run.report.results
    assert result.token_usage is not None
    cost = run.report.summary.cost
    assert cost is not None and cost.price_table.startswith(packaged_price_table().version + "+")
    expected = result.token_usage.prompt_tokens + 2 * result.token_usage.completion_tokens
    assert cost.headings["agent"].usd == pytest.approx(expected)


def test_a_broken_pricing_block_is_a_config_error_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "holodeck.yaml").write_text("pricing:\n  models:\n    m: {input: cheap}\n")
    agent = write_agent(tmp_path, "http://127.0.0.1:9/v1", ["question 1"])
    assert main(["test", str(agent), "-q"]) == 2
    err = capsys.readouterr().err
    assert "holodeck.yaml" in err and "pricing" in err and "models.m.input" in err
    assert "Traceback" not in err
    assert not (tmp_path / "results").exists()  # nothing half-written
