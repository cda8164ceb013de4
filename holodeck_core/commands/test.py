"""``holodeck test AGENT_YAML``: run a suite, write its EvalRun, render reports, exit per §6.7."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.argtypes import positive_int, positive_seconds
from holodeck_core.errors import ExitCode, HolodeckError

if TYPE_CHECKING:  # the models load when a command runs, not when the parser is built
    from upath import UPath

    from holodeck_core.config.project import Project
    from holodeck_core.models import EvalRun, Gate, TestResult
    from holodeck_core.runner.suite import Suite

FORMATS = ("json", "markdown", "junit")


def add_test_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    test = commands.add_parser("test", help="run an agent's test cases and score them")
    test.add_argument("agent", metavar="AGENT_YAML")
    test.add_argument("--output", "-o", type=Path, help="also write a report to this file")
    test.add_argument("--format", choices=FORMATS, help="report format (default: from --output)")
    test.add_argument(
        "--parallel", type=positive_int, help="cases at once (default: execution or 32)"
    )
    test.add_argument("--timeout", type=positive_seconds, help="seconds per model call")
    test.add_argument("--limit", type=positive_int, help="run only the first N cases")
    test.add_argument("--filter", help="run cases whose name or id contains this, or this tag")
    test.add_argument("--prompt-version", dest="prompt_key", help="a registered prompt version")
    test.add_argument("--fresh", action="store_true", help="ignore an open resume journal")
    test.add_argument(
        "--trials",
        type=int,
        metavar="K",
        help="run every case K times (default: execution.trials or 1)",
    )
    verbosity = test.add_mutually_exclusive_group()
    verbosity.add_argument("-q", "--quiet", action="store_true")
    verbosity.add_argument("-v", "--verbose", action="store_true")
    test.set_defaults(handler=run_test_command)


def run_test_command(args: argparse.Namespace) -> int:
    from holodeck_core.config.loader import load_agent
    from holodeck_core.models import Trigger
    from holodeck_core.runner.suite import Suite, SuiteOptions

    if args.trials is not None and not 1 <= args.trials <= 100:
        print("error: --trials must be between 1 and 100", file=sys.stderr)
        return ExitCode.CONFIG
    loaded = load_agent(args.agent)
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
    )
    suite = Suite(loaded, options)
    run = asyncio.run(_run(suite, args))
    from holodeck_core.commands.stages import save_eval_run

    path = save_eval_run(run, suite)
    try:
        suite.finish()  # only now: until the EvalRun is on disk, the journal holds the paid work
    except OSError as exc:
        print(f"warning: the resume journal was not closed: {exc}", file=sys.stderr)
    _record_history(run, path, suite.project)
    from holodeck_core.commands.console import print_summary

    gate = loaded.agent.evaluations.gate if loaded.agent.evaluations else None
    print_summary(run, path, quiet=args.quiet, gate=gate)
    code = exit_code(run.report.results, gate)
    if suite.journal.failure is not None:  # the run is complete, the disk is not healthy
        print(f"error: {suite.journal.failure}", file=sys.stderr)
        code = ExitCode.worst(code, ExitCode.EXECUTION)
    if args.output:
        _write_report(run, args.output, args.format)
    return code


async def _run(suite: Suite, args: argparse.Namespace) -> EvalRun:
    from holodeck_core.commands.console import Progress
    from holodeck_core.commands.stages import preload_history

    try:
        await suite.open_tools()  # before Progress: the tools' identities pick the journal
        # only now, with the SDKs imported: a concurrent import would delay the first call
        preload_history()
        with Progress(suite, quiet=args.quiet, verbose=args.verbose) as progress:
            results = await suite.run_all(progress.case_done)
        return suite.eval_run(results, judge_control=await suite.score_judge_control())
    finally:
        await suite.aclose()


def exit_code(results: list[TestResult], gate: Gate | None) -> ExitCode:
    """§6.7: 3 for an execution ERROR, 4 for an ERROR from a fail_on_error metric only,
    1 for a FAIL, else 0. An ``evaluations.gate`` decides FAIL (by ``min_pass_rate``) and
    tolerates ERRORs only up to an explicit ``max_errors``."""
    from holodeck_core.models import Status

    errors = [r for r in results if r.status is Status.ERROR]
    codes = [ExitCode.OK]
    if gate is None or gate.max_errors is None or len(errors) > gate.max_errors:
        codes += [
            ExitCode.EVALUATION if r.error_source == "evaluation" else ExitCode.EXECUTION
            for r in errors
        ]
    if gate is None:
        failed = any(r.status is Status.FAIL for r in results)
    else:
        passed = sum(1 for r in results if r.status is Status.PASS)
        rate = passed / len(results) if results else 0.0
        failed = gate.min_pass_rate is not None and rate < gate.min_pass_rate
    if failed:
        codes.append(ExitCode.FAILED)
    return ExitCode.worst(*codes)


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


def _record_history(run: EvalRun, path: Path | UPath, project: Project) -> None:
    """Append the run to the DuckDB history. Best effort: the EvalRun file is the source of
    truth, and `holodeck history sync` ingests it later if the database is busy."""
    from holodeck_core.history.ingest import ingest_run
    from holodeck_core.history.lake import project_history

    try:
        ingest_run(
            project_history(project),
            run,
            source_path=path,
            prompts_dir=project.prompts_dir,
            lock_timeout=5,
        )
    except HolodeckError as exc:
        print(
            f"warning: the run history was not updated ({exc}); the EvalRun is safe, run "
            f"`holodeck history sync {path.parent}` later",
            file=sys.stderr,
        )
