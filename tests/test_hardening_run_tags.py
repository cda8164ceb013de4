"""Dagster run tags set by hand in the launchpad (docs/agent-yaml.md), on a real Dagster
instance: a bad ``holodeck/trials``, ``holodeck/trigger``, ``holodeck/agent`` or
``holodeck/batch`` fails the run's first step naming the tag, its value and what it
accepts, before any model call (and the failed-runs sensor still records it); a forged
estimate (``holodeck/estimate_usd``, the retired ``holodeck/estimate``) or result
(``holodeck/pass_rate``, ``holodeck/cost_usd``) is ignored with a warning, replaced on the run,
and never stored as the run's."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from holodeck_core.testing import run_model_server
from holodeck_pipelines.builder import build_definitions
from tests.dagster_helpers import history_rows, materialize, record_failure, register
from tests.test_pipelines import RULES, make_project

BAD_TAGS = [
    ("holodeck/trials", "²", "an integer 1-100"),  # str.isdigit() says yes, int() raises
    ("holodeck/trials", "٣", "an integer 1-100"),  # an Arabic-Indic three
    ("holodeck/trials", "0", "an integer 1-100"),
    ("holodeck/trials", "101", "an integer 1-100"),
    ("holodeck/trials", "1.5", "an integer 1-100"),
    ("holodeck/trials", " 2", "an integer 1-100"),
    ("holodeck/trials", "9" * 5000, "an integer 1-100"),
    ("holodeck/trigger", "evil", "one of manual, nightly, sensor, backfill"),
    ("holodeck/trigger", "cli", "one of manual, nightly, sensor, backfill"),
    ("holodeck/trigger", "Nightly\x1b[31m", "one of manual, nightly, sensor, backfill"),
    ("holodeck/agent", "other_agent", "'geo_agent' (this job's agent)"),
    ("holodeck/batch", "yes", "one of off, auto, on"),
    ("holodeck/batch", "ON\x1b[31m", "one of off, auto, on"),
]


def step_failure(result: dg.ExecuteInProcessResult) -> tuple[str, str]:
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    user = failure.step_failure_data.user_failure_data
    assert user is not None and user.description is not None
    return failure.step_key or "", user.description


def test_bad_run_tags_fail_the_first_step_before_any_model_call(tmp_path: Path) -> None:
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path, server.openai_base_url, cases=2)
        defs = build_definitions(project)
        register(defs, instance)
        for tag, value, allowed in BAD_TAGS:
            result = materialize(defs, instance, "v1", tags={tag: value})
            assert not result.success, (tag, value)
            step, description = step_failure(result)
            assert step == "geo_agent__processed_files"  # the first step
            assert not [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
            assert f"run tag {tag}=" in description and f"give {allowed}" in description
            assert repr(value[:200])[1:-1][:50] in description
            assert "\x1b" not in description
            assert server.stats()["total_calls"] == 0, (tag, value)
            record_failure(defs, instance, result)  # the failed-runs sensor records it too
        failed = history_rows(project, "SELECT trigger, error, agent_slug FROM failed_runs")
        assert len(failed) == len(BAD_TAGS)
        assert {trigger for trigger, _, _ in failed} == {"manual"}
        # the job's agent, whatever holodeck/agent the launchpad gave
        assert {agent for _, _, agent in failed} == {"geo-agent"}
        # the tags it accepts still run
        good = materialize(defs, instance, "v1", tags={"holodeck/trials": "2"})
        assert good.success and server.stats()["total_calls"] > 0


FORGED = {
    "not-json": {"holodeck/estimate": "not json"},
    "forged-json": {
        "holodeck/estimate": json.dumps({"v1": {"source": "forged", "calls": 1, "usd": 999.0}}),
        "holodeck/estimate_usd": "999.0000",
    },
    "wrong-shape": {"holodeck/estimate": "[1, 2]", "holodeck/estimate_usd": "-1"},
    "bad-model": {"holodeck/estimate": json.dumps({"v1": {"calls": -5}})},
    "forged-results": {
        "holodeck/pass_rate": "100.0%",
        "holodeck/cost_usd": "0",
        "holodeck/prompt_version": "v9",
    },
}


@pytest.mark.parametrize("shape", sorted(FORGED))
def test_a_forged_estimate_tag_is_ignored_and_replaced(tmp_path: Path, shape: str) -> None:
    forged = FORGED[shape]
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path, server.openai_base_url, cases=2)
        defs = build_definitions(project)
        register(defs, instance)
        result = materialize(defs, instance, "v1", tags=forged)
        assert result.success
        run = instance.get_run_by_id(result.run_id)
        assert run is not None
        logs = instance.all_logs(result.run_id)
    for tag, value in forged.items():
        assert run.tags[tag] != value  # replaced by the project's own
        assert any(f"run tag {tag}=" in e.message and "ignored" in e.message for e in logs)
    # the retired per-version JSON tag is never the run's; the results are this run's own
    assert run.tags.get("holodeck/estimate", "ignored (given at launch)").startswith("ignored")
    assert run.tags["holodeck/pass_rate"] == "0.0%" and run.tags["holodeck/prompt_version"] == "v1"
    [(source,)] = history_rows(project, "SELECT estimate_source FROM run_costs")
    assert source == "sizes"
