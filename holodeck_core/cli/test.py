"""``holodeck test AGENT_YAML``: run a suite, write its EvalRun, render reports, exit by the
exit codes of docs/cli.md."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from holodeck_core.cli.argtypes import positive_int, positive_seconds
from holodeck_core.cli.gate import add_gate_arguments, apply_gate
from holodeck_core.cli.model_option import add_model_option
from holodeck_core.cli.target_option import add_target_option
from holodeck_core.defaults import (
    BATCH_MODE,
    BATCH_MODES,
    PARALLEL_TEST_CASES,
    TRIALS,
    TRIALS_MAX,
    TRIALS_MIN,
)
from holodeck_core.errors import ExitCode

FORMATS = ("json", "markdown", "junit")


def add_test_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    test = commands.add_parser("test", help="run an agent's test cases and score them")
    test.add_argument("agent", metavar="AGENT_YAML")
    test.add_argument("--output", "-o", type=Path, help="also write a report to this file")
    test.add_argument("--format", choices=FORMATS, help="report format (default: from --output)")
    test.add_argument(
        "--parallel",
        type=positive_int,
        help=f"cases at once (default: execution.parallel_test_cases or {PARALLEL_TEST_CASES})",
    )
    test.add_argument("--timeout", type=positive_seconds, help="seconds per model call")
    test.add_argument("--limit", type=positive_int, help="run only the first N cases")
    test.add_argument("--filter", help="run cases whose name or id contains this, or this tag")
    test.add_argument("--prompt-version", dest="prompt_key", help="a registered prompt version")
    test.add_argument("--fresh", action="store_true", help="ignore an open resume journal")
    add_target_option(test)
    add_model_option(test)
    test.add_argument(
        "--trials",
        type=int,
        metavar="K",
        help=f"run every case K times, {TRIALS_MIN} to {TRIALS_MAX} "
        f"(default: execution.trials or {TRIALS})",
    )
    test.add_argument(
        "--batch",
        choices=BATCH_MODES,
        help=f"agent turns and judges through the providers' batch APIs at their batch prices "
        f"(default: execution.batch or {BATCH_MODE}; docs/cost.md)",
    )
    add_gate_arguments(test)
    verbosity = test.add_mutually_exclusive_group()
    verbosity.add_argument("-q", "--quiet", action="store_true")
    verbosity.add_argument("-v", "--verbose", action="store_true")
    test.set_defaults(handler=run_test_command)


def run_test_command(args: argparse.Namespace) -> int:
    from holodeck_core.cli.console import Progress, print_batch_line, print_summary
    from holodeck_core.config.loader import load_agent
    from holodeck_core.engine.record import record_run
    from holodeck_core.engine.report import run_exit_code, write_report
    from holodeck_core.engine.run import run_estimate, run_suite, shared_budgets
    from holodeck_core.engine.suite import SuiteOptions, load_suite
    from holodeck_core.models import Trigger

    if args.trials is not None and not TRIALS_MIN <= args.trials <= TRIALS_MAX:
        print(f"error: --trials must be between {TRIALS_MIN} and {TRIALS_MAX}", file=sys.stderr)
        return ExitCode.CONFIG
    loaded = load_agent(args.agent, target=args.target, model=args.model)
    for warning in loaded.warnings:  # the ones `holodeck validate` prints (derived-id collisions)
        print(f"warning: {warning}", file=sys.stderr)
    options = SuiteOptions(
        parallel=args.parallel,
        timeout=args.timeout,
        limit=args.limit,
        filter=args.filter,
        fresh=args.fresh,
        prompt_key=args.prompt_key,
        trigger=Trigger.CLI,
        cli_args=sys.argv[1:],
        trials=args.trials,
        shared_budgets=shared_budgets(),
        estimator=run_estimate,
        batch=args.batch,
        on_batch=None if args.quiet else print_batch_line,
    )
    suite = load_suite(loaded, options)
    run = asyncio.run(
        run_suite(suite, lambda s: Progress(s, quiet=args.quiet, verbose=args.verbose))
    )
    recorded = record_run(run, suite)
    for warning in recorded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    gate = loaded.agent.evaluations.gate if loaded.agent.evaluations else None
    print_summary(run, recorded.path, quiet=args.quiet, gate=gate, verbose=args.verbose)
    code = run_exit_code(run, gate)
    for failure in (suite.journal.failure, recorded.history_error):
        if failure is not None:  # the run is complete; the disk or the database is not
            print(f"error: {failure}", file=sys.stderr)
            code = ExitCode.worst(code, ExitCode.EXECUTION)
    if args.output:  # after the EvalRun is safe on disk: a failure here loses nothing
        report_failure = write_report(run, args.output, args.format)
        if report_failure is not None:
            print(f"warning: {report_failure}", file=sys.stderr)
    return apply_gate(args, run, suite, args.agent, code)
