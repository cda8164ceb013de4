"""A backfill of many prompt versions as one run (docs/scale-out.md): what Dagster's
single-run backfill launches (one run over a partition range, its ``dagster/backfill`` tag),
on a real instance. Each version gets its own materialization of every asset and its own
evaluation of every check; a failed run re-executed calls the model only for unfinished cases;
the backfill's shared budget holds the whole run; ``backfill_versions_per_run`` splits it."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from holodeck_core.config.project import Project
from holodeck_core.errors import ConfigError
from holodeck_core.testing import request_key, run_model_server
from holodeck_pipelines.builder import build_definitions
from tests.dagster_helpers import (
    check_evaluations,
    history_rows,
    materialize_range,
    range_tags,
    record_failure,
    register,
)
from tests.test_pipelines import RULES, make_project
from tests.test_shared_budgets import GEO_RULES, PARTITION_CASES, geo_project, ledger_rows

ASSETS = ["processed_files", "agent_responses", "metric_results", "report_summary", "eval_history"]
VERSIONS = ("v1", "v2", "v3")
CELLS = tuple(f"default|{v}" for v in VERSIONS)


def step_failure(result: dg.ExecuteInProcessResult) -> dg.DagsterEvent:
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    return failure


def test_a_backfill_of_three_versions_is_one_run_with_each_versions_events(
    tmp_path: Path,
) -> None:
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path, server.openai_base_url, extra_versions=1)
        defs = build_definitions(project)
        assert register(defs, instance) == list(VERSIONS)
        result = materialize_range(defs, instance, range_tags("default|v1", "default|v3"))
        materialized = {
            (e.asset_key.path[-1], e.partition): dict(e.materialization.metadata)
            for e in result.get_asset_materialization_events()
        }
        gate = dg.AssetCheckKey(dg.AssetKey(["geo_agent", "eval_history"]), "pass_rate_gate")
        statuses = {
            info.partition_key: info.latest_execution_status.value
            for info in instance.event_log_storage.get_asset_check_partition_info([gate])
        }
        evaluations = check_evaluations(result)
        [run] = instance.get_runs()
        calls = server.stats()["by_key"]
    assert result.success
    # one materialization per asset and prompt version, each with its own numbers
    assert set(materialized) == {(a, v) for a in ASSETS for v in CELLS}
    pass_rates = {v: materialized[("report_summary", v)]["pass rate (%)"].value for v in CELLS}
    assert pass_rates == {"default|v1": 0.0, "default|v2": 100.0, "default|v3": 100.0}
    assert len({materialized[("eval_history", v)]["run_id"].value for v in CELLS}) == 3
    assert all(materialized[("agent_responses", v)]["cases"].value == 4 for v in CELLS)
    assert all(materialized[("agent_responses", v)]["model_calls"].value == 4 for v in CELLS)
    # the plan's estimate on each version's first materialization, their sum on the run
    assert all("estimate" in materialized[("processed_files", v)] for v in CELLS)
    assert "holodeck/estimate_usd" in run.tags
    # the Runs list reads the run's versions and their results
    assert run.tags["holodeck/prompt_version"] == "v1, v2, v3"
    assert run.tags["holodeck/pass_rate"] == "0.0% to 100.0% (3 versions)"
    # every check that can be evaluated, once per version (the gate and no_errored_cases: the
    # others have nothing to compare with or no labels, and are skipped), kept per version
    # and matrix_vs_baseline for v2 and v3 against the baseline cell v1 (itself skipped)
    assert len(evaluations) == 2 * len(VERSIONS) + 2
    assert statuses == {
        "default|v1": "FAILED",
        "default|v2": "SUCCEEDED",
        "default|v3": "SUCCEEDED",
    }
    [v2_gate] = [
        e for e in evaluations if e.check_name == "pass_rate_gate" and e.partition == "default|v2"
    ]
    assert v2_gate.description is not None
    assert v2_gate.description.endswith("(failing for prompt version v1 x model default)")
    # each case called once per version: nothing paid twice within the run
    for i in range(4):
        assert calls[request_key("responses", f"capital of France ({i})?")] == len(VERSIONS)
    rows = history_rows(
        project, "SELECT partition_key, pass_rate, trigger FROM eval_runs ORDER BY 1"
    )
    assert rows == [("v1", 0.0, "manual"), ("v2", 1.0, "manual"), ("v3", 1.0, "manual")]


def test_a_failed_backfill_run_reruns_calling_the_model_only_for_unfinished_cases(
    tmp_path: Path,
) -> None:
    failing = {
        **RULES,
        "rules": [{"match": {"user": r"\(3\)"}, "fault": {"kind": "503"}}, *RULES["rules"]],
    }
    # ordinary calls (a backfill batches by default: tests/test_batch_dagster.py)
    tags = range_tags(
        "default|v1", "default|v3", **{"dagster/backfill": "bf-range", "holodeck/batch": "off"}
    )
    with run_model_server(failing) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path, server.openai_base_url, extra_versions=1)
        defs = build_definitions(project)
        register(defs, instance)
        first = materialize_range(defs, instance, tags)
        record_failure(defs, instance, first)
        before = server.stats()["by_key"]
        server.set_rules(RULES)  # the outage is over
        second = materialize_range(defs, instance, tags)
        after = server.stats()["by_key"]
        resumed = {
            e.partition: e.materialization.metadata["resumed_from_journal"].value
            for e in second.get_asset_materialization_events()
            if e.asset_key.path[-1] == "agent_responses"
        }
    assert not first.success and second.success
    failure = step_failure(first)
    assert failure.step_key == "geo_agent__agent_responses"
    user = failure.step_failure_data.user_failure_data
    assert user is not None and user.description is not None
    # every version ran before the step failed; each case is named with its version
    assert user.description.startswith(
        "prompt version v1, v2, v3 x model default: 3 cases hit transient errors"
    )
    assert all(f"- {v}/c3: server_error 503" in user.description for v in CELLS)
    assert user.metadata["default|v2/cases"].value == 4
    for i in range(3):  # finished by every version before the failure: not called again
        key = request_key("responses", f"capital of France ({i})?")
        assert after[key] == before[key] == len(VERSIONS)
    failed_case = request_key("responses", "capital of France (3)?")
    assert after[failed_case] == before[failed_case] + len(VERSIONS)  # once more per version
    assert resumed == dict.fromkeys(CELLS, 3)
    assert history_rows(project, "SELECT count(*), min(trigger) FROM eval_runs") == [
        (3, "backfill")
    ]
    failed = history_rows(
        project,
        "SELECT dagster_run_id, agent_slug, prompt_version, model_candidate, partition_key, "
        "error FROM failed_runs ORDER BY prompt_version",
    )
    # one row per cell of the range, each naming its configuration, all of the one run
    assert [row[1:5] for row in failed] == [("geo-agent", v, "default", v) for v in VERSIONS]
    assert {row[0] for row in failed} == {first.run_id} and len({row[5] for row in failed}) == 1
    error = failed[0][5]
    assert error.startswith(
        "geo_agent__agent_responses: prompt version v1, v2, v3 x model default: 3 cases"
    )


def test_a_single_run_backfill_is_held_by_its_backfill_budget(tmp_path: Path) -> None:
    with run_model_server(GEO_RULES) as server, dg.instance_for_test() as instance:
        project = geo_project(
            tmp_path, server.openai_base_url, "budget: {backfill: {tokens: 40}}\n"
        )
        defs = build_definitions(project)
        register(defs, instance)
        tags = {"dagster/backfill": "bf-9", "holodeck/batch": "off"}  # ordinary calls
        stopped = materialize_range(defs, instance, range_tags("default|v1", "default|v2", **tags))
        held = server.stats()["total_calls"]
    # both versions share the one budget: fewer calls than one version's cases
    assert not stopped.success and 0 < held < PARTITION_CASES
    failure = step_failure(stopped)
    assert failure.step_key == "geo_agent__agent_responses"
    assert not [e for e in stopped.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    data = failure.step_failure_data.user_failure_data
    assert data is not None and data.description is not None
    assert data.description.startswith("prompt version v1, v2 x model default: ")
    assert "backfill budget of 40 tokens (backfill bf-9)" in data.description
    rows = ledger_rows(project.history_db)  # a row per version: they ran at once
    assert {(scope, key) for scope, key, *_ in rows} == {("backfill", "bf-9")}
    assert sum(row[5] for row in rows) <= 40


def policy_of(project: Project) -> dg.BackfillPolicy | None:
    defs = build_definitions(project)
    return defs.resolve_assets_def(dg.AssetKey(["geo_agent", "agent_responses"])).backfill_policy


def test_backfill_versions_per_run_sets_how_many_versions_a_run_takes(tmp_path: Path) -> None:
    project = make_project(tmp_path, "http://127.0.0.1:9/v1")
    single = policy_of(project)
    assert single is not None and single.max_partitions_per_run is None  # all in one run
    settings = tmp_path / "holodeck.yaml"
    settings.write_text(settings.read_text() + "backfill_versions_per_run: 2\n")
    split = policy_of(Project.discover(tmp_path))
    assert split is not None and split.max_partitions_per_run == 2
    settings.write_text(settings.read_text().replace("per_run: 2", "per_run: 0"))
    with pytest.raises(ConfigError, match="backfill_versions_per_run"):
        Project.discover(tmp_path)


@pytest.mark.parametrize(
    ("start", "end"), [("default|v3", "default|v1"), ("default|v2", "default|v1")]
)
def test_a_range_holding_no_cell_fails_the_first_step_saying_why(
    tmp_path: Path, start: str, end: str
) -> None:
    """A single-run backfill's range typed backwards in the launchpad names no cell: the
    first step fails with a sentence, before any model call, and is not retried."""
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path, server.openai_base_url, extra_versions=2)
        defs = build_definitions(project)
        register(defs, instance)
        result = materialize_range(defs, instance, range_tags(start, end))
        calls = server.stats()["total_calls"]
    assert not result.success
    failure = step_failure(result)
    assert failure.step_key == "geo_agent__processed_files"
    data = failure.step_failure_data
    assert data.user_failure_data is not None, data.error
    description = data.user_failure_data.description or ""
    assert f"partition range {start!r} to {end!r} holds no cell of the grid" in description
    assert "StopIteration" not in description
    assert calls == 0
