"""The suites of orchestrated runs (docs/dagster.md): one per cell (prompt version x model
candidate) of a run launched by an orchestrator (Dagster), its estimate before any call, and the
prompt versions that become partitions. Loading a suite reads its prompt snapshot, so nothing
here runs while the definitions load: only the steps, the sensor and ``holodeck partitions``
call it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from holodeck_core.config.cached import loaded_agent
from holodeck_core.config.prompts import PromptStore
from holodeck_core.engine.cells import shared_by_cells
from holodeck_core.engine.plan import CostEstimate, estimate_cost, estimates_reader
from holodeck_core.engine.run import shared_budgets
from holodeck_core.engine.suite import Suite, SuiteOptions, load_suite
from holodeck_core.history.backend import project_history
from holodeck_core.providers.table import PROVIDERS
from holodeck_core.runner.options import Estimator

if TYPE_CHECKING:
    from pathlib import Path

    from holodeck_core.config.project import Project
    from holodeck_core.models import ProviderEnum, Trigger
    from holodeck_core.models.agent import BatchMode
    from holodeck_core.models.cost import CallCosts

__all__ = [
    "Estimator",
    "Launch",
    "PromptVersions",
    "Suite",
    "estimate_suites",
    "launched_suites",
    "provider_key_variables",
    "register_prompt_versions",
]


@dataclass(frozen=True)
class Launch:
    """What the orchestrator says of a run: its id and job, why it started, the trials asked
    for, the backfill it belongs to (its shared budget), the provider keys it holds and its
    batch mode (where its batch progress is told)."""

    run_id: str
    job_name: str
    trigger: Trigger
    trials: int | None = None
    backfill: str | None = None
    api_keys: Mapping[ProviderEnum, str] = field(default_factory=dict)
    batch: BatchMode | None = None
    """The ``holodeck/batch`` run tag: over the agent's setting (docs/dagster.md)."""
    on_batch: Callable[[str], None] | None = None
    """Told the batch progress lines (the step's log)."""


def launched_suites(
    agent_file: Path,
    project: Project,
    cells: Mapping[str, tuple[str, str | None]],
    launch: Launch,
    estimators: Mapping[str, Estimator | None] | None = None,
    spent: Sequence[CallCosts] = (),
) -> dict[str, Suite]:
    """The suite of each cell of the run ``launch``, by key: ``cells`` maps a key to its
    prompt version (a registered one: a :class:`~holodeck_core.errors.ConfigError` lists those
    that exist) and model candidate (None: the agent's own model; an unknown one is a
    ``ConfigError`` naming those declared), ``estimators`` to its estimate (the one recorded
    before the agent step). The cells of the run share one limit per endpoint, one budget
    (the agent's ``execution.budget`` over them all, less what they ``spent`` in the run's
    earlier steps) and one set of batch rounds (:mod:`holodeck_core.engine.cells`)."""
    options = SuiteOptions(
        trigger=launch.trigger,
        dagster_run_id=launch.run_id,
        cli_args=[f"dagster:{launch.job_name}"],
        api_keys=dict(launch.api_keys),
        trials=launch.trials,
        shared_budgets=shared_budgets(launch.backfill),
        batch=launch.batch,
        on_batch=launch.on_batch,
    )
    shared = shared_by_cells(loaded_agent(agent_file), options, spent)
    found = estimators or {}
    return {
        key: load_suite(
            loaded_agent(agent_file, model),
            replace(shared, prompt_key=prompt, partition_key=prompt, estimator=found.get(key)),
            project=project,
        )
        for key, (prompt, model) in cells.items()
    }


def estimate_suites(project: Project, suites: Mapping[str, Suite]) -> dict[str, CostEstimate]:
    """``holodeck plan``'s estimate of each suite, by key, from one read of the project's
    history (a history this release refuses raises: fail before any spend)."""
    with estimates_reader(project_history(project)) as recorded:
        return {
            key: estimate_cost(
                suite.loaded,
                recorded,
                suite.prompt_key,
                suite.prompt.body,
                suite.trials,
                suite.cases,
                suite.batching,
            )
            for key, suite in suites.items()
        }


@dataclass(frozen=True)
class PromptVersions:
    """The agent's prompt versions: the active ones (its prompt file and variants), every one
    ever registered, and what registering them warned about (a label reused with a new body)."""

    active: list[str]
    registered: list[str]
    warnings: list[str]


def register_prompt_versions(agent_file: Path, project: Project) -> PromptVersions:
    """Snapshot the agent's active prompt files (docs/architecture.md)."""
    loaded = loaded_agent(agent_file)
    store = PromptStore(project.prompts_dir, loaded.agent.name)
    active, warnings = [], []
    for prompt in loaded.active_prompts:
        registration = store.register(prompt)
        if registration.warning:
            warnings.append(registration.warning)
        active.append(registration.key)
    return PromptVersions(active, [snapshot.key for snapshot in store.list()], warnings)


def provider_key_variables() -> dict[ProviderEnum, str]:
    """The environment variable of each provider that takes an API key (the provider table)."""
    return {p: spec.key_variable for p, spec in PROVIDERS.items() if spec.key_variable}
