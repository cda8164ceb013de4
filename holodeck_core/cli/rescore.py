"""``holodeck rescore RUN``: score a stored run again with the current metric configuration
(:mod:`holodeck_core.engine.rescore`), record it and print it."""

from __future__ import annotations

import argparse
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
    from holodeck_core.engine.record import record_history
    from holodeck_core.engine.report import run_exit_code
    from holodeck_core.engine.rescore import rescore_stored

    rescored = rescore_stored(args.run, history_from(args), args.agent)
    run, path = rescored.run, rescored.path
    failure = record_history(run, path, rescored.project)
    print_summary(run, path, quiet=False)
    code = run_exit_code(run, rescored.gate)
    if failure is None:
        return code
    print(f"error: {failure}", file=sys.stderr)  # a lock that outlived its retries: docs/cli.md
    return ExitCode.worst(code, ExitCode.EXECUTION)
