"""Dagster assets on temporary instances: partitions end to end into DuckDB, checks, docs/dagster.md
failure and resume, concurrent partitions, the sensor and the nightly schedule."""

from __future__ import annotations

import inspect
import multiprocessing
import textwrap
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from holodeck_core.config.project import Project
from holodeck_core.models import EvalRun
from holodeck_core.testing import request_key, run_model_server
from holodeck_pipelines.builder import build_definitions
from holodeck_pipelines.run_tags import trigger_of
from tests.dagster_helpers import (
    check_evaluations,
    history_rows,
    instance_metadata,
    materialize,
    record_failure,
    register,
    schedule_requests,
)

RULES: dict[str, Any] = {
    "default": {"reply": "I don't know."},
    "rules": [
        {"match": {"user": "capital", "system": "geography"}, "reply": "Paris"},
        {"match": {"user": "capital"}, "reply": "Lyon"},
    ],
}


def make_project(
    root: Path,
    base_url: str,
    *,
    cases: int = 4,
    gate: float = 0.5,
    extra_versions: int = 0,
    metrics: str = "[{type: standard, metric: equality}]",
) -> Project:
    agent = root / "agents" / "geo"
    (agent / "prompts").mkdir(parents=True)
    (agent / "prompts" / "v1.md").write_text("---\nversion: v1\n---\nAnswer briefly.\n")
    (agent / "prompts" / "v2.md").write_text("---\nversion: v2\n---\nYou are a geography expert.\n")
    variants = ["prompts/v2.md"]
    for number in range(3, 3 + extra_versions):
        (agent / "prompts" / f"v{number}.md").write_text(
            f"---\nversion: v{number}\n---\nYou are geography expert number {number}.\n"
        )
        variants.append(f"prompts/v{number}.md")
    case_yaml = "".join(
        f"  - {{name: c{i}, input: 'capital of France ({i})?', ground_truth: Paris}}\n"
        for i in range(cases)
    )
    (agent / "agent.yaml").write_text(
        textwrap.dedent(f"""\
            name: Geo Agent
            model: {{provider: openai, name: m, endpoint: "{base_url}", api_key: sk-test-123456}}
            instructions: {{file: prompts/v1.md, variants: [{", ".join(variants)}]}}
            evaluations:
              gate: {{min_pass_rate: {gate}}}
              metrics: {metrics}
            test_cases:
            """)
        + case_yaml
    )
    (root / "holodeck.yaml").write_text("agents: [agents/geo/agent.yaml]\n")
    return Project.discover(root)


def test_partitions_materialize_into_duckdb_with_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("version: test-1\nmodels: {m: {input: 1000000, output: 2000000}}\n")
    monkeypatch.setenv("HOLODECK_PRICES", str(prices))  # $1 a prompt token, $2 a completion
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path, server.openai_base_url)
        defs = build_definitions(project)
        assert register(defs, instance) == ["v1", "v2"]
        v1 = materialize(defs, instance, "v1")
        v2 = materialize(defs, instance, "v2")
        [v2_history_at] = [
            record.event_log_entry.timestamp
            for record in instance.get_records_for_run(v2.run_id).records
            if record.event_log_entry.dagster_event_type
            == dg.DagsterEventType.ASSET_MATERIALIZATION
            and record.event_log_entry.step_key == "geo_agent__eval_history"
        ]
        gate_key = dg.AssetCheckKey(dg.AssetKey(["geo_agent", "eval_history"]), "pass_rate_gate")
        per_partition = {
            info.partition_key: info.latest_execution_status.value
            for info in instance.event_log_storage.get_asset_check_partition_info([gate_key])
        }
    assert v1.success and v2.success
    # each prompt version keeps its own gate result: v2 passing does not hide v1 failing
    assert per_partition == {"default|v1": "FAILED", "default|v2": "SUCCEEDED"}
    rows = history_rows(
        project, "SELECT partition_key, pass_rate, trigger FROM eval_runs ORDER BY partition_key"
    )
    assert rows == [("v1", 0.0, "manual"), ("v2", 1.0, "manual")]
    checks = {
        (data.check_name, key): data.passed
        for key, result in (("v1", v1), ("v2", v2))
        for data in check_evaluations(result)
    }
    assert checks[("pass_rate_gate", "v1")] is False  # 0% is under the 50% gate
    assert checks[("pass_rate_gate", "v2")] is True
    [v2_gate] = check_evaluations(v2, "pass_rate_gate")
    # the checks list shows the gate failed while v1 fails it: v2's description says so
    assert v2_gate.description.endswith(
        "within the gate (failing for prompt version v1 x model default)"
    )
    # and says when it was evaluated: after the materialization it checks
    assert v2_gate.metadata["evaluated_at"].value >= v2_history_at
    [v1_gate] = check_evaluations(v1, "pass_rate_gate")
    assert v1_gate.partition == "default|v1"
    assert v1_gate.description == (
        "prompt version v1 x model default: pass rate 0.0% is under the gate's 50.0%"
    )
    assert v1_gate.metadata["partition"].value == "default|v1"
    assert v1_gate.metadata["gate"].value == "min_pass_rate 50%"
    evalruns = sorted(
        (tmp_path / "agents" / "geo" / "results" / "geo-agent" / "holodeck-pipelines").glob(
            "*.json"
        )
    )
    assert len(evalruns) == 2
    materialization = instance_metadata(v2, "report_summary")
    assert materialization["pass rate (%)"].value == 100.0
    assert "equality" in [row.data["metric"] for row in materialization["metrics"].records]
    run = EvalRun.model_validate_json(evalruns[1].read_text())
    usage = run.report.summary.token_usage
    assert usage is not None and usage.total_tokens > 0
    expected_cost = usage.prompt_tokens + 2 * usage.completion_tokens
    # the IO manager's file first (a step's output metadata precedes each partition's), then
    # the cost beside the pass rate
    assert list(materialization)[:3] == ["path", "pass rate (%)", "cost (USD)"]
    assert materialization["cost (USD)"].value == pytest.approx(expected_cost, rel=1e-3)
    assert "sk-test-123456" not in evalruns[0].read_text()


def test_transient_failure_fails_the_partition_and_the_rerun_resumes(tmp_path: Path) -> None:
    failing = {
        **RULES,
        "rules": [
            {"match": {"user": r"\(3\)"}, "fault": {"kind": "503"}},
            *RULES["rules"],
        ],
    }
    with run_model_server(failing) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path, server.openai_base_url)
        defs = build_definitions(project)
        register(defs, instance)
        # ordinary calls (a backfill batches by default: tests/test_batch_dagster.py)
        tags = {"dagster/backfill": "abcdefgh", "holodeck/batch": "off"}
        first = materialize(defs, instance, "v2", tags=tags)
        assert not first.success  # docs/dagster.md: transient errors after retries fail the asset
        [failure] = [e for e in first.all_events if e.event_type_value == "STEP_FAILURE"]
        # the partition and backfill pages show the step failure: which cases, and why
        user = failure.step_failure_data.user_failure_data
        assert user is not None and user.description is not None
        assert user.description.startswith(
            "prompt version v2 x model default: 1 cases hit transient errors: "
        )
        # the step's headline is the reason, not Dagster's "Exceeded max_retries of 2"
        assert failure.step_failure_data.error is not None
        message = failure.step_failure_data.error.message
        assert user.description in message and "Exceeded max_retries" not in message
        assert "- c3: " in user.description and "503" in user.description
        [row] = user.metadata["failing_cases"].value.records  # type: ignore[attr-defined]
        assert row.data["case"] == "c3" and "503" in row.data["reason"]
        assert user.metadata["partition"].value == "default|v2"
        record_failure(defs, instance, first)
        before = server.stats()["by_key"]
        server.set_rules(RULES)  # the outage is over
        second = materialize(defs, instance, "v2")
        after = server.stats()["by_key"]
    assert second.success
    for i in range(3):  # finished before the failure: not called again
        key = request_key("responses", f"capital of France ({i})?")
        assert after[key] == before[key]
    assert (
        after[request_key("responses", "capital of France (3)?")]
        > before[request_key("responses", "capital of France (3)?")]
    )
    assert history_rows(project, "SELECT count(*), max(passed) FROM eval_runs") == [(1, 4)]
    [(job, partition, trigger, error, *configuration)] = history_rows(
        project,
        "SELECT job_name, partition_key, trigger, error, agent_slug, prompt_version, "
        "model_candidate FROM failed_runs",
    )
    assert (job, partition, trigger) == ("Geo_agent_eval", "v2", "backfill")
    # the cell's configuration, as eval_runs names it: failures and runs join on it
    assert configuration == ["geo-agent", "v2", "default"]
    assert "Steps failed" not in error  # Dagster's generic message; ours names the cases
    assert error.startswith(
        "geo_agent__agent_responses: prompt version v2 x model default: 1 cases hit"
    )
    assert "- c3: " in error


def test_a_judge_outage_fails_the_scoring_step_naming_cases_and_metric(tmp_path: Path) -> None:
    judge_down = {**RULES, "rules": [{"match": {"user": "# Task"}, "fault": {"kind": "503"}}]}
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        judge = (
            f'{{provider: openai, name: judge, endpoint: "{server.openai_base_url}", '
            "api_key: sk-judge-123456}"
        )
        geval = (
            f"[{{type: geval, name: Brief, criteria: 'short answer', model: {judge}, "
            "evaluation_params: [actual_output]}]"
        )
        project = make_project(tmp_path, server.openai_base_url, cases=2, metrics=geval)
        defs = build_definitions(project)
        register(defs, instance)
        server.set_rules({**judge_down, "rules": [*judge_down["rules"], *RULES["rules"]]})
        result = materialize(defs, instance, "v1")
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.step_key == "geo_agent__metric_results"
    user = failure.step_failure_data.user_failure_data
    assert user is not None and user.description is not None
    assert "judge calls hit transient errors: Brief: judge " in user.description
    assert "- c0: Brief: " in user.description and "- c1: Brief: " in user.description
    rows = user.metadata["failing_cases"].value.records  # type: ignore[attr-defined]
    assert [r.data["case"] for r in rows] == ["c0", "c1"]


@pytest.mark.parametrize(
    ("tags", "trigger"),
    [
        ({}, "manual"),  # launched from the UI: Dagster adds no tag
        ({"dagster/backfill": "abc"}, "backfill"),
        ({"dagster/schedule_name": "geo_agent_nightly"}, "nightly"),
        ({"dagster/sensor_name": "geo_agent_prompt_versions"}, "sensor"),
        ({"holodeck/trigger": "nightly", "dagster/backfill": "abc"}, "nightly"),
    ],
)
def test_trigger_comes_from_the_run_tags(tags: dict[str, str], trigger: str) -> None:
    assert trigger_of(tags).value == trigger


def test_a_partition_without_a_snapshot_fails_at_once_naming_the_versions(tmp_path: Path) -> None:
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path, server.openai_base_url)
        defs = build_definitions(project)
        register(defs, instance)
        instance.add_dynamic_partitions("geo_agent_prompt_versions", ["v9"])  # the UI's "Add"
        result = materialize(defs, instance, "v9")
        calls = server.stats()["total_calls"]
    assert not result.success and calls == 0
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.step_key == "geo_agent__processed_files"  # the first step, no retries
    assert not [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    user = failure.step_failure_data.user_failure_data
    assert user is not None and user.description is not None
    assert "prompt version 'v9' is not registered" in user.description
    assert "(registered: v1, v2)" in user.description


def _materialize_in_process(root: str, key: str, home: str) -> bool:
    import os

    os.environ["HOLODECK_HOME"] = home
    os.environ["DAGSTER_HOME"] = str(Path(root) / "dagster-home")
    project = Project.discover(Path(root))
    defs = build_definitions(project)
    with dg.DagsterInstance.get() as instance:
        return materialize(defs, instance, key).success


def test_four_partitions_at_once_all_land_without_lock_errors(tmp_path: Path) -> None:
    import os

    rules = {**RULES, "rules": [{**r, "latency": 0.05} for r in RULES["rules"]]}
    keys = ["v1", "v2", "v3", "v4"]
    with run_model_server(rules) as server:
        project = make_project(tmp_path, server.openai_base_url, cases=8, extra_versions=2)
        (tmp_path / "dagster-home").mkdir()
        with dg.instance_for_test(temp_dir=str(tmp_path / "dagster-home")) as instance:
            register(build_definitions(project), instance)
        home = os.environ["HOLODECK_HOME"]
        # an executor shuts down gracefully; Pool.__exit__ terminates workers and can hang
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=4, mp_context=spawn) as pool:
            results = list(pool.map(_materialize_in_process, [str(tmp_path)] * 4, keys, [home] * 4))
    assert results == [True] * 4
    assert history_rows(
        project,
        "SELECT count(DISTINCT run_id), count(*), count(DISTINCT partition_key) FROM eval_runs",
    ) == [(4, 4, 4)]


def test_nightly_schedule_requests_one_run_per_active_version(tmp_path: Path) -> None:
    defs = build_definitions(make_project(tmp_path, "http://127.0.0.1:9/v1"))
    assert defs.resolve_schedule_def("geo_agent_nightly").cron_schedule == "0 2 * * *"
    tick = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
    requests = schedule_requests(defs, "geo_agent_nightly", tick)
    assert sorted(r.partition_key or "" for r in requests) == ["default|v1", "default|v2"]
    assert all(r.tags["holodeck/trigger"] == "nightly" for r in requests)
    assert {r.run_key for r in requests} == {
        "nightly:2026-11-30:default|v1",
        "nightly:2026-11-30:default|v2",
    }


def test_sensor_registers_a_reused_label_as_its_own_partition(tmp_path: Path) -> None:
    with dg.instance_for_test() as instance:
        project = make_project(tmp_path, "http://127.0.0.1:9/v1")
        defs = build_definitions(project)
        assert register(defs, instance) == ["v1", "v2"]
        prompt = tmp_path / "agents" / "geo" / "prompts" / "v1.md"
        prompt.write_text("---\nversion: v1\n---\nAnswer briefly, please.\n")
        keys = register(defs, instance)
    assert len(keys) == 3 and keys[0] == "v1" and keys[1].startswith("v1+") and keys[2] == "v2"
    stored = (project.prompts_dir / "geo-agent" / "v1.json").read_text()
    assert '"body": "Answer briefly."' in stored  # the old snapshot is intact


def test_definitions_are_grouped_partitioned_and_described(tmp_path: Path) -> None:
    project = make_project(tmp_path, "http://127.0.0.1:9/v1")
    defs = build_definitions(project)
    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert keys == {
        "geo_agent/processed_files",
        "geo_agent/agent_responses",
        "geo_agent/metric_results",
        "geo_agent/report_summary",
        "geo_agent/eval_history",
    }
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assert node.group_name == "geo_agent" and node.partitions_def is not None
        assert node.description and node.kinds
    assert graph.get(dg.AssetKey(["geo_agent", "agent_responses"])).pools == {"llm_api"}
    assert graph.get(dg.AssetKey(["geo_agent", "eval_history"])).pools == {"history_db"}
    checks = {key.name for key in graph.asset_check_keys}
    assert checks == {
        "pass_rate_gate",
        "no_regression",
        "matrix_vs_baseline",
        "no_errored_cases",
        "judge_drift",
        "judge_agreement",
    }
    # Markdown in the UI: a bare <slug>/<timestamp> renders as "results//.json"
    summary = graph.get(dg.AssetKey(["geo_agent", "report_summary"])).description or ""
    assert "(`results/<slug>/<timestamp>.json`)" in summary
    assert "<" not in summary.replace("`results/<slug>/<timestamp>.json`", "")


def test_only_the_stages_that_call_models_open_a_runtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SDK clients, judges, the journal and tool runtimes (a SuiteRuntime) are opened by
    agent_responses and metric_results only; processed_files and report_summary build the
    cheap plan (cases, prompt, fingerprints) and nothing else."""
    from holodeck_core.runner.runtime import SuiteRuntime

    opened_by: list[str] = []
    original = SuiteRuntime.__init__
    assets = {"processed_files", "agent_responses", "metric_results", "report_summary"}

    def spy(self: SuiteRuntime, suite: Any) -> None:
        opened_by.extend(f.function for f in inspect.stack() if f.function in assets)
        original(self, suite)

    monkeypatch.setattr(SuiteRuntime, "__init__", spy)
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path, server.openai_base_url, cases=2)
        defs = build_definitions(project)
        register(defs, instance)
        assert materialize(defs, instance, "v2").success
    assert opened_by == ["agent_responses", "metric_results"]
