"""Budgets an attacker can fool (docs/agent-yaml.md): budgets that are no limit (``.inf``,
``.nan``, negative, huge, a string) refused at load in agent.yaml and holodeck.yaml; a server
reporting impossibly few tokens charged at an estimate from the text and flagged; a budget
ledger that cannot be read named as such, not as a spent budget. Through the real CLI and the
loopback model server."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.history.store import writer
from holodeck_core.models import Status
from holodeck_core.testing import run_model_server
from tests.hostile import no_traceback, run_cli
from tests.test_budget import runs
from tests.test_cost import PROMPT_TOOL, RULES, write_agent

NO_LIMITS = {
    "inf": ".inf",
    "minus-inf": "-.inf",
    "nan": ".nan",
    "negative": "-1",
    "zero": "0",
    "huge": "1.0e+300",
    "string": "'10'",
    "bool": "true",
}


@pytest.mark.parametrize("shape", sorted(NO_LIMITS))
@pytest.mark.parametrize("limit", ["usd", "tokens"])
def test_a_budget_that_is_no_limit_is_refused_in_agent_yaml(
    tmp_path: Path, shape: str, limit: str
) -> None:
    value = NO_LIMITS[shape]
    agent = write_agent(
        tmp_path, "http://127.0.0.1:9/v1", ["question 1"],
        extra=f"execution: {{budget: {{{limit}: {value}}}}}\n",
    )  # fmt: skip
    proc = run_cli(["test", str(agent), "-q"])
    no_traceback(proc)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"agent.yaml:7: execution.budget.{limit}:" in proc.stderr
    assert not (tmp_path / "results").exists()  # nothing half-written


@pytest.mark.parametrize("shape", ["inf", "nan", "negative", "huge"])
@pytest.mark.parametrize("scope", ["daily", "backfill"])
def test_a_shared_budget_that_is_no_limit_is_refused_in_holodeck_yaml(
    tmp_path: Path, shape: str, scope: str
) -> None:
    agent = write_agent(tmp_path, "http://127.0.0.1:9/v1", ["question 1"])
    limit = "tokens" if shape == "negative" else "usd"
    (tmp_path / "holodeck.yaml").write_text(
        f"# shared\nbudget:\n  {scope}: {{{limit}: {NO_LIMITS[shape]}}}\n"
    )
    with run_model_server(RULES) as server:
        proc = run_cli(["test", str(agent), "-q"])
        assert server.stats()["total_calls"] == 0
    no_traceback(proc)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"holodeck.yaml:3: budget.{scope}.{limit}:" in proc.stderr
    assert not runs(tmp_path)


def garbage(db: Path) -> None:
    db.write_bytes(b"not a database " * 1000)


def table_dropped(db: Path) -> None:
    with writer(db) as con:
        con.execute("DROP VIEW IF EXISTS v_budget_spend")
        con.execute("DROP TABLE budget_ledger")


def nan_spend(db: Path) -> None:
    today = datetime.now(UTC).date().isoformat()
    with writer(db) as con:
        con.execute(
            "INSERT INTO budget_ledger (claimed_usd, claimed_tokens, spent_usd, spent_tokens, "
            "expires_at, updated_at, scope, scope_key, holder, label) VALUES "
            "('NaN', 0, 'NaN', 0, now(), now(), 'daily', ?, 'someone', 'x')",
            [today],
        )


def negative_spend(db: Path) -> None:
    today = datetime.now(UTC).date().isoformat()
    with writer(db) as con:
        con.execute(
            "INSERT INTO budget_ledger (claimed_usd, claimed_tokens, spent_usd, spent_tokens, "
            "expires_at, updated_at, scope, scope_key, holder, label) VALUES "
            "(-1000, 0, -1000, 0, now(), now(), 'daily', ?, 'someone', 'x')",
            [today],
        )


@contextlib.contextmanager
def locked(db: Path) -> Iterator[None]:
    """Another process holding the history's write lock throughout."""
    with writer(db):
        pass
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(db)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.kill()
        holder.wait()


HOLD = "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('locked', flush=True); "
HOLD += "time.sleep(600)"
LEDGERS: dict[str, Callable[[Path], object]] = {
    "garbage": garbage,
    "table-dropped": table_dropped,
    "nan-spend": nan_spend,
    "negative-spend": negative_spend,
}


@pytest.mark.parametrize("shape", [*sorted(LEDGERS), "locked"])
def test_an_unreadable_ledger_says_so_and_never_claims_within_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = home / "history.duckdb"
    monkeypatch.setenv("HOLODECK_HOME", str(home))
    monkeypatch.setenv("HOLODECK_HISTORY_LOCK_TIMEOUT", "1")
    (tmp_path / "holodeck.yaml").write_text("budget: {daily: {usd: 5}}\n")
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, server.openai_base_url, ["question 1", "question 2"])
        with locked(db) if shape == "locked" else contextlib.nullcontext():
            if shape != "locked":
                LEDGERS[shape](db)
            proc = run_cli(["test", str(agent)])
        assert server.stats()["total_calls"] == 0  # fails closed: nothing sent unchecked
    no_traceback(proc)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    [run] = runs(tmp_path)
    cost = run.report.summary.cost
    assert cost is not None and cost.budget is not None
    assert cost.budget.stopped_by == "daily.ledger"
    for result in run.report.results:
        assert result.status is Status.ERROR and result.error_source == "budget"
        first = result.errors[0]
        assert first.startswith("budget ledger: the project's daily budget"), first
        assert str(db) in first and "rerun to resume" in first
        assert "larger execution.budget" not in " ".join(result.errors)
    assert "within budget" not in proc.stdout
    assert "not checked: the daily budget's ledger could not be read" in proc.stdout


LONG_REPLY = " ".join(f"word{n % 97}" for n in range(3000))  # 3,000 words, about 20,000 chars
LONG_QUESTION = "question 7 " + "context " * 2500
UNDERSTATED: dict[str, tuple[dict[str, Any], str]] = {
    "reply-reported-zero": (
        {"reply": LONG_REPLY, "usage": {"completion_tokens": 0}},
        "question 1",
    ),
    "both-reported-one": (
        {"reply": LONG_REPLY, "usage": {"prompt_tokens": 1, "completion_tokens": 1}},
        LONG_QUESTION,
    ),
    "request-reported-zero": ({"reply": "Paris.", "usage": {"prompt_tokens": 0}}, LONG_QUESTION),
    "tool-arguments-reported-zero": (
        {
            "tool_calls": [{"name": "summarize", "arguments": {"text": LONG_REPLY}}],
            "reply": "done",
            "usage": {"completion_tokens": 0},
        },
        "question 1",
    ),
}


def understating(action: dict[str, Any]) -> dict[str, Any]:
    rule = {"match": {"user": "^question", "tool_result": False}, **action}
    return {"rules": [rule, *RULES["rules"]]}


@pytest.mark.parametrize("shape", sorted(UNDERSTATED))
def test_impossible_reported_usage_is_flagged_and_charged_from_the_text(
    tmp_path: Path, shape: str
) -> None:
    action, question = UNDERSTATED[shape]
    extra = PROMPT_TOOL if "tool_calls" in action else ""
    with run_model_server(understating(action)) as server:
        agent = write_agent(tmp_path, server.openai_base_url, [question], extra=extra)
        proc = run_cli(["test", str(agent)])
    no_traceback(proc)
    [run] = runs(tmp_path)
    cost = run.report.summary.cost
    assert cost is not None
    agent_cost = cost.headings["agent"]
    assert agent_cost.understated_calls >= 1
    [result] = run.report.results
    assert result.cost is not None and result.cost["agent"].understated_calls >= 1  # the case
    assert agent_cost.tokens >= min(len(LONG_REPLY), len(LONG_QUESTION)) // 16
    assert "with impossible usage" in proc.stdout
    assert "call(s) reported fewer tokens than their request or reply allows" in proc.stdout


def test_a_server_under_reporting_is_stopped_by_a_token_budget(tmp_path: Path) -> None:
    action, _ = UNDERSTATED["reply-reported-zero"]
    cases = [f"question {n}" for n in range(6)]
    with run_model_server(understating(action)) as server:
        agent = write_agent(
            tmp_path, server.openai_base_url, cases,
            extra="execution: {budget: {tokens: 3000}, parallel_test_cases: 1}\n",
        )  # fmt: skip
        proc = run_cli(["test", str(agent), "-q"])
        sent = server.stats()["total_calls"]
    no_traceback(proc)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    [run] = runs(tmp_path)
    budget = run.report.summary.cost and run.report.summary.cost.budget
    assert budget and budget.stopped_by == "tokens" and budget.refused_calls > 0
    assert budget.spent_tokens > 3000  # the first reply's text, not the 0 it reported
    assert sent < len(cases)  # not every case was sent
