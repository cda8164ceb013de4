"""The Dagster tests' harness on a real instance: a project's prompt versions registered as the
sensor does, a cell or a partition range (a single-run backfill) materialized, a failure
recorded as the failure sensor does, and what comes back: the asset checks a run evaluated,
its materializations' metadata, the runs a schedule's tick requests, the history's rows. The
project is the tests' Geo Agent (asset group ``geo_agent``: tests/test_pipelines.py's
``make_project``, or :func:`geo_folder` with an agent.yaml of the test's own)."""

from __future__ import annotations

import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb

from holodeck_core.config.project import Project
from holodeck_pipelines.builder import build_definitions
from holodeck_pipelines.cells import Cell
from holodeck_pipelines.pools import apply_pools


def check_evaluations(
    result: dg.ExecuteInProcessResult, check: str | None = None
) -> list[dg.AssetCheckEvaluation]:
    """Every asset check evaluation of the run, in order; only ``check``'s when given."""
    found: list[Any] = [
        e.asset_check_evaluation_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    ]
    return [data for data in found if check is None or data.check_name == check]


def by_check(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    """The run's check evaluations by check name (the last of each)."""
    return {data.check_name: data for data in check_evaluations(result)}


def schedule_requests(
    defs: dg.Definitions, schedule_name: str, tick: datetime
) -> list[dg.RunRequest]:
    """The runs the schedule requests at ``tick``, evaluated on a throwaway instance."""
    schedule = defs.resolve_schedule_def(schedule_name)
    with (
        dg.instance_for_test() as instance,
        dg.build_schedule_context(
            instance=instance,
            resources=defs.resources,
            scheduled_execution_time=tick,
            repository_def=defs.get_repository_def(),
        ) as context,
    ):
        return list(schedule.evaluate_tick(context).run_requests or [])


def register(defs: dg.Definitions, instance: dg.DagsterInstance) -> list[str]:
    """What the sensor does on its first tick (snapshots + partitions), and the pool limits
    a deployment sets (``holodeck pools``)."""
    apply_pools(instance, defs.resources["project"].project())
    sensor = defs.resolve_sensor_def("geo_agent_prompt_versions")
    with dg.build_sensor_context(instance=instance, resources=defs.resources) as context:
        result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    for request in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return sorted(instance.get_dynamic_partitions("geo_agent_prompt_versions"))


def materialize(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    key: str,
    tags: dict[str, str] | None = None,
    model: str = "default",
) -> dg.ExecuteInProcessResult:
    """Materialize the cell of prompt version ``key`` and model candidate ``model``."""
    job = defs.resolve_job_def("Geo_agent_eval")
    return job.execute_in_process(
        partition_key=Cell(key, model).key, instance=instance, raise_on_error=False, tags=tags
    )


def record_failure(
    defs: dg.Definitions, instance: dg.DagsterInstance, failed: dg.ExecuteInProcessResult
) -> None:
    """What the ``holodeck_failed_runs`` sensor does when the run ``failed`` fails."""
    run_failure = next(e for e in failed.all_events if e.event_type_value == "PIPELINE_FAILURE")
    with warnings.catch_warnings():  # repository_def is a beta parameter of the test context
        warnings.simplefilter("ignore", dg.BetaWarning)
        context = dg.build_run_status_sensor_context(
            sensor_name="holodeck_failed_runs",
            dagster_event=run_failure,
            dagster_instance=instance,
            dagster_run=failed.dagster_run,
            resources=defs.resources,
            repository_def=defs.get_repository_def(),  # as the daemon gives it
        ).for_run_failure()
    defs.resolve_sensor_def("holodeck_failed_runs")(context)  # type: ignore[call-arg]


def history_rows(project: Project, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(project.history_db), read_only=True) as con:
        return con.execute(sql).fetchall()


def geo_folder(root: Path, prompt: str) -> Path:
    """The folder of a project's one agent, ``agents/geo`` under ``root``, with its prompt v1
    (``prompt``) and the project's ``holodeck.yaml``; the caller writes its agent.yaml."""
    folder = root / "agents" / "geo"
    (folder / "prompts").mkdir(parents=True)
    (folder / "prompts" / "v1.md").write_text(f"---\nversion: v1\n---\n{prompt}\n")
    (root / "holodeck.yaml").write_text("agents: [agents/geo/agent.yaml]\n")
    return folder


def materialize_v1(
    root: Path, instance: dg.DagsterInstance
) -> tuple[Project, dg.ExecuteInProcessResult]:
    """The project at ``root`` (see :func:`geo_folder`) registered and its cell v1 x default
    materialized."""
    project = Project.discover(root)
    defs = build_definitions(project)
    assert register(defs, instance) == ["v1"]
    return project, materialize(defs, instance, "v1")


def instance_metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    [event] = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key == dg.AssetKey(["geo_agent", asset])
    ]
    return dict(event.materialization.metadata)


def range_tags(start: str, end: str, **extra: str) -> dict[str, str]:
    return {
        "dagster/asset_partition_range_start": start,
        "dagster/asset_partition_range_end": end,
        **extra,
    }


def materialize_range(
    defs: dg.Definitions, instance: dg.DagsterInstance, tags: dict[str, str]
) -> dg.ExecuteInProcessResult:
    """What a single-run backfill launches: one run of the job over a partition range."""
    job = defs.resolve_job_def("Geo_agent_eval")
    return job.execute_in_process(instance=instance, raise_on_error=False, tags=tags)
