"""What a person sees in the Dagster UI when a partition fails, on a real temporary instance:
the step's headline names the reason, ``model_calls`` counts calls that were answered, and a
run launched as a plain materialization (no tags, as the UI does) gets our tags."""

from __future__ import annotations

import socket
from pathlib import Path

import dagster as dg

from holodeck_pipelines.builder import build_definitions
from tests.dagster_helpers import register
from tests.test_pipelines import make_project


def test_a_model_server_that_is_down_fails_the_step_with_the_reason_as_its_headline(
    tmp_path: Path,
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with dg.instance_for_test() as instance:
        defs = build_definitions(make_project(tmp_path, f"http://127.0.0.1:{port}/v1", cases=1))
        register(defs, instance)
        # what the UI's "Materialize" launches: the asset selection for a partition, no tags
        job = dg.define_asset_job("ui_materialize").resolve(asset_graph=defs.resolve_asset_graph())
        result = job.execute_in_process(
            partition_key="default|v2",
            instance=instance,
            raise_on_error=False,
            resources=defs.resources,
        )
        tags = instance.get_run_by_id(result.run_id).tags  # type: ignore[union-attr]
    failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    [failure] = failures
    assert failure.step_key == "geo_agent__agent_responses"
    data = failure.step_failure_data
    assert data.error is not None and "Exceeded max_retries" not in data.error.message
    headline = data.error.message.splitlines()[0]
    assert headline.endswith(
        f"prompt version v2 x model default: 1 cases hit transient errors: cannot connect to "
        f"http://127.0.0.1:{port}/v1: connection refused; rerun the partition to resume "
        "(finished work is kept)"
    )
    assert data.user_failure_data is not None
    metadata = data.user_failure_data.metadata
    assert metadata["model_calls"].value == 0  # nothing answered ...
    assert metadata["model_call_attempts"].value == 4  # ... though the last step attempt made 4
    assert [e.event_type_value for e in result.all_events].count("STEP_UP_FOR_RETRY") == 2
    assert {k: v for k, v in tags.items() if k.startswith("holodeck/")} == {
        "holodeck/agent": "geo_agent",
        "holodeck/trigger": "manual",
        "holodeck/trials": "1",
        "holodeck/prompt_version": "v2",
        "holodeck/estimate_usd": "unknown",  # holodeck plan's, before the agent step (model m
        # has no price); each version's whole estimate is on its processed_files, not a tag
    }
