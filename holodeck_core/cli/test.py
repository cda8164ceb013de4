"""``holodeck test AGENT_YAML``: run a suite, write its EvalRun, render reports, exit by the
exit codes of docs/cli.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from holodeck_core.cli.gate import add_gate_arguments, apply_gate
from holodeck_core.cli.model_option import add_model_option
from holodeck_core.cli.run_options import add_run_arguments
from holodeck_core.cli.target_option import add_target_option

FORMATS = ("json", "markdown", "junit")


def add_test_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    test = commands.add_parser("test", help="run an agent's test cases and score them")
    test.add_argument("agent", metavar="AGENT_YAML")
    test.add_argument("--output", "-o", type=Path, help="also write a report to this file")
    test.add_argument("--format", choices=FORMATS, help="report format (default: from --output)")
    add_run_arguments(test)
    test.add_argument("--prompt-version", dest="prompt_key", help="a registered prompt version")
    add_target_option(test)
    add_model_option(test)
    add_gate_arguments(test)
    verbosity = test.add_mutually_exclusive_group()
    verbosity.add_argument("-q", "--quiet", action="store_true")
    verbosity.add_argument("-v", "--verbose", action="store_true")
    test.set_defaults(handler=run_test_command)


def run_test_command(args: argparse.Namespace) -> int:
    from holodeck_core.cli.console import Progress, print_summary
    from holodeck_core.cli.run_options import print_warnings, suite_options
    from holodeck_core.config.loader import load_agent
    from holodeck_core.engine.loop import run_to_end
    from holodeck_core.engine.record import record_run
    from holodeck_core.engine.report import recorded_exit_code, recorded_failures, write_report
    from holodeck_core.engine.run import run_suite
    from holodeck_core.engine.suite import load_suite

    loaded = load_agent(args.agent, target=args.target, model=args.model)
    print_warnings(loaded.warnings)  # the ones `holodeck validate` prints (derived-id collisions)
    options = suite_options(args, prompt_key=args.prompt_key, quiet=args.quiet)
    suite = load_suite(loaded, options)
    run = run_to_end(
        run_suite(suite, lambda s: Progress(s, quiet=args.quiet, verbose=args.verbose))
    )
    recorded = record_run(run, suite)
    print_warnings(recorded.warnings)
    gate = loaded.agent.gate
    print_summary(run, recorded.path, quiet=args.quiet, gate=gate, verbose=args.verbose)
    for failure in recorded_failures(recorded, suite):  # the run is complete; its disk is not
        print(f"error: {failure}", file=sys.stderr)
    code = recorded_exit_code(recorded, suite)
    if args.output:  # after the EvalRun is safe on disk: a failure here loses nothing
        print_warnings([write_report(run, args.output, args.format)])
    return apply_gate(args, run, suite, args.agent, code)
