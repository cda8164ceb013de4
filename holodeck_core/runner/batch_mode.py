"""A run's batch mode (``execution.batch``, docs/cost.md): which setting gives it, and whether
the agent's path can batch at all. Light to import: ``holodeck plan`` reads it without the
runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from holodeck_core.defaults import BATCH_MODE, BATCH_MODE_SCHEDULED
from holodeck_core.errors import ConfigError
from holodeck_core.models import Agent, Trigger
from holodeck_core.providers.table import provider_spec

if TYPE_CHECKING:
    from holodeck_core.config.loader import LoadedAgent
    from holodeck_core.config.project import Project
    from holodeck_core.models.agent import BatchMode
    from holodeck_core.runner.options import SuiteOptions

SCHEDULED_TRIGGERS = (Trigger.NIGHTLY, Trigger.BACKFILL)
"""The runs that batch by default (``BATCH_MODE_SCHEDULED``): nobody waits on their answers."""


def claude_path(agent: Agent) -> bool:
    """The agent runs on the Claude Agent SDK, as HoloDeck's does (its provider's row), unless
    ``execution.anthropic_path: direct`` asks for our Messages loop (docs/holodeck-fidelity.md)."""
    direct = agent.execution is not None and agent.execution.anthropic_path == "direct"
    return provider_spec(agent.model.provider).agent_runner == "claude_agent_sdk" and not direct


def batch_plan(
    loaded: LoadedAgent, options: SuiteOptions, project: Project
) -> tuple[BatchMode, str | None]:
    """The run's batch mode (``--batch`` or the run tag, else ``execution.batch``, else the
    agent's ``batch:`` in holodeck.yaml, else ``auto`` for a scheduled or backfill run and
    ``off`` for any other) and, when it is not ``off`` but the agent's path cannot batch, why
    (its calls run as ordinary calls; with ``on`` that is a config error naming where ``on``
    was set)."""
    execution = loaded.agent.execution
    given: list[tuple[BatchMode | None, str]] = [
        (options.batch, "--batch" if options.trigger is Trigger.CLI else "run tag holodeck/batch"),
        (execution.batch if execution else None, "execution.batch"),
        (project.batch_of(loaded.file), "holodeck.yaml agents[].batch"),
    ]
    mode, where = next(
        ((mode, where) for mode, where in given if mode is not None), _default_batch(options)
    )
    why = None if mode == "off" else _unbatchable(loaded)
    if why is None:
        return mode, None
    if mode == "on":
        raise ConfigError(
            f"{where}: on, but {why}; use auto to run such an agent with ordinary calls",
            file=loaded.display,
        )
    return mode, f"{where}: {mode}: {why}, so its calls are sent one by one as usual"


def _default_batch(options: SuiteOptions) -> tuple[BatchMode, str]:
    """The batch mode no setting gave: ``auto`` for the runs nobody waits on (a schedule's, a
    backfill's: docs/dagster.md), else ``off``."""
    if options.trigger in SCHEDULED_TRIGGERS:
        return cast("BatchMode", BATCH_MODE_SCHEDULED), f"a {options.trigger} run's default"
    return cast("BatchMode", BATCH_MODE), "execution.batch"


def _unbatchable(loaded: LoadedAgent) -> str | None:
    agent = loaded.agent
    if loaded.target is not None:
        return "the agent runs as a target (docs/targets.md), which cannot batch"
    if claude_path(agent):
        return "the agent runs on the Claude Agent SDK, which cannot batch"
    if not provider_spec(agent.model.provider).batches:
        return f"provider {agent.model.provider.value} has no batch API"
    return None
