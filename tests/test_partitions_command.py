"""Partitions without the daemon: ``holodeck partitions`` (registered by holodeck_pipelines)
adds the registered prompt versions to a fresh Dagster instance, so a materialization of v2
works at once; the prompt-version sensor removes partitions no prompt snapshot backs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from holodeck_pipelines.builder import build_definitions
from tests.test_pipelines import make_project

BIN = Path(sys.executable).parent
PARTITIONS = "geo_agent_prompt_versions"


def test_the_partitions_command_adds_the_registered_versions_to_a_fresh_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path, "http://127.0.0.1:9/v1")
    home = tmp_path / "dagster-home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions(PARTITIONS, ["v9"])  # added by hand in the UI
    command = [str(BIN / "holodeck"), "partitions"]
    first = subprocess.run(command, cwd=project.root, capture_output=True, text=True, check=False)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        "geo_agent: prompt versions v1, v2 x models default (2 cells); added v1, v2; "
        "removed v9 (no prompt snapshot)"
    ]
    again = subprocess.run(command, cwd=project.root, capture_output=True, text=True, check=True)
    assert again.stdout.splitlines() == [
        "geo_agent: prompt versions v1, v2 x models default (2 cells)"
    ]  # idempotent
    with dg.DagsterInstance.get() as instance:
        assert sorted(instance.get_dynamic_partitions(PARTITIONS)) == ["v1", "v2"]
        # what `dagster asset materialize --partition default|v2` checks before it launches
        job = build_definitions(project).resolve_job_def("Geo_agent_eval")
        assert job.partitions_def is not None
        keys = job.partitions_def.get_partition_keys(dynamic_partitions_store=instance)
        assert "default|v2" in keys and "default|v9" not in keys


def test_the_sensor_removes_partitions_no_snapshot_backs(tmp_path: Path) -> None:
    project = make_project(tmp_path, "http://127.0.0.1:9/v1")
    defs = build_definitions(project)
    sensor = defs.resolve_sensor_def(PARTITIONS)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(PARTITIONS, ["v1", "v9"])
        with dg.build_sensor_context(instance=instance, resources=defs.resources) as context:
            result = sensor(context)
        assert isinstance(result, dg.SensorResult)
        for request in result.dynamic_partitions_requests or []:
            if isinstance(request, dg.DeleteDynamicPartitionsRequest):
                for key in request.partition_keys:
                    instance.delete_dynamic_partition(request.partitions_def_name, key)
            else:
                instance.add_dynamic_partitions(
                    request.partitions_def_name, list(request.partition_keys)
                )
        assert sorted(instance.get_dynamic_partitions(PARTITIONS)) == ["v1", "v2"]
    assert "removes partitions no snapshot backs" in (sensor.description or "")


def test_a_copied_agent_not_yet_renamed_is_refused_and_the_first_keeps_loading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Copying an agent's folder and listing it without renaming it: the first listed agent
    keeps its partitions, the copy is named with both files, exit 2."""
    project = make_project(tmp_path, "http://127.0.0.1:9/v1")
    shutil.copytree(tmp_path / "agents" / "geo", tmp_path / "agents" / "geo-copy")
    (tmp_path / "holodeck.yaml").write_text(
        "agents: [agents/geo/agent.yaml, agents/geo-copy/agent.yaml]\n"
    )
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    proc = subprocess.run(
        [str(BIN / "holodeck"), "partitions"],
        cwd=project.root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout.splitlines() == [
        "geo_agent: prompt versions v1, v2 x models default (2 cells); added v1, v2"
    ]
    message = " ".join(proc.stderr.split())
    copy, original = (tmp_path / "agents" / d / "agent.yaml" for d in ("geo-copy", "geo"))
    assert f"agent {copy} is not loaded" in message and str(original) in message
    assert "Traceback" not in proc.stderr
