"""``holodeck test AGENT_YAML``: run a suite, write its EvalRun, render reports, exit by the
exit codes of docs/cli.md."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.cli.argtypes import positive_int, positive_seconds
from holodeck_core.cli.gate import add_gate_arguments, apply_gate
from holodeck_core.cli.target_option import add_target_option
from holodeck_core.defaults import PARALLEL_TEST_CASES, TRIALS, TRIALS_MAX, TRIALS_MIN
from holodeck_core.errors import ExitCode

if TYPE_CHECKING:  # the models load when a command runs, not when the parser is built
    from holodeck_core.models import EvalRun

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
    test.add_argument(
        "--trials",
        type=int,
        metavar="K",
        help=f"run every case K times, {TRIALS_MIN} to {TRIALS_MAX} "
        f"(default: execution.trials or {TRIALS})",
    )
    add_gate_arguments(test)
    verbosity = test.add_mutually_exclusive_group()
    verbosity.add_argument("-q", "--quiet", action="store_true")
    verbosity.add_argument("-v", "--verbose", action="store_true")
    test.set_defaults(handler=run_test_command)


def run_test_command(args: argparse.Namespace) -> int:
    from holodeck_core.cli.console import Progress, print_summary
    from holodeck_core.config.loader import load_agent
    from holodeck_core.engine.record import record_run
    from holodeck_core.engine.run import run_estimate, run_suite, shared_budgets
    from holodeck_core.models import Trigger
    from holodeck_core.runner.gates import exit_code
    from holodeck_core.runner.suite import Suite, SuiteOptions

    if args.trials is not None and not TRIALS_MIN <= args.trials <= TRIALS_MAX:
        print(f"error: --trials must be between {TRIALS_MIN} and {TRIALS_MAX}", file=sys.stderr)
        return ExitCode.CONFIG
    loaded = load_agent(args.agent, target=args.target)
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
    )
    suite = Suite(loaded, options)
    run = asyncio.run(
        run_suite(suite, lambda s: Progress(s, quiet=args.quiet, verbose=args.verbose))
    )
    recorded = record_run(run, suite)
    for warning in recorded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    gate = loaded.agent.evaluations.gate if loaded.agent.evaluations else None
    print_summary(run, recorded.path, quiet=args.quiet, gate=gate, verbose=args.verbose)
    code = exit_code(run.report.results, gate)
    for failure in (suite.journal.failure, recorded.history_error):
        if failure is not None:  # the run is complete; the disk or the database is not
            print(f"error: {failure}", file=sys.stderr)
            code = ExitCode.worst(code, ExitCode.EXECUTION)
    if args.output:
        _write_report(run, args.output, args.format)
    return apply_gate(args, run, suite, args.agent, code)


def _write_report(run: EvalRun, output: Path, fmt: str | None) -> None:
    """Optional reports come after the EvalRun is safe on disk; a failure here loses nothing."""
    from holodeck_core.reports import render_junit, render_markdown

    chosen = fmt or {".md": "markdown", ".xml": "junit"}.get(output.suffix, "json")
    try:
        if chosen == "markdown":
            text = render_markdown(run)
        elif chosen == "junit":
            text = render_junit(run.report)
        else:
            text = run.report.model_dump_json(indent=2)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    except Exception as exc:
        print(
            f"warning: the {chosen} report could not be written to {output}: {exc} "
            "(the EvalRun above is complete)",
            file=sys.stderr,
        )
