"""What ``holodeck test`` shows: a live progress bar on a terminal, plain lines otherwise,
then a summary table."""

from __future__ import annotations

import sys
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress
from rich.table import Table
from rich.text import Text

from holodeck_core.engine.report import case_line, metric_rows, summary_lines
from holodeck_core.models import EvalRun, Gate, Status, TestResult
from holodeck_core.terminal import one_line, plain

if TYPE_CHECKING:
    from upath import UPath

    from holodeck_core.engine.suite import Suite

_STYLE = {Status.PASS: "green", Status.FAIL: "red", Status.ERROR: "yellow"}


class Progress:
    """Reports each finished case. Context manager around the suite's run."""

    def __init__(self, suite: Suite, *, quiet: bool, verbose: bool) -> None:
        self.console = Console(stderr=True)
        self.quiet = quiet
        self.verbose = verbose
        self.total = len(suite.cases)
        self.secrets = suite.loaded.secrets
        self.live = self.console.is_terminal and not quiet
        self._bar: RichProgress | None = None
        self._task: TaskID | None = None
        resumable = suite.resumable
        if resumable and not quiet:
            unit = "cases" if suite.trials == 1 else f"case trials ({suite.trials} per case)"
            self.console.print(
                f"resuming: {resumable} of {self.total * suite.trials} {unit} come from the "
                "journal (no model calls for them); --fresh starts over"
            )

    def __enter__(self) -> Progress:
        if self.live:
            self._bar = RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("cases", total=self.total)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def case_done(self, result: TestResult, resumed: bool) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task)
        if self.quiet or (self.live and not self.verbose):
            return
        line = Text.assemble(
            plain(f"{result.status.value:<5}", _STYLE[result.status]),
            " ",
            plain(case_line(result, resumed, self.secrets)),
        )
        self.console.print(line, highlight=False, soft_wrap=True)


def print_summary(
    run: EvalRun,
    path: Path | UPath,
    *,
    quiet: bool,
    gate: Gate | None = None,
    verbose: bool = False,
) -> None:
    """The metric table, a headline, the gate, then the statistics: per metric with
    ``verbose`` only; each interval's method once (docs/cli.md#trials-and-error-bars)."""
    console = Console(file=sys.stdout)

    def say(line: str) -> None:
        console.print(plain(line), highlight=False, soft_wrap=True)

    if not quiet and run.report.summary.average_scores:
        console.print(_metric_table(run))
    for line in summary_lines(run, quiet=quiet, gate=gate, verbose=verbose):
        say(line)
    say(f"EvalRun: {path}")


def _metric_table(run: EvalRun) -> Table:
    table = Table(
        title=plain(f"{run.report.agent_name} · prompt {run.metadata.prompt_version.version}")
    )
    for column in ("metric", "average", "unit", "pass rate", "errors"):
        table.add_column(column)
    for name, *cells in metric_rows(run):
        table.add_row(plain(name), *cells)
    return table


def print_batch_line(line: str) -> None:
    """A batch progress line (``execution.batch``): batch ids come from the provider, shown
    literally on one line."""
    print(f"batch: {one_line(line)}", file=sys.stderr, flush=True)
