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

from holodeck_core.models import EvalRun, Gate, Status, TestResult
from holodeck_core.redaction import redact_text
from holodeck_core.reports.cost import cost_lines, usd
from holodeck_core.reports.statistics import infrastructure_line, statistics_lines
from holodeck_core.reports.units import format_average, metric_units
from holodeck_core.runner.gates import check_gate
from holodeck_core.runner.suite import Suite
from holodeck_core.stats.display import number
from holodeck_core.terminal import one_line, plain

if TYPE_CHECKING:
    from upath import UPath

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
        name = one_line(result.test_name or result.test_id or "")
        note = " (from journal)" if resumed else ""
        reason = (
            f": {one_line(result.errors[0])}"
            if result.errors and result.status is not Status.PASS
            else ""
        )
        # Names and errors come from configs and providers: shown literally, keys scrubbed.
        line = Text.assemble(
            plain(f"{result.status.value:<5}", _STYLE[result.status]),
            " ",
            plain(redact_text(f"{name}{note}{reason}", self.secrets)),
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
    summary = run.report.summary

    def say(line: str) -> None:
        console.print(plain(line), highlight=False, soft_wrap=True)

    if not quiet and summary.average_scores:
        console.print(_metric_table(run))
    say(headline(run))
    if gate is not None:
        say(check_gate(summary, gate).line)
    if summary.statistics is not None and not quiet:
        for line in statistics_lines(summary.statistics, verbose=verbose):
            say(line)
    if summary.cost is not None:
        lines = cost_lines(summary.cost, summary.passed)
        for line in lines[1:] if quiet else lines:  # quiet: the budget verdict, not the spend
            say(line)
    note = run.report.environment.get("agent_backend_note")
    if isinstance(note, str):
        say(f"note: {note}")
    say(f"EvalRun: {path}")


def _metric_table(run: EvalRun) -> Table:
    summary = run.report.summary
    table = Table(
        title=plain(f"{run.report.agent_name} · prompt {run.metadata.prompt_version.version}")
    )
    for column in ("metric", "average", "unit", "pass rate", "errors"):
        table.add_column(column)
    units = metric_units(run.report)
    for name in sorted({*summary.metrics_evaluated, *summary.metrics_errored}):
        average = summary.average_scores.get(name)
        rate = summary.metric_pass_rates.get(name)
        table.add_row(
            plain(name),
            format_average(average, units[name]),
            units[name],
            "—" if rate is None else f"{rate:.0%}",
            str(summary.metrics_errored.get(name, 0)),
        )
    return table


def headline(run: EvalRun) -> str:
    """``68.0% pass rate (95% CI 44.7% to 85.2%): 17 passed, 8 failed, 0 errored of 25 ·
    2 flaky · cost 0.008609 USD · latency 169 ms per case · 9.9 s``."""
    summary = run.report.summary
    stats = summary.statistics
    rate = f"{summary.pass_rate:.1f}% pass rate"
    if stats is not None and stats.pass_rate.low is not None and stats.pass_rate.high is not None:
        estimate = stats.pass_rate
        rate += f" ({estimate.confidence:.0%} CI {estimate.low:.1%} to {estimate.high:.1%})"
    parts = [
        f"{rate}: {summary.passed} passed, {summary.failed} failed, {summary.errored} errored "
        f"of {summary.total_tests}"
    ]
    if stats is not None and stats.trials > 1:
        parts.append(f"{len(stats.flaky_cases)} flaky")
    if summary.cost is not None:
        parts.append(f"cost {usd(summary.cost.total_usd)}")
    if summary.total_tests:
        latency = number(summary.total_duration_ms / summary.total_tests, unit="ms")
        parts.append(f"latency {latency} per case")
    parts.append(number((summary.wall_time_ms or 0) / 1000, unit="s"))
    if stats is not None and stats.infrastructure_failure:
        parts.insert(0, infrastructure_line(stats))
    return " · ".join(parts)


def print_batch_line(line: str) -> None:
    """A batch progress line (``execution.batch``): batch ids come from the provider, shown
    literally on one line."""
    print(f"batch: {one_line(line)}", file=sys.stderr, flush=True)
