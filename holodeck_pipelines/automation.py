"""How the pipelines run by themselves: prompt versions appear as rows of the agent's grid (a
sensor), the active versions x the nightly candidates are evaluated nightly (a schedule)."""

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from holodeck_core.engine import FailedCell, record_failed_run
from holodeck_core.engine.launch import register_prompt_versions
from holodeck_core.models import Trigger
from holodeck_pipelines.assets import AgentPipeline
from holodeck_pipelines.cells import MODEL, PROMPT, Cell, cell_of, rows_of
from holodeck_pipelines.resources import HoloDeckProject, RunHistory
from holodeck_pipelines.run_tags import AGENT_TAG, TRIGGER_TAG, BadRunTag, trigger_of


def register_versions(agent_file: Path, project: HoloDeckProject) -> tuple[list[str], list[str]]:
    """Snapshot the agent's active prompt files (docs/architecture.md). Returns (active keys,
    every registered key)."""
    versions = register_prompt_versions(agent_file, project.project())
    for warning in versions.warnings:
        dg.get_dagster_logger().warning(warning)
    return versions.active, versions.registered


def partition_changes(
    existing: Sequence[str], registered: list[str]
) -> tuple[list[str], list[str]]:
    """(registered versions that are not partitions yet, partitions no snapshot backs). A
    partition added by hand for a version that does not exist can only fail; snapshots are
    never deleted, so no version that ever ran loses its partition."""
    known = set(existing)
    backed = set(registered)
    return [k for k in registered if k not in known], [k for k in existing if k not in backed]


def prompt_versions_sensor(pipeline: AgentPipeline, *, launch_new: bool) -> dg.SensorDefinition:
    @dg.sensor(
        name=f"{pipeline.name}_prompt_versions",
        description="Registers new prompt versions (files and variants) as immutable snapshots "
        "and adds them as partitions; removes partitions no snapshot backs (added by hand for a "
        "version that does not exist)"
        + ("; launches a run for each cell of each new one." if launch_new else "."),
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        job=pipeline.job,
    )
    def sensor(context: dg.SensorEvaluationContext, project: HoloDeckProject) -> dg.SensorResult:
        active, registered = register_versions(pipeline.agent_file, project)
        existing = context.instance.get_dynamic_partitions(pipeline.partitions.name or "")
        new, stale = partition_changes(existing, registered)
        if stale:
            context.log.warning(f"removing partitions no prompt snapshot backs: {', '.join(stale)}")
        launched = [key for key in new if launch_new and key in active]
        runs = [
            dg.RunRequest(
                run_key=f"new-version:{cell.prompt}:{cell.model}",
                partition_key=cell.key,
                tags={TRIGGER_TAG: Trigger.SENSOR.value},
            )
            for cell in (Cell(key, model) for key in launched for model in pipeline.candidates)
        ]
        requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
        if new:
            requests.append(pipeline.partitions.build_add_request(new))
        if stale:
            requests.append(pipeline.partitions.build_delete_request(stale))
        return dg.SensorResult(
            run_requests=runs,
            dynamic_partitions_requests=requests,
            skip_reason=None if requests else "no new prompt versions",
        )

    return sensor


def nightly_schedule(pipeline: AgentPipeline, cron: str) -> dg.ScheduleDefinition:
    @dg.schedule(
        name=f"{pipeline.name}_nightly",
        cron_schedule=cron,
        execution_timezone="UTC",
        job=pipeline.job,
        description="Evaluates every active prompt version (the prompt file and its variants) "
        "with every model candidate marked for it (holodeck.yaml's nightly).",
        default_status=dg.DefaultScheduleStatus.RUNNING,
    )
    def schedule(
        context: dg.ScheduleEvaluationContext, project: HoloDeckProject
    ) -> list[dg.RunRequest]:
        active, _ = register_versions(pipeline.agent_file, project)
        moment = context.scheduled_execution_time
        existing = set(context.instance.get_dynamic_partitions(pipeline.partitions.name or ""))
        missing = [key for key in active if key not in existing]
        if missing:
            context.instance.add_dynamic_partitions(pipeline.partitions.name or "", missing)
        return [
            dg.RunRequest(
                run_key=f"nightly:{moment:%Y-%m-%d}:{key}",
                partition_key=key,
                tags={TRIGGER_TAG: Trigger.NIGHTLY.value},
            )
            for key in rows_of(active, pipeline.nightly)
        ]

    return schedule


@dg.run_failure_sensor(
    name="holodeck_failed_runs",
    description="Records every failed evaluation run (nightly ones included) in the DuckDB "
    "history's failed_runs table, so a missing night shows up beside the runs that worked.",
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def failed_runs_sensor(context: dg.RunFailureSensorContext, history: RunHistory) -> None:
    run = context.dagster_run
    record_failed_run(
        history.path,
        dagster_run_id=run.run_id,
        job_name=run.job_name,
        agent_slug=failed_agent(context),
        cells=failed_cells(context),
        trigger=recorded_trigger(run.tags).value,
        failed_at=datetime.now(UTC),
        error=failure_reason(context),
    )


def recorded_trigger(tags: Mapping[str, str]) -> Trigger:
    """What started a failed run; a bad ``holodeck/trigger`` (the run failed on it) was set by
    hand in the launchpad."""
    try:
        return trigger_of(tags)
    except BadRunTag:
        return Trigger.MANUAL


def job_of(context: dg.RunFailureSensorContext) -> dg.JobDefinition | None:
    """The failed run's job in the definitions (None: not given, or gone since)."""
    repository, job = context.repository_def, context.dagster_run.job_name
    return repository.get_job(job) if repository is not None and repository.has_job(job) else None


def failed_agent(context: dg.RunFailureSensorContext) -> str | None:
    """The failed run's agent as ``eval_runs.agent_slug`` names it, from its job's
    ``holodeck/agent`` tag (the run's own may have been set by hand at launch: only when the job
    is gone); the tag is the slug with ``_`` for ``-`` (holodeck_core/naming.py)."""
    job = job_of(context)
    name = (job.tags if job is not None else context.dagster_run.tags).get(AGENT_TAG)
    return name.replace("_", "-") if name else None


def failed_cells(context: dg.RunFailureSensorContext) -> list[FailedCell]:
    """The history's rows of a failed run, one per cell it ran (docs/history.md): its
    partition's cell, or each cell of a single-run backfill's range; else (the job or a key
    of the range gone from the definitions) one row naming its partition as Dagster wrote it,
    a range as ``default|v1...default|v9``."""
    tags = context.dagster_run.tags
    prompt, model = tags.get(f"dagster/partition/{PROMPT}"), tags.get(f"dagster/partition/{MODEL}")
    span = partition_range(tags)
    cells = [Cell(prompt, model)] if prompt and model else range_cells(context, span)
    if cells:
        return [FailedCell(cell.prompt, cell.prompt, cell.model) for cell in cells]
    written = f"{span.start}...{span.end}" if span else None
    return [FailedCell(tags.get("dagster/partition") or written)]


def range_cells(
    context: dg.RunFailureSensorContext, span: dg.PartitionKeyRange | None
) -> list[Cell]:
    """The cells of a single-run backfill's range, in the order of the job's grid (none when
    the run has no range, or its job or keys are gone from the definitions)."""
    job = job_of(context)
    grid = job.partitions_def if job is not None else None
    if span is None or not isinstance(grid, dg.MultiPartitionsDefinition):
        return []
    try:
        keys = grid.get_partition_keys_in_range(span, dynamic_partitions_store=context.instance)
    except dg.DagsterError:  # a key of the range no longer in the grid
        return []
    return [cell_of(key) for key in keys]


def partition_range(tags: Mapping[str, str]) -> dg.PartitionKeyRange | None:
    """The range of cells a single-run backfill ran, from its tags."""
    start = tags.get("dagster/asset_partition_range_start")
    end = tags.get("dagster/asset_partition_range_end")
    return dg.PartitionKeyRange(start, end) if start and end else None


def failure_reason(context: dg.RunFailureSensorContext) -> str | None:
    """Why the run failed: each failed step's own description (which cases, why), not
    Dagster's generic "Steps failed" (kept only when no step failed, e.g. a crashed run)."""
    reasons = []
    for event in context.get_step_failure_events():
        data = event.step_failure_data
        user = data.user_failure_data
        text = user.description if user and user.description else None
        if text is None and data.error is not None:
            text = data.error.message.strip()
        reasons.append(f"{event.step_key}: {text or 'failed'}")
    return "\n".join(reasons) or context.failure_event.message
