"""``holodeck rescore RUN``: score a stored run again with the current metric configuration.

The agent is not called. Judge answers come from the judge cache where they can, so only new
or changed judge questions cost a call. The result is a new EvalRun (trigger ``rescore``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.errors import ConfigError, HolodeckError

if TYPE_CHECKING:  # loaded when the command runs, not when the parser is built
    from holodeck_core.config.loader import LoadedAgent
    from holodeck_core.config.project import Project
    from holodeck_core.models import EvalRun


def add_rescore_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    rescore = commands.add_parser(
        "rescore", help="score a stored run again with the current metrics (no agent calls)"
    )
    rescore.add_argument("run", metavar="RUN_OR_EVALRUN_JSON", help="an EvalRun file or run id")
    rescore.add_argument(
        "--agent",
        metavar="AGENT_YAML",
        help="the agent whose metrics to use (default: found from the EvalRun's results folder)",
    )
    rescore.add_argument("--db", type=Path, help="history database (for a run id)")
    rescore.set_defaults(handler=run_rescore_command)


def run_rescore_command(args: argparse.Namespace) -> int:
    from holodeck_core.commands.console import print_summary
    from holodeck_core.commands.test import exit_code
    from holodeck_core.config.loader import load_agent
    from holodeck_core.config.project import Project
    from holodeck_core.history.ingest import ingest_run
    from holodeck_core.history.lake import project_history
    from holodeck_core.reports import write_eval_run

    source = _eval_run_file(args.run, args.db)
    from holodeck_core.history.holodeck_import import NotAnEvalRun, load_run_file

    try:
        original = load_run_file(source).run
    except NotAnEvalRun as exc:
        raise ConfigError(f"{source}: {exc}") from None
    loaded = load_agent(args.agent or _agent_file(source, original))
    project = Project.discover(loaded.base_dir)
    run = asyncio.run(_rescore(original, loaded, project))
    path = write_eval_run(run, loaded.file)
    try:
        ingest_run(project_history(project), run, source_path=path, prompts_dir=project.prompts_dir)
    except HolodeckError as exc:  # the EvalRun file is the source of truth
        print(f"warning: the run history was not updated: {exc}", file=sys.stderr)
    print_summary(run, path, quiet=False)
    gate = loaded.agent.evaluations.gate if loaded.agent.evaluations else None
    return exit_code(run.report.results, gate)


async def _rescore(original: EvalRun, loaded: LoadedAgent, project: Project) -> EvalRun:
    from holodeck_core.agents.factory import make_client
    from holodeck_core.calls.scheduler import CallScheduler
    from holodeck_core.metrics.judge import JudgeServices
    from holodeck_core.metrics.rescore import rescore_results
    from holodeck_core.models import EvalRun, ReportSummary, Trigger
    from holodeck_core.redaction import redact
    from holodeck_core.runner.execute import now_iso
    from holodeck_core.runner.trials import combine_trials
    from holodeck_core.stats import Reducer

    scheduler = CallScheduler(loaded.agent.parallel_test_cases)
    services = JudgeServices.for_agent(
        loaded.agent,
        scheduler,
        project=project,
        client_factory=lambda model: make_client(model, where="judge"),
    )
    execution = loaded.agent.execution
    reducer = (execution.reducer if execution else None) or Reducer.ALL
    stored = original.report.results
    async with services:  # each trial is re-scored, then the case's trials are reduced again
        flat = await rescore_results(
            [trial for result in stored for trial in result.trials or [result]],
            loaded.agent,
            context=services.context(base_dir=loaded.base_dir),
        )
    rescored = iter(flat)
    results = [
        combine_trials([next(rescored) for _ in range(r.trial_count)], reducer) for r in stored
    ]
    report = original.report.model_copy(
        update={
            "results": results,
            "summary": ReportSummary.from_results(
                results,
                wall_time_ms=original.report.summary.wall_time_ms,
                reducer=reducer,
                max_error_share=loaded.agent.max_error_share,
            ),
            "timestamp": now_iso(),
        }
    )
    metadata = original.metadata.model_copy(
        update={
            "agent_config": loaded.agent,
            "run_id": uuid.uuid4().hex,
            "trigger": Trigger.RESCORE,
            "cli_args": ["rescore", str(original.metadata.run_id or "")],
            "provenance": {
                **original.metadata.provenance,
                **services.provenance(),
                "rescored_from": original.metadata.run_id,
            },
        }
    )
    return redact(EvalRun(report=report, metadata=metadata), loaded.secrets)


def _eval_run_file(ref: str, db: Path | None) -> Path:
    candidate = Path(ref)
    if candidate.is_file():
        return candidate
    from holodeck_core.config.project import Project
    from holodeck_core.history.lake import project_history
    from holodeck_core.history.queries import resolve_run
    from holodeck_core.history.store import reader

    database = db or project_history(Project.discover())
    with reader(database) as con:
        run_id = resolve_run(con, ref)
        row = con.execute("SELECT source_path FROM eval_runs WHERE run_id = ?", [run_id]).fetchone()
    if not row or not row[0] or not Path(row[0]).is_file():
        raise ConfigError(
            f"run {run_id} has no EvalRun file on this machine; pass the file instead"
        )
    return Path(row[0])


def _agent_file(source: Path, run: EvalRun) -> Path:
    """``<agent dir>/results/<slug>/<file>.json`` → ``<agent dir>/<agent_config_path>``."""
    agent_dir = source.resolve().parent.parent.parent
    candidate = agent_dir / Path(run.report.agent_config_path).name
    if not candidate.is_file():
        raise ConfigError(
            f"cannot find the agent file of {source} (looked for {candidate}); pass --agent"
        )
    return candidate
