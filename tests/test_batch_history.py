"""Batch spend in the history (docs/history.md, docs/cost.md): a run whose calls batches
answered records them as such (``call_costs``/``run_costs``' ``batch_calls`` and ``batch_usd``,
the cost views), and ``holodeck history runs`` and ``show`` say it used batches; a run without
batches has none. Through the real ``holodeck test`` against the loopback model server, on the
DuckDB file and on a DuckLake."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.cli.main import main
from holodeck_core.engine.history import money
from holodeck_core.testing import run_model_server
from tests.test_batch_runs import RULES, openai_model, write_agent


def history(capsys: pytest.CaptureFixture[str], where: list[str], *argv: str) -> str:
    capsys.readouterr()
    assert main(["history", *argv, *where]) == 0
    return capsys.readouterr().out


def sql(capsys: pytest.CaptureFixture[str], where: list[str], query: str) -> list[dict[str, Any]]:
    text = history(capsys, where, "sql", query, "--format", "json")
    rows: list[dict[str, Any]] = json.loads(text)
    return rows


@pytest.mark.parametrize("backend", ["file", "lake"])
def test_history_records_and_shows_batch_spend(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    backend: str,
) -> None:
    monkeypatch.setenv("HOLODECK_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "200")
    where = ["--db", str(tmp_path / "home" / "history.duckdb")]
    if backend == "lake":
        monkeypatch.setenv("HOLODECK_HISTORY_URL", str(tmp_path / "lake"))
        where = ["--lake", str(tmp_path / "lake")]
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path / "agent", openai_model(server))
        assert main(["test", str(agent)]) == 0
        assert main(["test", str(agent), "--batch", "on", "--fresh"]) == 0
    plain, batched = sql(
        capsys,
        where,
        "SELECT run_id, calls, agent_usd, cost_usd, batch_calls, batch_usd FROM v_cost_by_run "
        "ORDER BY finished_at",
    )
    assert (plain["batch_calls"], plain["batch_usd"]) == (None, None)
    calls = batched["calls"]  # its judges: the judge cache's answers, no call
    assert batched["batch_calls"] == calls
    assert batched["batch_usd"] == pytest.approx(batched["cost_usd"]) == batched["agent_usd"]
    assert plain["agent_usd"] == pytest.approx(2 * batched["agent_usd"])  # at half the price
    [by_case] = sql(capsys, where, "SELECT sum(batch_calls) AS n FROM v_cost_by_case")
    assert by_case["n"] == calls  # every batched call was a case's
    assert history(capsys, where, "runs").count("(batch)") == 1
    listed = json.loads(history(capsys, where, "runs", "--format", "json"))
    assert {r["run_id"]: r["batch_calls"] for r in listed} == {
        plain["run_id"]: None,
        batched["run_id"]: calls,
    }
    shown = " ".join(history(capsys, where, "show", batched["run_id"]).split())
    assert f"of it batched {money(batched['batch_usd'])} in {calls} calls" in shown
    assert "batched" not in history(capsys, where, "show", plain["run_id"])
