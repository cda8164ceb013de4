"""What a finished run says to a person, and the reports written beside its EvalRun: the lines
of the console summary (the metric table's rows, the headline, the gate, the statistics, the
cost), one finished case's line, the exit code its results earn, ``holodeck test --output``'s
report and the pull-request summary of the gate (docs/cli.md). Text comes back as values;
the CLI prints it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.errors import ExitCode
from holodeck_core.models import Status
from holodeck_core.redaction import redact_text
from holodeck_core.reports.cost import cost_lines, usd
from holodeck_core.reports.statistics import infrastructure_line, statistics_lines
from holodeck_core.reports.units import format_average, metric_units
from holodeck_core.runner.gates import check_gate, exit_code
from holodeck_core.stats.display import number
from holodeck_core.terminal import one_line

if TYPE_CHECKING:
    from holodeck_core.engine.record import RecordedRun
    from holodeck_core.engine.suite import Suite
    from holodeck_core.history.queries import Comparison
    from holodeck_core.models import EvalRun, Gate, TestResult

REPORT_SUFFIXES = {".md": "markdown", ".xml": "junit"}
"""``--output``'s format from its suffix when ``--format`` is not given (else JSON)."""


def run_exit_code(run: EvalRun, gate: Gate | None) -> ExitCode:
    """The exit code the run's results earn under the agent's gate (docs/cli.md)."""
    return exit_code(run.report.results, gate)


def recorded_failures(recorded: RecordedRun, suite: Suite) -> list[str]:
    """What failed around a complete run: its resume journal or its history write. Nothing
    is lost, but the disk or the database is not whole (an execution error, docs/cli.md)."""
    return [f for f in (suite.journal.failure, recorded.history_error) if f is not None]


def recorded_exit_code(recorded: RecordedRun, suite: Suite) -> ExitCode:
    """The exit code of a recorded run: its results under the agent's gate, made an
    execution error by any of :func:`recorded_failures` (docs/cli.md)."""
    code = run_exit_code(recorded.run, suite.loaded.agent.gate)
    if recorded_failures(recorded, suite):
        return ExitCode.worst(code, ExitCode.EXECUTION)
    return code


def metric_rows(run: EvalRun) -> list[tuple[str, str, str, str, str]]:
    """The summary table's rows: metric, average, unit, pass rate, errors."""
    summary = run.report.summary
    units = metric_units(run.report)
    rows = []
    for name in sorted({*summary.metrics_evaluated, *summary.metrics_errored}):
        rate = summary.metric_pass_rates.get(name)
        rows.append(
            (
                name,
                format_average(summary.average_scores.get(name), units[name]),
                units[name],
                "—" if rate is None else f"{rate:.0%}",
                str(summary.metrics_errored.get(name, 0)),
            )
        )
    return rows


def summary_lines(run: EvalRun, *, quiet: bool, gate: Gate | None, verbose: bool) -> list[str]:
    """Below the metric table: the headline, the gate, the statistics (per metric with
    ``verbose`` only; each interval's method once, docs/cli.md#trials-and-error-bars), the
    cost (quiet: the budget verdict, not the spend) and the backend's note."""
    summary = run.report.summary
    lines = [headline(run)]
    if gate is not None:
        lines.append(check_gate(summary, gate).line)
    if summary.statistics is not None and not quiet:
        lines += statistics_lines(summary.statistics, verbose=verbose)
    if summary.cost is not None:
        spent = cost_lines(summary.cost, summary.passed)
        lines += spent[1:] if quiet else spent
    note = run.report.environment.get("agent_backend_note")
    if isinstance(note, str):
        lines.append(f"note: {note}")
    return lines


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


def case_line(result: TestResult, resumed: bool, secrets: Iterable[str]) -> str:
    """A finished case after its status: its name, whether the journal held it, and why it
    did not pass. Names and errors come from configs and providers: one line each, the
    agent's secrets scrubbed."""
    name = one_line(result.test_name or result.test_id or "")
    note = " (from journal)" if resumed else ""
    reason = (
        f": {one_line(result.errors[0])}"
        if result.errors and result.status is not Status.PASS
        else ""
    )
    return redact_text(f"{name}{note}{reason}", secrets)


def write_report(run: EvalRun, output: Path, fmt: str | None) -> str | None:
    """``--output``: the report in ``fmt`` (else by the file's suffix); it comes after the
    EvalRun is safe on disk, so a failure loses nothing and comes back as a warning."""
    from holodeck_core.reports import render_junit, render_markdown

    chosen = fmt or REPORT_SUFFIXES.get(output.suffix, "json")
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
        return (
            f"the {chosen} report could not be written to {output}: {exc} "
            "(the EvalRun above is complete)"
        )
    return None


def write_pr_summary(
    run: EvalRun,
    comparison: Comparison | None,
    *,
    baseline: str | None,
    passed_gate: bool,
    summary: Path | None,
    step_summary: Path | None,
) -> None:
    """The Markdown summary for a PR comment written to ``summary`` (replaced) and appended
    to GitHub's job summary file ``step_summary``, each when given."""
    from holodeck_core.reports.pr_summary import render_pr_summary

    if summary is None and step_summary is None:
        return
    text = render_pr_summary(run, comparison, baseline=baseline, passed_gate=passed_gate)
    write_summaries(text, summary, step_summary)


def write_summaries(text: str, summary: Path | None, step_summary: Path | None) -> None:
    """``--summary``'s Markdown written to ``summary`` (replaced) and appended to GitHub's job
    summary file ``step_summary``, each when given (``holodeck test`` and ``holodeck
    matrix``)."""
    if summary is not None:
        summary.parent.mkdir(parents=True, exist_ok=True)
        summary.write_text(text, encoding="utf-8")
    if step_summary is not None:
        with step_summary.open("a", encoding="utf-8") as out:
            out.write(text)


def failure_annotations(run: EvalRun, agent_file: str) -> list[str]:
    """GitHub's ``::error`` workflow commands, one per failing case, pointing at the agent
    file."""
    from holodeck_core.reports.github import error_annotations

    return error_annotations(run, file=agent_file)
