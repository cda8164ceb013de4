"""What ``holodeck demo`` starts and reads (docs/dagster.md): the loopback model server scripted
by an agent's rules file, and the history of the runs the demo materialized, each agent's
newest prompt version paired against its first."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from holodeck_core.history import store
from holodeck_core.history.backend import project_history
from holodeck_core.history.queries import compare_runs
from holodeck_core.testing import ModelServer, load_rules, run_model_server

if TYPE_CHECKING:
    from pathlib import Path

    from holodeck_core.config.project import Project
    from holodeck_core.history.paired import PairedRuns

RUNS_SQL = (
    "SELECT e.agent_name, e.prompt_version, e.passed, e.failed, e.errored, e.total_tests, "
    "e.pass_rate, s.trials, s.pass_rate, s.ci95_low, s.ci95_high, s.pass_at_k, s.pass_hat_k, "
    "s.flaky_cases, e.dagster_run_id, e.run_id "
    "FROM eval_runs e JOIN v_run_stats s USING (run_id) "
    "WHERE list_contains(?, e.dagster_run_id) ORDER BY e.agent_name, e.prompt_version"
)


def scripted_model_server(rules_file: Path, *, port: int) -> AbstractContextManager[ModelServer]:
    """The loopback model server on 127.0.0.1:``port`` (0: a free one), answering as
    ``rules_file`` scripts it (a ``RulesError`` names the file and the rule)."""
    return run_model_server(load_rules(rules_file), port=port)


@dataclass(frozen=True)
class DemoRuns:
    """The demo's runs (the columns of :data:`RUNS_SQL`, ending with the Dagster run id and
    the run id), per agent its (newest, first) prompt versions with their paired comparison,
    and the example query's columns and rows."""

    rows: list[tuple[Any, ...]]
    comparisons: dict[str, tuple[str, str, PairedRuns | None]]
    columns: list[str]
    query: list[tuple[Any, ...]]


def demo_matrix(agent_file: Path, say: Callable[[str], None]) -> list[str]:
    """The agent's prompt versions x model candidates, run as ``holodeck matrix`` runs them
    (against the demo's server), as plain lines: the table, its verdicts against the first
    version with the agent's own model and its ties, all within the one agent."""
    from holodeck_core.engine.matrix import CellProgress, matrix_of
    from holodeck_core.engine.run import run_estimate, shared_budgets
    from holodeck_core.engine.suite import SuiteOptions
    from holodeck_core.models import Trigger
    from holodeck_core.reports.matrix import render_matrix_text

    options = SuiteOptions(
        trigger=Trigger.MANUAL, shared_budgets=shared_budgets(), estimator=run_estimate
    )
    table = matrix_of(str(agent_file), options, lambda suite: CellProgress(suite, say))
    return render_matrix_text(table)


def read_demo_runs(project: Project, dagster_run_ids: list[str], example_query: str) -> DemoRuns:
    """One read of the project's history: never compared across agents (each agent's versions
    answer its own cases)."""
    with store.reader(project_history(project)) as con:
        rows = con.execute(RUNS_SQL, [dagster_run_ids]).fetchall()
        by_agent: dict[str, list[tuple[Any, ...]]] = {}
        for row in rows:
            by_agent.setdefault(row[0], []).append(row)
        comparisons = {
            agent: (runs[-1][1], runs[0][1], compare_runs(con, runs[0][-1], runs[-1][-1]).paired)
            for agent, runs in by_agent.items()
            if len(runs) > 1
        }
        query = con.execute(example_query).fetchall()
        columns = [d[0] for d in con.description or []]
    return DemoRuns(rows, comparisons, columns, query)
