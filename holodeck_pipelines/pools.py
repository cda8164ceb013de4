"""The pipelines' Dagster pools (``llm_api``, ``history_db``), set explicitly and checked when
a run starts. Pools are never created implicitly: the profiles set no default limit, because
two workers creating a missing pool at once fail on PostgreSQL (dagster-io/dagster#33552), and
a missing pool would otherwise cap nothing. ``holodeck pools`` sets them from one process."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from holodeck_core.config.project import Project
from holodeck_core.engine import resolve_history
from holodeck_core.errors import ConfigError
from holodeck_pipelines.instance import project_instance

LLM_POOL = "llm_api"
HISTORY_POOL = "history_db"


def pool_limits(project: Project) -> dict[str, int]:
    """Each pool's limit from ``holodeck.yaml``; ``history_db`` above 1 only for a lake (the
    DuckDB file takes one writer at a time), whose default is ``llm_api``'s: its writers do not
    wait for each other, so they should not queue behind one another's step either."""
    history = resolve_history(project)
    settings = project.settings
    on_file = isinstance(history, Path)
    default = 1 if on_file else settings.llm_api_pool_limit
    history_limit = settings.history_db_pool_limit or default
    if on_file and history_limit > 1:
        raise ConfigError(
            f"{project.root / 'holodeck.yaml'}: history_db_pool_limit {history_limit}, but the "
            f"history is the DuckDB file {history}, which takes one writer at a time: set "
            "history_db_pool_limit: 1 (or use a lake, history_url)"
        )
    return {LLM_POOL: project.settings.llm_api_pool_limit, HISTORY_POOL: history_limit}


def pool_problems(instance: dg.DagsterInstance, project: Project) -> list[str]:
    """What is wrong with the instance's pools, each with the command that fixes it."""
    expected = pool_limits(project)
    limits = {
        pool.name: pool
        for pool in instance.event_log_storage.get_pool_limits()
        if not pool.from_default  # a default limit is an implicit pool, not a set one
    }
    problems = []
    for name, limit in expected.items():
        fix = f"`dagster instance concurrency set {name} {limit}` (or `holodeck pools`)"
        if name not in limits:
            problems.append(f"the Dagster pool {name} has no limit on this instance: run {fix}")
        elif name == HISTORY_POOL and limit == 1 and limits[name].limit > 1:
            problems.append(
                f"the Dagster pool {name} allows {limits[name].limit} writers, but the history "
                f"is a DuckDB file, which takes one: run {fix}"
            )
    return problems


def require_pools(instance: dg.DagsterInstance, project: Project) -> None:
    """Fail a run at its start, before any model call, when a pool is missing or wrong."""
    problems = pool_problems(instance, project)
    if problems:
        home = os.environ.get("DAGSTER_HOME", "this instance")
        raise dg.Failure(
            description=f"DAGSTER_HOME {home}: " + "; ".join(problems),
            allow_retries=False,
        )


def set_pools(root: Path) -> int:
    """``holodeck pools``: set every pool's limit on the instance in ``DAGSTER_HOME`` (default:
    the project root); prints what it set."""
    with project_instance(root) as instance:
        for name, limit in apply_pools(instance, Project.discover(root)).items():
            print(f"pool {name}: {limit}")
    return 0


def apply_pools(instance: dg.DagsterInstance, project: Project) -> dict[str, int]:
    """Set every pool's limit, one after another from this process; returns them."""
    limits = pool_limits(project)
    for name, limit in limits.items():
        instance.event_log_storage.set_concurrency_slots(name, limit)
    return limits
