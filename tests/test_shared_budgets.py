"""Budgets runs share (docs/cost.md): ``holodeck.yaml`` ``budget: {daily,
backfill}`` kept in the history's ``budget_ledger`` (a DuckLake with a PostgreSQL catalog: the
catalog's ``holodeck_budget_ledger``). Two Dagster partitions materialized at once in two
processes under one daily budget together stay within it, on the DuckDB file and on a DuckLake
in PostgreSQL (the loopback server's counters), and so do claims of six processes at once;
consecutive CLI runs of one day share it and a rerun resumes; a crashed holder's
claim expires; Dagster shows the estimate before the agent step; a target's calls stop at
``budget.tokens`` (docs/targets.md)."""

from __future__ import annotations

import json
import multiprocessing
import os
import textwrap
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest

from holodeck_core.calls.shared_budget import Amount, PoolRefused
from holodeck_core.cli.main import main
from holodeck_core.config.project import Project
from holodeck_core.history.budget_catalog import (
    CATALOG,
    TABLE,
    locked_ledger,
    postgres_conninfo,
)
from holodeck_core.history.budget_ledger import HistoryPool, shared_pools
from holodeck_core.history.ducklake import DuckLake
from holodeck_core.history.store import History
from holodeck_core.history.tabular import literal
from holodeck_core.models import EvalRun, Status
from holodeck_core.models.cost import Budget, SharedBudgets
from holodeck_core.testing import run_model_server
from holodeck_pipelines.builder import build_definitions
from tests.services import Postgres, create_database, postgres_server
from tests.target_servers import AgentState, agent_server
from tests.test_budget import runs
from tests.test_cost import RULES, write_agent
from tests.test_pipelines import materialize, register

CASES = [f"question {n}" for n in range(24)]
PARTITION_CASES = 12
SYSTEMS = {"v1": "Answer in few words.", "v2": "You are geography expert."}
GEO_RULES: dict[str, Any] = {
    "default": {"reply": "Lyon"},
    "rules": [
        {"match": {"user": "capital", "system": "geography"}, "reply": "Paris", "latency": 0.2},
        {"match": {"user": "capital"}, "reply": "Lyon", "latency": 0.2},
    ],
}


LEDGER = "SELECT scope, scope_key, claimed_usd, spent_usd, claimed_tokens, spent_tokens FROM "


def ledger_rows(history: History) -> list[tuple[Any, ...]]:
    if isinstance(history, DuckLake):
        conninfo = postgres_conninfo(history)
        assert conninfo is not None
        with locked_ledger(history, conninfo) as ledger:
            sql = literal(f"{LEDGER} {TABLE} ORDER BY updated_at")
            return ledger.con.execute(
                f"SELECT * FROM postgres_query({literal(CATALOG)}, {sql})"
            ).fetchall()
    with duckdb.connect(str(history), read_only=True) as con:
        return con.execute(f"{LEDGER} budget_ledger ORDER BY updated_at").fetchall()


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    with postgres_server() as pg:
        yield pg


def postgres_lake(pg: Postgres, root: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> DuckLake:
    """A DuckLake with its catalog in a new database of ``pg`` and its data in a folder;
    ``HOLODECK_HISTORY_URL`` and ``PGPASSWORD`` set (processes started later inherit them)."""
    url = f"{create_database(pg, name)}?data={root / 'lake-data'}"
    monkeypatch.setenv("PGPASSWORD", pg.password)
    monkeypatch.setenv("HOLODECK_HISTORY_URL", url)
    return DuckLake.parse(url)


def histories(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> History:
    """The history of the given ``kind``: a DuckDB file, a DuckLake with a catalog file, or
    with its catalog in PostgreSQL."""
    if kind == "file":
        return tmp_path / "history.duckdb"
    if kind == "lake-file":
        return DuckLake.parse(str(tmp_path / "lake"))
    pg = request.getfixturevalue("postgres")
    name = "budget_" + request.node.name.removeprefix("test_")[:20].replace("-", "_")
    return postgres_lake(
        pg, tmp_path, "".join(c for c in name if c.isalnum() or c == "_"), monkeypatch
    )


def test_two_runs_of_one_day_share_its_budget_and_a_larger_one_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    measured, shared = tmp_path / "measured", tmp_path / "shared"
    measured.mkdir()
    shared.mkdir()
    with run_model_server(RULES) as server:
        url = server.openai_base_url
        monkeypatch.setenv("HOLODECK_HOME", str(measured / "home"))
        assert main(["test", str(write_agent(measured, url, CASES[:12])), "-q"]) == 0
        [run] = runs(measured)
        cost = run.report.summary.cost_usd
        assert cost is not None and cost > 0

        monkeypatch.setenv("HOLODECK_HOME", str(shared / "home"))
        daily = cost * 1.5  # the first run fits, the second (other cases, as costly) cannot
        (shared / "holodeck.yaml").write_text(f"budget: {{daily: {{usd: {daily!r}}}}}\n")
        server.reset()
        first_run = write_agent(shared, url, CASES[:12])
        assert main(["test", str(first_run), "-q", "--parallel", "1"]) == 0
        agent = write_agent(shared, url, CASES[12:])
        assert main(["test", str(agent), "-q", "--parallel", "4"]) == 3
        first = server.stats()
        stopped = runs(shared)[-1]
        verdict = stopped.report.summary.cost and stopped.report.summary.cost.budget
        # no execution.budget, so the verdict names the shared one
        assert verdict and verdict.stopped_by == "daily.usd" and verdict.refused_calls > 0
        errors = [r for r in stopped.report.results if r.status is Status.ERROR]
        assert errors and {r.error_source for r in errors} == {"budget"}
        assert all("daily budget (holodeck.yaml budget.daily)" in r.errors[0] for r in errors)
        assert any(r.status is Status.PASS for r in stopped.report.results)
        spent = sum(r.report.summary.cost_usd or 0.0 for r in runs(shared))
        assert spent <= daily  # claims never pass the budget, calls spend within their claim
        rows = ledger_rows(Path(os.environ["HOLODECK_HOME"]) / "history.duckdb")
        assert {(scope, len(key)) for scope, key, *_ in rows} == {("daily", 10)}
        assert sum(row[3] for row in rows) == pytest.approx(spent)
        assert all(row[2] == pytest.approx(row[3]) for row in rows)  # the rest given back

        server.reset()
        (shared / "holodeck.yaml").write_text(f"budget: {{daily: {{usd: {cost * 10!r}}}}}\n")
        assert main(["test", str(agent), "-q", "--parallel", "4"]) == 0
        second = server.stats()
    assert {r.status for r in runs(shared)[-1].report.results} == {Status.PASS}
    both = Counter(first["by_key"]) + Counter(second["by_key"])
    assert set(both.values()) == {1}  # the resumed run sent only what the stopped one had not


@pytest.mark.parametrize("kind", ["file", "lake-file", "postgres"])
def test_a_crashed_holders_claim_expires_but_its_spend_counts(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = histories(kind, tmp_path, request, monkeypatch)
    budget = Budget(tokens=1000)
    crashed = HistoryPool(db, "daily", "2026-12-01", budget, lease_s=0.0)
    assert crashed.claim(Amount(tokens=100), Amount(), Amount(tokens=900), Amount(tokens=10)) == (
        Amount(tokens=900)
    )
    live = HistoryPool(db, "daily", "2026-12-01", budget)
    # the crashed holder's lease is over: its 900 claimed stop counting, its 100 spent do not
    extra = live.claim(Amount(), Amount(), Amount(tokens=2000), Amount(tokens=10))
    assert extra == Amount(tokens=900)
    other = HistoryPool(db, "daily", "2026-12-01", budget)
    with pytest.raises(PoolRefused, match="daily budget of 1000 tokens"):
        other.claim(Amount(), Amount(), Amount(tokens=50), Amount(tokens=1))
    tomorrow = HistoryPool(db, "daily", "2026-12-02", budget)  # another day, another budget
    assert tomorrow.claim(Amount(), Amount(), Amount(tokens=50), Amount(tokens=1)).tokens == 50


def geo_project(root: Path, url: str, extra: str = "") -> Project:
    agent = root / "agents" / "geo"
    (agent / "prompts").mkdir(parents=True)
    for version, body in SYSTEMS.items():
        (agent / "prompts" / f"{version}.md").write_text(f"---\nversion: {version}\n---\n{body}\n")
    (agent / "agent.yaml").write_text(
        textwrap.dedent(f"""\
            name: Geo Agent
            model: {{provider: openai, name: m, endpoint: "{url}", api_key: sk-test-123456,
                     max_tokens: 2}}
            instructions: {{file: prompts/v1.md, variants: [prompts/v2.md]}}
            execution: {{parallel_test_cases: 2}}
            evaluations:
              metrics: [{{type: standard, metric: equality}}]
            test_cases:
            """)
        + "".join(
            f"  - {{name: c{i}, input: 'capital of France ({i})?', ground_truth: Paris}}\n"
            for i in range(PARTITION_CASES)
        )
    )
    (root / "holodeck.yaml").write_text("agents: [agents/geo/agent.yaml]\n" + extra)
    return Project.discover(root)


def _partition_in_a_process(root: str, key: str, barrier: Any) -> tuple[bool, str]:
    os.environ["DAGSTER_HOME"] = str(Path(root) / "dagster-home")
    defs = build_definitions(Project.discover(Path(root)))
    with dg.DagsterInstance.get() as instance:
        barrier.wait()  # both imported and loaded: start the partitions together
        result = materialize(defs, instance, key)
        failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
        data = failures[0].step_failure_data.user_failure_data if failures else None
        return result.success, (data.description or "") if data else ""


@pytest.mark.parametrize("kind", ["file", "postgres"])
def test_two_partitions_at_once_under_one_daily_budget_stay_within_it(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    measured, shared = tmp_path / "measured", tmp_path / "shared"
    measured.mkdir()
    shared.mkdir()
    home = Path(os.environ["HOLODECK_HOME"])
    with run_model_server(GEO_RULES) as server:
        url = server.openai_base_url
        os.environ["HOLODECK_HOME"] = str(measured / "home")
        project = geo_project(measured, url)
        with dg.instance_for_test() as instance:
            defs = build_definitions(project)
            register(defs, instance)
            alone = materialize(defs, instance, "v2")
            assert alone.success
            [files] = alone.asset_materializations_for_node("geo_agent__processed_files")
            estimate = files.metadata
            assert estimate["estimate/calls"].value == PARTITION_CASES  # before the agent step
            assert estimate["estimate/source"].value == "sizes"
            tags = instance.get_run_by_id(alone.run_id).tags  # type: ignore[union-attr]
            assert tags["holodeck/estimate_usd"] == "unknown"  # model m has no price
            # the report step read it back from the run: the EvalRun and its metadata keep it
            [report] = alone.asset_materializations_for_node("geo_agent__report_summary")
            assert "from sizes" in str(report.metadata["cost breakdown"].value)
            assert "cost (USD)" not in report.metadata  # model m has no price
            path = str(report.metadata["EvalRun file"].value)
            cost = EvalRun.model_validate_json(Path(path).read_text()).report.summary.cost
            assert cost and cost.estimate and cost.estimate.calls == PARTITION_CASES
        assert server.stats()["total_calls"] == PARTITION_CASES
        [responses] = alone.asset_materializations_for_node("geo_agent__agent_responses")
        per_call = int(responses.metadata["total_tokens"].value) // PARTITION_CASES  # type: ignore[arg-type]
        # one partition's spend: alone, each could spend (nearly) all of it; together as well
        # without a shared ledger, so about twice the budget
        daily = per_call * PARTITION_CASES

        os.environ["HOLODECK_HOME"] = str(shared / "home")
        history = (
            shared / "home" / "history.duckdb"
            if kind == "file"
            else histories(kind, tmp_path, request, monkeypatch)  # the partitions inherit it
        )
        project = geo_project(shared, url, f"budget: {{daily: {{tokens: {daily}}}}}\n")
        (shared / "dagster-home").mkdir()
        with dg.instance_for_test(temp_dir=str(shared / "dagster-home")) as instance:
            register(build_definitions(project), instance)
        server.reset()
        spawn = multiprocessing.get_context("spawn")
        with spawn.Manager() as manager, ProcessPoolExecutor(2, mp_context=spawn) as pool:
            barrier = manager.Barrier(2)
            outcomes = list(
                pool.map(_partition_in_a_process, [str(shared)] * 2, ["v1", "v2"], [barrier] * 2)
            )
        stats = server.stats()
    os.environ["HOLODECK_HOME"] = str(home)
    by_partition = {"v2": stats["by_rule"].get("0", 0), "v1": stats["by_rule"].get("1", 0)}
    # every call of both spends the same (the prompts have as many words, and the replies)
    assert stats["total_calls"] * per_call <= daily
    # which partition's calls reach the shared ledger first is a race: one may take the whole
    # budget before the other's first call, so the spend is checked in sum, not per partition
    assert sum(by_partition.values()) == stats["total_calls"]
    rows = ledger_rows(history)
    assert {row[0] for row in rows} == {"daily"}
    assert sum(row[5] for row in rows) == stats["total_calls"] * per_call  # the ledger's spend
    assert all(row[4] == row[5] for row in rows)  # every claim's rest given back
    failed = [why for ok, why in outcomes if not ok]
    assert failed, "the budget is for one partition: the two together must be stopped"
    assert all("stopped by a budget" in why and "daily budget of" in why for why in failed)
    assert all("rerun the partition to resume" in why for why in failed)


TARGET_AGENT = """\
name: served
model: {provider: openai, name: gpt-4o-mini, endpoint: "http://127.0.0.1:9", api_key: unused,
        max_tokens: 20}
instructions: {inline: "Answer briefly."}
execution: {budget: {tokens: 100}, parallel_test_cases: 1}
evaluations:
  metrics: [{type: standard, metric: equality, case_insensitive: true}]
test_cases:
"""


@pytest.mark.parametrize("pricing", [None, {"models": {"gpt-4o-mini": {"input": 1, "output": 2}}}])
def test_a_targets_calls_stop_at_the_token_budget(
    tmp_path: Path, pricing: dict[str, Any] | None
) -> None:
    state = AgentState()
    with agent_server(state) as base:
        cities = ["Paris", "Rome", "Oslo", "Bern", "Riga", "Lima"]
        (tmp_path / "agent.yaml").write_text(
            TARGET_AGENT
            + "".join(
                f"  - {{input: weather in {c}, ground_truth: It is sunny in {c}.}}\n"
                for c in cities
            )
        )
        target = {
            "http": {
                "url": f"{base}/chat",
                "body": {"input": "{{input}}"},
                "response": {"text": "output.text", "usage": "usage"},
            }
        }
        settings: dict[str, Any] = {"agents": [{"path": "agent.yaml", "target": target}]}
        if pricing:
            settings["pricing"] = pricing
        (tmp_path / "holodeck.yaml").write_text(json.dumps(settings))
        assert main(["test", str(tmp_path / "agent.yaml"), "-q"]) == 3
    run = EvalRun.model_validate_json(
        sorted((tmp_path / "results" / "served" / "holodeck-pipelines").glob("*.json"))[
            -1
        ].read_text()
    )
    cost = run.report.summary.cost
    assert cost is not None and cost.budget is not None
    # each call holds its input estimate + max_tokens (33) and spends 15 (the server's usage)
    assert cost.budget.stopped_by == "tokens" and cost.budget.spent_tokens == 75
    assert sum(state.calls.values()) == 5
    assert [r.status for r in run.report.results].count(Status.ERROR) == 1
    assert cost.headings["agent"].tokens == 75
    if pricing is None:  # a target's price is unknown unless pricing: names its model
        assert cost.total_usd is None and cost.headings["agent"].unpriced_calls == 5
    else:
        assert cost.total_usd == pytest.approx((5 * 10 * 1 + 5 * 5 * 2) / 1e6)


def test_a_backfills_budget_holds_its_runs_only(tmp_path: Path) -> None:
    with run_model_server(GEO_RULES) as server, dg.instance_for_test() as instance:
        project = geo_project(
            tmp_path, server.openai_base_url, "budget: {backfill: {tokens: 40}}\n"
        )
        defs = build_definitions(project)
        register(defs, instance)
        assert materialize(defs, instance, "v1").success  # in no backfill: not held
        unheld = server.stats()["total_calls"]
        server.reset()
        tags = {"dagster/backfill": "bf-7", "holodeck/batch": "off"}  # ordinary calls
        stopped = materialize(defs, instance, "v2", tags=tags)
        held = server.stats()["total_calls"]
    assert unheld == PARTITION_CASES and 0 < held < PARTITION_CASES
    assert not stopped.success
    [failure] = [e for e in stopped.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.step_key == "geo_agent__agent_responses"
    assert not [e for e in stopped.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    data = failure.step_failure_data.user_failure_data
    assert data is not None and "backfill budget of 40 tokens (backfill bf-7)" in (
        data.description or ""
    )
    rows = ledger_rows(project.history_db)
    assert [(scope, key) for scope, key, *_ in rows] == [("backfill", "bf-7")]
    assert rows[0][5] <= 40


def _claim_until_refused(pool: HistoryPool, barrier: Any) -> int:
    """Claim 7 tokens at a time (each booked as spent) until the pool refuses; the total."""
    step, granted = Amount(tokens=7), Amount()
    barrier.wait()
    while True:
        try:
            granted += pool.claim(granted, granted, step, step)
        except PoolRefused:
            return granted.tokens


CLAIMERS = 6


def test_claims_of_six_processes_at_once_on_a_postgres_catalog_never_pass_the_budget(
    postgres: Postgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = postgres_lake(postgres, tmp_path, "budget_claims", monkeypatch)
    monkeypatch.setenv("HOLODECK_HISTORY_LOCK_TIMEOUT", "300")  # a busy machine: wait, not fail
    pools = [HistoryPool(lake, "daily", "2026-12-01", Budget(tokens=200)) for _ in range(CLAIMERS)]
    spawn = multiprocessing.get_context("spawn")
    with spawn.Manager() as manager, ProcessPoolExecutor(CLAIMERS, mp_context=spawn) as pool:
        barrier = manager.Barrier(CLAIMERS)
        granted = list(pool.map(_claim_until_refused, pools, [barrier] * CLAIMERS))
    # every claim saw all those before it: 28 grants of 7, however they interleaved
    assert sum(granted) == 196 and sum(1 for g in granted if g) > 1
    rows = ledger_rows(lake)
    assert sorted(row[4] for row in rows) == sorted(g for g in granted if g)


def test_shared_budgets_on_a_duckdb_file_or_a_lake_and_only_the_scopes_set(
    tmp_path: Path,
) -> None:
    budgets = SharedBudgets(daily=Budget(usd=1.0))
    lake = DuckLake.parse(str(tmp_path / "lake"))  # a catalog file: one writer at a time
    [pool] = shared_pools(lake, budgets, backfill=None, today="2026-12-01")
    assert pool.claim(Amount(), Amount(), Amount(usd=0.5), Amount(usd=0.1)) == Amount(usd=0.5)
    assert shared_pools(lake, SharedBudgets(), backfill="b") == []
    [pool] = shared_pools(tmp_path / "h.duckdb", budgets, backfill="b", today="2026-12-01")
    assert (pool.scope, pool.key) == ("daily", "2026-12-01")  # no backfill budget: no pool
