"""What ``holodeck test`` and ``holodeck matrix`` share (docs/cli.md): the options of a run
(``--parallel``, ``--timeout``, ``--limit``, ``--filter``, ``--fresh``, ``--trials``,
``--batch``) read into one :class:`~holodeck_core.engine.suite.SuiteOptions`, GitHub's job
summary file, and the warnings both print. Start-up stays light: the engine is imported when
the options are read."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.cli.argtypes import positive_int, positive_seconds, trial_count
from holodeck_core.defaults import (
    BATCH_MODE,
    BATCH_MODES,
    PARALLEL_TEST_CASES,
    TRIALS,
    TRIALS_MAX,
    TRIALS_MIN,
)

if TYPE_CHECKING:
    from holodeck_core.engine.suite import SuiteOptions


def add_run_arguments(parser: argparse.ArgumentParser, *, per_cell: bool = False) -> None:
    """The options of how a suite runs; their help speaks of every cell when ``per_cell``
    (``holodeck matrix``)."""
    parser.add_argument(
        "--parallel",
        type=positive_int,
        help=(
            "cases at once per cell and calls at once per endpoint" if per_cell else "cases at once"
        )
        + f" (default: execution.parallel_test_cases or {PARALLEL_TEST_CASES})",
    )
    parser.add_argument("--timeout", type=positive_seconds, help="seconds per model call")
    parser.add_argument("--limit", type=positive_int, help="run only the first N cases")
    parser.add_argument("--filter", help="run cases whose name or id contains this, or this tag")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="ignore the cells' resume journals" if per_cell else "ignore an open resume journal",
    )
    parser.add_argument(
        "--trials",
        type=trial_count,
        metavar="K",
        help=f"run every case{' of every cell' if per_cell else ''} K times, {TRIALS_MIN} to "
        f"{TRIALS_MAX} (default: execution.trials or {TRIALS})",
    )
    parser.add_argument(
        "--batch",
        choices=BATCH_MODES,
        help=(
            "each cell's agent turns and judges through the providers' batch APIs"
            if per_cell
            else "agent turns and judges through the providers' batch APIs at their batch prices"
        )
        + f" (default: execution.batch or {BATCH_MODE}; docs/cost.md)",
    )


def suite_options(
    args: argparse.Namespace, *, prompt_key: str | None = None, quiet: bool = False
) -> SuiteOptions:
    """The options :func:`add_run_arguments` parsed, for a run started at the command line
    (its arguments, the project's shared budgets, the cost estimator); batch progress lines
    on stderr unless ``quiet``."""
    from holodeck_core.cli.console import print_batch_line
    from holodeck_core.engine.run import run_estimate, shared_budgets
    from holodeck_core.engine.suite import SuiteOptions
    from holodeck_core.models import Trigger

    return SuiteOptions(
        parallel=args.parallel,
        timeout=args.timeout,
        limit=args.limit,
        filter=args.filter,
        fresh=args.fresh,
        prompt_key=prompt_key,
        trigger=Trigger.CLI,
        cli_args=sys.argv[1:],
        trials=args.trials,
        shared_budgets=shared_budgets(),
        estimator=run_estimate,
        batch=args.batch,
        on_batch=None if quiet else print_batch_line,
    )


def step_summary_file() -> Path | None:
    """GitHub's job summary file (``GITHUB_STEP_SUMMARY``), when GitHub Actions set one."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    return Path(path) if path else None


def print_warnings(warnings: Iterable[str | None]) -> None:
    """Each warning given (None: none) on stderr."""
    for warning in warnings:
        if warning is not None:
            print(f"warning: {warning}", file=sys.stderr)
