"""The cells of one run share one loop, one limit per endpoint, one budget and one set of
batches (docs/dagster.md, docs/cost.md): a single-run backfill of the agent's grid on a real
Dagster instance against the loopback model server sends each round of all its cells as one
batch with the verdicts of an ordinary run, keeps the endpoint's one limit while its cells run at
once, stops at the agent's budget over the run (its metric step after its agent step's spend)
and lets the other cells finish when one cannot start; a ``holodeck matrix`` killed while it
waits on its shared batch is rerun without a request sent twice, each cell from its own
journal; a candidate with its own API key gets batches of its own."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from holodeck_core.calls.batch import Batches, BatchItem, BatchRounds
from holodeck_core.config.project import Project
from holodeck_core.engine.cells import run_cells
from holodeck_core.errors import ExecutionError
from holodeck_core.runner.options import SuiteOptions
from holodeck_core.testing import run_model_server
from holodeck_pipelines.builder import build_definitions
from tests.test_matrix import RULES as MATRIX_RULES
from tests.test_matrix import write_project
from tests.test_pipelines import history_rows, register
from tests.test_pipelines_matrix import EXPERT_ONLY, matrix_project
from tests.test_single_run_backfill import materialize_range, range_tags

ALL_CELLS = range_tags("default|v1", "large|v2")
FOUR = {"default|v1", "default|v2", "large|v1", "large|v2"}


def grid_project(root: Path, url: str, *, cases: int, execution: str = "") -> Project:
    """Geo Agent's 2 x 2 grid (v1, v2 x its own model, ``large``), both on one endpoint."""
    project = matrix_project(root, url, url, cases=cases)
    agent = root / "agents" / "geo" / "agent.yaml"
    text = agent.read_text().replace("sk-test-123456}", "sk-test-123456, max_tokens: 20}")
    agent.write_text(text + (f"execution: {execution}\n" if execution else ""))
    return project


def materialized(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, dict[str, Any]]:
    """Each cell's metadata on ``asset``'s materialization, by partition."""
    return {
        str(e.partition): {k: getattr(v, "value", v) for k, v in e.materialization.metadata.items()}
        for e in result.get_asset_materialization_events()
        if e.asset_key.path[-1] == asset
    }


def verdicts(project: Project, *, batched: bool) -> list[tuple[Any, ...]]:
    """Every case's status per cell, of the batched runs or of the others."""
    return history_rows(
        project,
        "SELECT r.model_candidate, r.partition_key, c.case_id, c.status "
        "FROM eval_runs r JOIN test_results c USING (run_id) JOIN v_cost_by_run v "
        f"USING (run_id) WHERE (v.batch_calls IS NOT NULL) = {batched} ORDER BY 1, 2, 3",
    )


def test_a_batched_backfill_sends_each_round_of_all_its_cells_as_one_batch(
    tmp_path: Path,
) -> None:
    with run_model_server(EXPERT_ONLY) as server, dg.instance_for_test() as instance:
        plain = grid_project(tmp_path / "plain", server.openai_base_url, cases=3)
        defs = build_definitions(plain)
        register(defs, instance)
        ordinary = materialize_range(defs, instance, {**ALL_CELLS, "holodeck/batch": "off"})
    with run_model_server(EXPERT_ONLY) as server, dg.instance_for_test() as instance:
        batched = grid_project(tmp_path / "batched", server.openai_base_url, cases=3)
        defs = build_definitions(batched)
        register(defs, instance)
        result = materialize_range(defs, instance, {**ALL_CELLS, "holodeck/batch": "on"})
        stats = server.stats()
    assert ordinary.success and result.success
    assert stats["total_calls"] == 0
    # the four cells' 12 agent turns in one batch (one round), not one batch per cell
    assert stats["batches"]["submitted"] == 1
    assert stats["batches"]["requests"]["submitted"] == 12
    responses = materialized(result, "agent_responses")
    assert set(responses) == FOUR and all(m["model_calls"] == 3 for m in responses.values())
    assert len(verdicts(plain, batched=False)) == 12
    assert verdicts(batched, batched=True) == verdicts(plain, batched=False)
    # each cell's EvalRun counts its own requests of the shared batch
    rows = history_rows(batched, "SELECT batch_calls FROM v_cost_by_run WHERE batch_calls > 0")
    assert rows == [(3,)] * 4


def test_the_cells_of_a_run_meet_one_endpoint_limit_and_run_at_once(tmp_path: Path) -> None:
    """One slow case per cell, two at a time on the endpoint: the four cells together never
    pass 2 in flight (one limit, not one per cell) and do reach it (their calls overlap)."""
    with (
        run_model_server(EXPERT_ONLY, latency=0.5) as server,
        dg.instance_for_test() as instance,
    ):
        project = grid_project(
            tmp_path, server.openai_base_url, cases=1, execution="{parallel_test_cases: 2}"
        )
        defs = build_definitions(project)
        register(defs, instance)
        result = materialize_range(defs, instance, ALL_CELLS)
        stats = server.stats()
    assert result.success
    assert stats["total_calls"] == 4
    assert stats["peak_concurrency"] == 2


def test_the_agents_budget_holds_the_runs_cells_together_not_each_cell(tmp_path: Path) -> None:
    """A token budget one cell fits in (half as much again as the most one cell spends) and
    the run's cells together do not: the run stops within it, its unpaid cases budget-stopped."""
    with run_model_server(EXPERT_ONLY) as server, dg.instance_for_test() as instance:
        measured = grid_project(tmp_path / "measured", server.openai_base_url, cases=12)
        defs = build_definitions(measured)
        register(defs, instance)
        full = materialize_range(defs, instance, range_tags("default|v1", "default|v2"))
        spent = {k: m["total_tokens"] for k, m in materialized(full, "agent_responses").items()}
    budget = int(max(spent.values()) * 1.5)
    assert full.success and sum(spent.values()) > budget
    limit = f"{{parallel_test_cases: 1, budget: {{tokens: {budget}}}}}"
    with run_model_server(EXPERT_ONLY) as server, dg.instance_for_test() as instance:
        project = grid_project(tmp_path / "budget", server.openai_base_url, cases=12,
                               execution=limit)  # fmt: skip
        defs = build_definitions(project)
        register(defs, instance)
        alone = materialize_range(defs, instance, range_tags("default|v1", "default|v1"))
        both = materialize_range(
            defs, instance, {**range_tags("default|v1", "default|v2"), "holodeck/batch": "off"}
        )
    assert alone.success  # one cell alone fits
    assert not both.success
    [failure] = [e for e in both.all_events if e.event_type_value == "STEP_FAILURE"]
    data = failure.step_failure_data.user_failure_data
    assert data is not None and "were stopped by a budget" in (data.description or "")
    assert "execution.budget, over every cell" in (data.description or "")
    stopped = {
        key.split("/")[0]: value.value
        for key, value in data.metadata.items()
        if key.endswith("/total_tokens")
    }
    assert stopped  # a cell whose cases all ran spent what it spent alone
    assert sum(stopped.get(cell, spent[cell]) for cell in spent) <= budget


def test_a_matrix_killed_while_it_waits_on_its_shared_batch_sends_no_request_twice(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HOLODECK_HOME": str(tmp_path / "home")}
    rules = {**MATRIX_RULES, "batches": {"complete_after": 4.0}}
    with run_model_server(rules) as server:
        agent = write_project(tmp_path, server.openai_base_url, cases=3)
        command = [sys.executable, "-m", "holodeck_core.cli", "matrix", str(agent)]
        command += ["--batch", "on"]
        first = subprocess.Popen(command, env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
        assert first.stderr is not None
        for line in first.stderr:
            if "requests submitted" in line:  # journaled in every cell's log before the wait
                first.send_signal(signal.SIGKILL)
                break
        first.wait(timeout=30)
        assert first.returncode == -signal.SIGKILL
        killed = dict(server.stats())
        second = subprocess.run(
            command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        after = dict(server.stats())
    assert killed["batches"]["submitted"] == 1  # the four cells' cases in one batch
    assert killed["batches"]["requests"]["submitted"] == 12
    assert second.returncode == 0, second.stderr
    assert after["total_calls"] == 0
    assert after["batches"]["requests"]["submitted"] == 12  # not one request twice
    # each cell found its three requests in its own journal
    assert second.stderr.count("3 answers from batches an earlier run submitted") == 4
    assert "batch: v2:large: batches: 0 submitted with 0 requests, 1 done" in second.stderr
    journals = list((tmp_path / "home").rglob("*.batches.jsonl*"))
    assert len(journals) == 4, journals


def test_cells_with_another_api_key_on_the_endpoint_get_batches_of_their_own(
    tmp_path: Path,
) -> None:
    """``large`` carries its own key: its requests never ride in a batch submitted with the
    agent's key (one batch per credential and round), and neither key reaches a journal."""
    env = {**os.environ, "HOLODECK_HOME": str(tmp_path / "home")}
    with run_model_server(MATRIX_RULES) as server:
        agent = write_project(tmp_path, server.openai_base_url, cases=2)
        settings = tmp_path / "holodeck.yaml"
        settings.write_text(
            settings.read_text().replace("{name: gpt-4o}", "{name: gpt-4o, api_key: sk-other-9876}")
        )
        command = [sys.executable, "-m", "holodeck_core.cli", "matrix", str(agent)]
        done = subprocess.run(
            [*command, "--batch", "on"], env=env, cwd=tmp_path, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        stats = server.stats()
    assert done.returncode == 0, done.stderr
    assert stats["total_calls"] == 0
    assert stats["batches"]["submitted"] == 2  # mini's cells together, large's together
    assert stats["batches"]["requests"]["submitted"] == 8
    journals = list((tmp_path / "home").rglob("*.batches.jsonl*"))
    assert len(journals) == 4
    for journal in journals:
        text = journal.read_text()
        assert "sk-other-9876" not in text and "sk-test-key-1234" not in text


class EchoBatches:
    """A batch API that answers every request with its body, keeping each batch's requests."""

    key = "echo /v1/x"
    credential = ""

    def __init__(self) -> None:
        self.batches: list[list[tuple[str, dict[str, Any]]]] = []

    async def submit(self, requests: list[tuple[str, dict[str, Any]]]) -> str:
        self.batches.append(requests)
        return f"b{len(self.batches) - 1}"

    async def status(self, batch_id: str) -> str:
        return "completed"

    async def results(self, batch_id: str) -> dict[str, BatchItem]:
        return {c: BatchItem(body=b) for c, b in self.batches[int(batch_id[1:])]}

    async def cancel(self, batch_id: str) -> None:
        return None


class MemoryLog:
    def __init__(self, scope: str) -> None:
        self.scope = scope
        self.entries: list[dict[str, Any]] = []

    def submitted(self) -> list[dict[str, Any]]:
        return self.entries

    def record(self, entry: dict[str, Any]) -> None:
        self.entries.append(entry)


def test_two_cells_asking_the_same_body_share_a_batch_with_ids_of_their_own() -> None:
    """A judge asked the same question by two cells: one batch, two custom_ids, each in its
    own cell's log, and the same ids again on a rerun (what a killed run's rerun finds)."""

    async def go() -> tuple[list[Any], list[MemoryLog], EchoBatches]:
        api, rounds = EchoBatches(), BatchRounds(gather=0.01)
        logs = [MemoryLog("cell-a"), MemoryLog("cell-b")]
        cells = [Batches(lambda log=log: log, rounds=rounds) for log in logs]
        try:
            answers = await asyncio.gather(*(c.request(api, {"q": 1}) for c in cells))
        finally:
            await rounds.aclose()
        return answers, logs, api

    answers, logs, api = asyncio.run(go())
    assert answers == [{"q": 1}, {"q": 1}]
    [batch] = api.batches
    ids = [custom_id for custom_id, _ in batch]
    assert len(set(ids)) == 2
    assert [log.entries[0]["custom_ids"] for log in logs] == [[ids[0]], [ids[1]]]
    _, _, rerun = asyncio.run(go())
    assert [custom_id for custom_id, _ in rerun.batches[0]] == ids


def test_a_cell_whose_stage_fails_leaves_the_others_running_to_the_end() -> None:
    async def stage(key: str, suite: Any) -> str:
        if key == "bad":
            raise ExecutionError("the tool server did not start")
        await asyncio.sleep(0.05)
        return f"{key} done"

    class Plain:
        options = SuiteOptions()

    outcomes = asyncio.run(run_cells({"bad": Plain(), "good": Plain()}, stage))  # type: ignore[dict-item]
    assert isinstance(outcomes["bad"], ExecutionError)
    assert outcomes["good"] == "good done"


JUDGED: dict[str, Any] = {
    "rules": [
        {"match": {"user": "Task: write G-Eval evaluation steps"}, "json": {"steps": ["a", "b"]}},
        {"match": {"user": "Task: score a test case"}, "json": {"score": 8, "reason": "fine"}},
        {"match": {"user": "capital"}, "reply": "Paris"},
    ]
}


def judged_project(root: Path, url: str, execution: str = "") -> Project:
    """Geo Agent (v1, v2: long prompts) judged by G-Eval on the same server, 3 cases."""
    project = grid_project(root, url, cases=3, execution=execution)
    agent = root / "agents" / "geo" / "agent.yaml"
    words = " ".join(f"w{i}" for i in range(60))
    for version in ("v1", "v2"):
        prompt = agent.parent / "prompts" / f"{version}.md"
        prompt.write_text(prompt.read_text() + words + "\n")
    judge = (
        f'{{provider: openai, name: judge, endpoint: "{url}", api_key: sk-judge-1, max_tokens: 30}}'
    )
    agent.write_text(
        agent.read_text().replace(
            "metrics: [{type: standard, metric: equality}]",
            f"metrics: [{{type: geval, name: Right, criteria: 'Is it right?', model: {judge}}}]",
        )
    )
    return project


def test_the_metric_step_spends_what_the_agent_step_left_of_the_runs_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's budget fits both cells' agent turns, each cell's whole run and both cells'
    judges alone, not the judges on top of the agent turns: the metric step starts from what
    the agent step spent, the judges it leaves no room for are refused (those cases ERROR) and
    the run stays within it."""
    with run_model_server(JUDGED) as server, dg.instance_for_test() as instance:
        monkeypatch.setenv("HOLODECK_HOME", str(tmp_path / "measured-home"))
        measured = judged_project(tmp_path / "measured", server.openai_base_url)
        defs = build_definitions(measured)
        register(defs, instance)
        assert materialize_range(defs, instance, range_tags("default|v1", "default|v2")).success
        spent = dict(history_rows(measured, "SELECT prompt_version, tokens FROM v_cost_by_run"))
        agents = history_rows(
            measured,
            "SELECT sum(c.prompt_tokens + c.completion_tokens) FROM eval_runs JOIN call_costs c "
            "USING (run_id) WHERE c.heading = 'agent'",
        )[0][0]
    judges = sum(spent.values()) - agents
    budget = agents + judges // 2  # the agent turns' and half the judges'
    assert max(spent.values()) < budget  # each cell's whole run fits alone
    assert judges < budget  # and both cells' judges without the agent turns
    with run_model_server(JUDGED) as server, dg.instance_for_test() as instance:
        monkeypatch.setenv("HOLODECK_HOME", str(tmp_path / "budget-home"))
        limit = f"{{parallel_test_cases: 1, budget: {{tokens: {budget}}}}}"
        project = judged_project(tmp_path / "budget", server.openai_base_url, limit)
        defs = build_definitions(project)
        register(defs, instance)
        tags = {**range_tags("default|v1", "default|v2"), "holodeck/batch": "off"}
        result = materialize_range(defs, instance, tags)
        used = history_rows(project, "SELECT sum(tokens) FROM v_cost_by_run")[0][0]
        errored = history_rows(project, "SELECT count(*) FROM test_results WHERE status = 'ERROR'")[
            0
        ][0]
    assert result.success  # the agent step fits: judges the budget refused are ERROR cases
    assert errored > 0
    assert used <= budget


def test_a_cell_that_cannot_start_fails_the_step_by_name_and_the_others_keep_their_work(
    tmp_path: Path,
) -> None:
    """``alt`` (listed first) has no API key: its agent stage fails (exit 2, not retried), while
    the run's other cell runs every case to its journal; materialized alone afterwards, that
    cell resumes them all without a call."""
    with run_model_server(EXPERT_ONLY) as server, dg.instance_for_test() as instance:
        grid_project(tmp_path, server.openai_base_url, cases=2)
        (tmp_path / "holodeck.yaml").write_text(
            "agents:\n  - path: agents/geo/agent.yaml\n    models:\n"
            "      alt: {provider: anthropic, name: m-alt, api_key: null}\n      default: {}\n"
        )
        defs = build_definitions(Project.discover(tmp_path))
        register(defs, instance)
        failed = materialize_range(defs, instance, range_tags("alt|v1", "default|v1"))
        calls = server.stats()["total_calls"]
        again = materialize_range(defs, instance, range_tags("default|v1", "default|v1"))
        after = server.stats()["total_calls"]
        resumed = materialized(again, "agent_responses")["default|v1"]["resumed_from_journal"]
    assert not failed.success
    [failure] = [e for e in failed.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.step_key == "geo_agent__agent_responses"
    assert not [e for e in failed.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    data = failure.step_failure_data.user_failure_data
    assert data is not None and data.description is not None
    assert data.description.startswith("prompt version v1 x model alt: model.api_key is not set")
    assert calls == 2  # the default cell ran both its cases beside the failing one
    assert again.success and resumed == 2 and after == calls
