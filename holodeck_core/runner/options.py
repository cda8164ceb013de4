"""What a suite is asked to run: its options (the command line's or a Dagster run's), the
cases they select, the prompt version they name, and the commit it runs at."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field

from holodeck_core.calls.batch import BatchRounds
from holodeck_core.calls.scheduler import EndpointLimits
from holodeck_core.calls.shared_budget import BudgetPool
from holodeck_core.config.loader import LoadedAgent
from holodeck_core.config.project import Project
from holodeck_core.config.prompts import Prompt, PromptStore
from holodeck_core.models import ProviderEnum, TestCaseModel, TestResult, Trigger
from holodeck_core.models.agent import BatchMode
from holodeck_core.models.cost import RunEstimate

SharedBudgetsFactory = Callable[[Project, str], list[BudgetPool]]
Estimator = Callable[
    [LoadedAgent, Project, str, str, int, list[TestCaseModel], bool], RunEstimate | None
]
"""The run's estimate before its first call: given the agent, the project, the prompt's key
and body, the trials, the cases to run and whether their calls batch (``holodeck plan``'s,
from the history)."""


@dataclass
class SuiteOptions:
    parallel: int | None = None
    timeout: float | None = None
    limit: int | None = None
    filter: str | None = None
    fresh: bool = False
    prompt_key: str | None = None
    trigger: Trigger = Trigger.CLI
    cli_args: list[str] = field(default_factory=list)
    dagster_run_id: str | None = None
    partition_key: str | None = None
    api_keys: dict[ProviderEnum, str] = field(default_factory=dict)
    trials: int | None = None
    shared_budgets: SharedBudgetsFactory | None = None
    """The budgets shared with other runs (``holodeck.yaml`` ``budget:``), opened by each
    runtime: given the project and a label for the ledger's rows."""
    estimator: Estimator | None = None
    batch: BatchMode | None = None
    """``--batch`` or Dagster's ``holodeck/batch`` run tag: over ``execution.batch``."""
    endpoint_limits: EndpointLimits | None = None
    """Endpoint limits shared with the other suites of this process (``holodeck matrix``'s
    cells): one limit per endpoint, not one per suite."""
    batch_rounds: BatchRounds | None = None
    """Batch rounds shared with the other suites of this run (its cells): the requests of all
    of them to one batch API go in one batch (docs/cost.md)."""
    on_batch: Callable[[str], None] | None = None
    """Told every batch progress line (submitted, done, the longest wait): the console's or
    Dagster's step log."""


CaseCallback = Callable[[TestResult, bool], None]


def select_cases(cases: list[TestCaseModel], options: SuiteOptions) -> list[TestCaseModel]:
    """``--filter`` matches a tag exactly or a name / id as a case-insensitive substring."""
    chosen = cases
    if options.filter:
        needle = options.filter.lower()
        chosen = [
            c
            for c in chosen
            if options.filter in c.tags
            or needle in (c.name or "").lower()
            or needle in (c.id or "").lower()
        ]
    if options.limit is not None:
        chosen = chosen[: options.limit]
    return chosen


def resolve_prompt(loaded: LoadedAgent, project: Project, key: str | None) -> tuple[Prompt, str]:
    """The prompt to evaluate and its registered key. The current prompt is registered on the
    way (idempotent), so every run refers to a stored snapshot."""
    store = PromptStore(project.prompts_dir, loaded.agent.name)
    if key is not None:
        snapshot = store.require(key)
        return snapshot.prompt(), snapshot.key
    for variant in loaded.variants:
        store.register(variant)
    return loaded.prompt, store.register(loaded.prompt).key


def git_commit(folder: object) -> str | None:
    """Best effort ``git rev-parse HEAD`` (the run's provenance), bounded to 2 s."""
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=str(folder),
            capture_output=True,
            text=True,
            timeout=2,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = proc.stdout.strip()
    return commit if proc.returncode == 0 and commit else None
