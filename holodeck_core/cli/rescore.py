"""``holodeck rescore RUN``: score a stored run again with the current metric configuration
(:mod:`holodeck_core.engine.rescore`), record it and print it."""

from __future__ import annotations

import argparse
import asyncio
import sys

from holodeck_core.cli.history_option import add_history_arguments
from holodeck_core.errors import ExitCode


def add_rescore_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    rescore = commands.add_parser(
        "rescore", help="score a stored run again with the current metrics (no agent calls)"
    )
    rescore.add_argument(
        "run", metavar="RUN_OR_EVALRUN_JSON", help="an EvalRun file (or its s3:// URL) or a run id"
    )
    rescore.add_argument(
        "--agent",
        metavar="AGENT_YAML",
        help="the agent whose metrics to use (default: found from the EvalRun's results folder)",
    )
    add_history_arguments(rescore)  # where to look up a run id
    rescore.set_defaults(handler=run_rescore_command)


def run_rescore_command(args: argparse.Namespace) -> int:
    from holodeck_core.cli.console import print_summary
    from holodeck_core.cli.history_option import history_from
    from holodeck_core.config.loader import load_agent
    from holodeck_core.config.project import Project
    from holodeck_core.engine.record import record_history
    from holodeck_core.engine.rescore import agent_file, eval_run_file, load_stored_run, rescore_run
    from holodeck_core.reports import write_eval_run
    from holodeck_core.runner.gates import exit_code

    source = eval_run_file(args.run, history_from(args))
    original = load_stored_run(source)
    loaded = load_agent(args.agent or agent_file(source, original, Project.discover()))
    project = Project.discover(loaded.base_dir)
    run = asyncio.run(rescore_run(original, loaded, project))
    path = write_eval_run(run, loaded.file)
    failure = record_history(run, path, project)
    print_summary(run, path, quiet=False)
    gate = loaded.agent.evaluations.gate if loaded.agent.evaluations else None
    code = exit_code(run.report.results, gate)
    if failure is None:
        return code
    print(f"error: {failure}", file=sys.stderr)  # a lock that outlived its retries: docs/cli.md
    return ExitCode.worst(code, ExitCode.EXECUTION)
