"""The agent's grid in Dagster (docs/dagster.md): assets partitioned by prompt version x model
candidate on a real instance, each cell its own configuration in the history; a failed cell
re-executed calls the model only for its unfinished cases; a single-run backfill of the whole
matrix; the matrix check's BH-adjusted verdicts against the baseline cell; the schedule's
requests; and an agent without ``models:`` (one column, ``default``)."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from holodeck_core.cli.main import main
from holodeck_core.config.project import Project
from holodeck_core.testing import request_key, run_model_server
from holodeck_pipelines.builder import build_definitions
from tests.dagster_helpers import (
    check_evaluations,
    history_rows,
    materialize_range,
    range_tags,
    register,
    schedule_requests,
)

ALWAYS_PARIS: dict[str, Any] = {"default": {"reply": "Paris"}}
EXPERT_ONLY: dict[str, Any] = {  # the own model answers well only with the expert prompt
    "default": {"reply": "I don't know."},
    "rules": [
        {"match": {"user": "capital", "system": "geography"}, "reply": "Paris"},
        {"match": {"user": "capital"}, "reply": "Lyon"},
    ],
}
HISTORY = dg.AssetKey(["geo_agent", "eval_history"])


def matrix_project(root: Path, own_url: str, large_url: str, *, cases: int) -> Project:
    """Geo Agent with v1 (the expert prompt: the baseline row), v2 (a terse one) and two
    candidates: its own model and ``large`` on another endpoint; nightly leaves ``large`` out
    unless ``large_nightly``."""
    agent = root / "agents" / "geo"
    (agent / "prompts").mkdir(parents=True)
    (agent / "prompts" / "v1.md").write_text("---\nversion: v1\n---\nYou are a geography expert.\n")
    (agent / "prompts" / "v2.md").write_text("---\nversion: v2\n---\nAnswer briefly.\n")
    cases_yaml = "".join(
        f"  - {{name: c{i}, input: 'capital of France ({i})?', ground_truth: Paris}}\n"
        for i in range(cases)
    )
    (agent / "agent.yaml").write_text(
        textwrap.dedent(f"""\
            name: Geo Agent
            model: {{provider: openai, name: m, endpoint: "{own_url}", api_key: sk-test-123456}}
            instructions: {{file: prompts/v1.md, variants: [prompts/v2.md]}}
            evaluations:
              gate: {{min_pass_rate: 0.5}}
              metrics: [{{type: standard, metric: equality}}]
            test_cases:
            """)
        + cases_yaml
    )
    (root / "holodeck.yaml").write_text(
        "agents:\n"
        "  - path: agents/geo/agent.yaml\n"
        "    models:\n"
        "      default: {}\n"
        f"      large: {{name: m-large, endpoint: '{large_url}', nightly: false}}\n"
    )
    return Project.discover(root)


def evaluations_of(result: dg.ExecuteInProcessResult, check: str) -> dict[str, Any]:
    return {data.partition: data for data in check_evaluations(result, check)}


def test_a_single_run_backfill_of_the_matrix_records_four_configurations_with_matrix_verdicts(
    tmp_path: Path,
) -> None:
    with (
        run_model_server(EXPERT_ONLY) as own,
        run_model_server(ALWAYS_PARIS) as large,
        dg.instance_for_test() as instance,
    ):
        project = matrix_project(tmp_path, own.openai_base_url, large.openai_base_url, cases=5)
        defs = build_definitions(project)
        assert register(defs, instance) == ["v1", "v2"]
        result = materialize_range(defs, instance, range_tags("default|v1", "large|v2"))
        [run] = instance.get_runs()
        materialized = {
            e.partition for e in result.get_asset_materialization_events() if e.asset_key == HISTORY
        }
        matrix = evaluations_of(result, "matrix_vs_baseline")
        gates = evaluations_of(result, "pass_rate_gate")
    assert result.success
    cells = {"default|v1", "default|v2", "large|v1", "large|v2"}
    assert materialized == cells and run.tags["holodeck/prompt_version"] == "v1, v2"
    rows = history_rows(
        project,
        "SELECT partition_key, model_candidate, pass_rate FROM eval_runs ORDER BY 2, 1",
    )
    assert rows == [
        ("v1", "default", 1.0),
        ("v2", "default", 0.0),
        ("v1", "large", 1.0),
        ("v2", "large", 1.0),
    ]
    assert {key: gate.passed for key, gate in gates.items()} == {
        "default|v1": True,
        "default|v2": False,
        "large|v1": True,
        "large|v2": True,
    }
    # the baseline cell (v1 x the own model) is not compared with itself: skipped
    assert set(matrix) == cells - {"default|v1"}
    worse = matrix["default|v2"]
    values = {k: getattr(v, "value", v) for k, v in worse.metadata.items()}
    # 5 of 5 cases lost: McNemar's mid-p 1/32 is under 0.05 alone, but adjusted over the
    # cells evaluated together (Benjamini-Hochberg) it is not: no significant drop
    assert values["p_value"] < 0.05 < values["p_adjusted"]
    assert values["adjustment"] == "bh" and values["family_size"] >= 2
    assert worse.passed and values["verdict"] == "no significant change"
    assert worse.description.startswith(
        "prompt version v2 x model default: against the baseline cell (prompt version v1 x "
        "model default, run "
    )


def test_a_clear_drop_against_the_baseline_cell_fails_the_matrix_check(tmp_path: Path) -> None:
    with (
        run_model_server(EXPERT_ONLY) as own,
        run_model_server(ALWAYS_PARIS) as large,
        dg.instance_for_test() as instance,
    ):
        project = matrix_project(tmp_path, own.openai_base_url, large.openai_base_url, cases=10)
        defs = build_definitions(project)
        register(defs, instance)
        result = materialize_range(defs, instance, range_tags("default|v1", "large|v2"))
        matrix = evaluations_of(result, "matrix_vs_baseline")
    worse = matrix["default|v2"]
    values = {k: getattr(v, "value", v) for k, v in worse.metadata.items()}
    assert values["p_adjusted"] < 0.05 and values["verdict"] == "regression"
    assert not worse.passed and worse.severity == dg.AssetCheckSeverity.WARN
    assert matrix["large|v2"].passed and matrix["large|v1"].passed


def test_a_failed_cell_reexecuted_calls_the_model_only_for_its_unfinished_cases(
    tmp_path: Path,
) -> None:
    outage = {"rules": [{"match": {"user": r"\(3\)"}, "fault": {"kind": "503"}}], **ALWAYS_PARIS}
    with (
        run_model_server(EXPERT_ONLY) as own,
        run_model_server(outage) as large,
        dg.instance_for_test() as instance,
    ):
        project = matrix_project(tmp_path, own.openai_base_url, large.openai_base_url, cases=4)
        defs = build_definitions(project)
        register(defs, instance)
        job = defs.resolve_job_def("Geo_agent_eval")
        first = job.execute_in_process(
            partition_key="large|v1", instance=instance, raise_on_error=False
        )
        before = large.stats()["by_key"]
        large.set_rules(ALWAYS_PARIS)
        second = job.execute_in_process(partition_key="large|v1", instance=instance)
        after = large.stats()["by_key"]
        own_calls = own.stats()["total_calls"]
    assert not first.success and second.success
    [failure] = [e for e in first.all_events if e.event_type_value == "STEP_FAILURE"]
    user = failure.step_failure_data.user_failure_data
    assert user is not None and user.description is not None
    assert user.description.startswith("prompt version v1 x model large: 1 cases hit")
    for i in range(3):  # finished before the outage: journaled, not called again
        key = request_key("responses", f"capital of France ({i})?")
        assert after[key] == before[key]
    failed = request_key("responses", "capital of France (3)?")
    assert after[failed] > before[failed]
    assert own_calls == 0  # the own model's cells were never asked for
    assert history_rows(project, "SELECT partition_key, model_candidate FROM eval_runs") == [
        ("v1", "large")
    ]


def test_the_nightly_schedule_requests_the_active_versions_times_its_candidates(
    tmp_path: Path,
) -> None:
    project = matrix_project(tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", cases=1)
    tick = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
    requests = schedule_requests(build_definitions(project), "geo_agent_nightly", tick)
    # large says nightly: false, so the schedule leaves its column out
    assert sorted(r.partition_key or "" for r in requests) == ["default|v1", "default|v2"]
    settings = tmp_path / "holodeck.yaml"
    settings.write_text(settings.read_text().replace(", nightly: false", ""))
    defs = build_definitions(Project.discover(tmp_path))
    requests = schedule_requests(defs, "geo_agent_nightly", tick)
    assert sorted(r.partition_key or "" for r in requests) == [
        "default|v1",
        "default|v2",
        "large|v1",
        "large|v2",
    ]


def test_every_agent_is_partitioned_by_prompt_version_and_model(tmp_path: Path) -> None:
    project = matrix_project(tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", cases=1)
    graph = build_definitions(project).resolve_asset_graph()
    partitions = graph.get(HISTORY).partitions_def
    assert isinstance(partitions, dg.MultiPartitionsDefinition)
    dimensions = {d.name: d.partitions_def for d in partitions.partitions_defs}
    assert set(dimensions) == {"prompt", "model"}
    assert isinstance(dimensions["prompt"], dg.DynamicPartitionsDefinition)
    assert dimensions["model"].get_partition_keys() == ["default", "large"]
    # without models: the same kind of partitioning, one column
    (tmp_path / "holodeck.yaml").write_text("agents: [agents/geo/agent.yaml]\n")
    graph = build_definitions(Project.discover(tmp_path)).resolve_asset_graph()
    alone = graph.get(HISTORY).partitions_def
    assert isinstance(alone, dg.MultiPartitionsDefinition)
    [model] = [d.partitions_def for d in alone.partitions_defs if d.name == "model"]
    assert model.get_partition_keys() == ["default"]


def test_the_sensor_adds_rows_and_launches_every_cell_of_a_new_version(tmp_path: Path) -> None:
    matrix_project(tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", cases=1)
    settings = tmp_path / "holodeck.yaml"
    settings.write_text(settings.read_text() + "launch_new_versions: true\n")
    defs = build_definitions(Project.discover(tmp_path))
    sensor = defs.resolve_sensor_def("geo_agent_prompt_versions")
    with (
        dg.instance_for_test() as instance,
        dg.build_sensor_context(instance=instance, resources=defs.resources) as context,
    ):
        result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    [added] = result.dynamic_partitions_requests or []
    assert isinstance(added, dg.AddDynamicPartitionsRequest)
    assert list(added.partition_keys or []) == ["v1", "v2"]  # rows: the prompt dimension
    assert sorted(r.partition_key or "" for r in result.run_requests or []) == [
        "default|v1",
        "default|v2",
        "large|v1",
        "large|v2",
    ]


def test_the_partitions_command_says_the_grid_on_a_fresh_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = matrix_project(tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", cases=1)
    home = tmp_path / "dagster-home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.chdir(project.root)
    assert main(["partitions"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "geo_agent: prompt versions v1, v2 x models default, large (4 cells); added v1, v2"
    ]
    with dg.DagsterInstance.get() as instance:
        job = build_definitions(project).resolve_job_def("Geo_agent_eval")
        assert job.partitions_def is not None
        keys = job.partitions_def.get_partition_keys(dynamic_partitions_store=instance)
    assert sorted(keys) == ["default|v1", "default|v2", "large|v1", "large|v2"]
