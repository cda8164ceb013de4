"""Budgets an attacker can fool (issue 43, Hardening III): budgets that are no limit (``.inf``,
``.nan``, negative, huge, a string) refused at load in agent.yaml and holodeck.yaml; a server
reporting impossibly few tokens charged at an estimate from the text and flagged; a budget
ledger that cannot be read named as such, not as a spent budget. Through the real CLI and the
loopback model server."""

from __future__ import annotations

from pathlib import Path

import pytest

from holodeck_core.testing import run_model_server
from tests.hostile import no_traceback, run_cli
from tests.test_budget import runs
from tests.test_cost import RULES, write_agent

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
