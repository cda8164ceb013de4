"""The pull-request gate around ``holodeck test``: ``--baseline REF`` (a paired comparison with
a prompt version's newest run or a run id), ``--summary FILE`` (Markdown for a PR comment),
and, when GitHub Actions' variables are set, the job summary (``GITHUB_STEP_SUMMARY``) and one
``::error`` annotation per failing case (``GITHUB_ACTIONS=true``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.cli.run_options import step_summary_file
from holodeck_core.defaults import ALPHA
from holodeck_core.errors import ExitCode
from holodeck_core.terminal import in_github_actions, print_workflow_command, printable

if TYPE_CHECKING:
    from holodeck_core.engine.suite import Suite
    from holodeck_core.models import EvalRun


def add_gate_arguments(parser: argparse.ArgumentParser) -> None:
    gate = parser.add_argument_group("pull-request gate")
    gate.add_argument(
        "--baseline",
        metavar="VERSION[:MODEL]|RUN",
        help="compare with this prompt version's newest run of the same model candidate "
        "(another with VERSION:MODEL; or a run id) with the paired test of `history compare`; "
        "a significant regression fails the run (exit 1)",
    )
    gate.add_argument(
        "--strict", action="store_true", help="with --baseline: any case that passed there fails"
    )
    gate.add_argument(
        "--summary", type=Path, metavar="FILE", help="write a Markdown summary for a PR comment"
    )


def apply_gate(
    args: argparse.Namespace, run: EvalRun, suite: Suite, agent_file: str, code: int
) -> int:
    """Compare, print the verdict, write the summaries and annotations; the exit code with a
    regression folded in (docs/cli.md: 1 unless something worse already happened)."""
    from holodeck_core.engine.baseline import compare_with_baseline
    from holodeck_core.engine.report import failure_annotations, write_pr_summary

    comparison = None
    if args.baseline:
        evaluations = suite.loaded.agent.evaluations
        comparison = compare_with_baseline(
            suite.project,
            run.metadata.run_id or "",
            args.baseline,
            strict=args.strict,
            alpha=(evaluations.alpha if evaluations else None) or ALPHA,
        )
        verdict = comparison.paired.pass_fraction.render() if comparison.paired else "no pairs"
        base = comparison.a
        print(
            printable(
                f"against baseline {args.baseline} (prompt {base['prompt_version']} · model "
                f"{base['model_candidate']}, run {str(base['run_id'])[:12]}): {verdict}"
            )
        )
        for reason in comparison.reasons:
            print(f"regression: {reason}", file=sys.stderr)
        if comparison.is_regression:
            code = ExitCode.worst(ExitCode(code), ExitCode.FAILED)
    write_pr_summary(
        run,
        comparison,
        baseline=args.baseline,
        passed_gate=code == 0,
        summary=args.summary,
        step_summary=step_summary_file(),
    )
    if in_github_actions():
        for line in failure_annotations(run, agent_file):
            print_workflow_command(line)
    return code
