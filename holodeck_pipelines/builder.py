"""Definitions for a holodeck project: agents come from ``holodeck.yaml`` (or
``HOLODECK_AGENTS``); each gets its own asset group, partitions (its prompt versions), job,
prompt-version sensor and nightly schedule."""

from __future__ import annotations

import logging
import os

import dagster as dg

from holodeck_core.config.project import Project
from holodeck_core.engine import loaded_agent
from holodeck_core.errors import HolodeckError, safe_message
from holodeck_pipelines.assets import AgentPipeline, build_agent_pipeline
from holodeck_pipelines.automation import (
    failed_runs_sensor,
    nightly_schedule,
    prompt_versions_sensor,
)
from holodeck_pipelines.io_manager import PydanticJsonIOManager
from holodeck_pipelines.resources import (
    HoloDeckProject,
    ModelProviderKeys,
    RunHistory,
    key_variables,
)

STORAGE_VARIABLES = {
    "aws_access_key_id": "AWS_ACCESS_KEY_ID",
    "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "endpoint_url": "AWS_ENDPOINT_URL",
}


def env_vars(variables: dict[str, str]) -> dict[str, dg.EnvVar]:
    """Resource fields bound to the variables that are set (an unset ``EnvVar`` would only
    fail at run start); the values are read in the worker and never stored."""
    return {field: dg.EnvVar(name) for field, name in variables.items() if os.environ.get(name)}


logger = logging.getLogger(__name__)


def build_pipelines(project: Project, skipped: dict[str, str] | None = None) -> list[AgentPipeline]:
    """The pipelines of every agent that loads; why each other agent did not goes to the log
    and into ``skipped``: one bad agent.yaml never takes the others' definitions down."""
    pipelines: list[AgentPipeline] = []
    skipped = {} if skipped is None else skipped
    for path in project.agent_paths():
        try:
            pipelines.append(
                build_agent_pipeline(
                    path, loaded_agent(path), project.settings.backfill_versions_per_run
                )
            )
        except (HolodeckError, dg.DagsterError) as exc:
            skipped[str(path)] = safe_message(exc)
            logger.error("holodeck: agent %s is not loaded: %s", path, skipped[str(path)])
    return pipelines


def build_definitions(project: Project) -> dg.Definitions:
    skipped: dict[str, str] = {}
    pipelines = build_pipelines(project, skipped)
    return dg.Definitions(
        assets=[asset for pipeline in pipelines for asset in pipeline.assets],
        jobs=[pipeline.job for pipeline in pipelines],
        sensors=[
            *(
                prompt_versions_sensor(pipeline, launch_new=project.settings.launch_new_versions)
                for pipeline in pipelines
            ),
            failed_runs_sensor,
        ],
        schedules=[
            nightly_schedule(pipeline, project.settings.nightly_cron) for pipeline in pipelines
        ],
        resources={
            "project": HoloDeckProject(root=str(project.root)),
            "keys": ModelProviderKeys(**env_vars(key_variables())),
            "history": RunHistory(
                db_path=str(project.history_db),
                lake_url=project.history_url,
            ),
            "holodeck_io_manager": PydanticJsonIOManager(
                base_url=project.artifacts_url, **env_vars(STORAGE_VARIABLES)
            ),
        },
        executor=dg.multiprocess_executor
        if project.settings.executor == "multiprocess"
        else dg.in_process_executor,
        metadata={"holodeck/skipped_agents": dg.MetadataValue.json(skipped)} if skipped else None,
    )
