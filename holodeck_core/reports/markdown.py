"""The Markdown report, in seed 000's layout (with ERROR kept apart from FAIL)."""

from __future__ import annotations

from holodeck_core.models import EvalRun, ExpectedTool, MetricResult, Status, TestResult
from holodeck_core.reports.cost import cost_lines
from holodeck_core.reports.statistics import statistics_lines
from holodeck_core.reports.units import format_average, metric_units
from holodeck_core.terminal import one_line

ENGINE = "holodeck-pipelines"
"""The engine that ran the suite; ``holodeck_version`` holds its version (seed 000's field)."""
_ICONS = {Status.PASS: "✅", Status.FAIL: "❌", Status.ERROR: "⚠️"}
_WORDS = {Status.PASS: "PASSED", Status.FAIL: "FAILED", Status.ERROR: "ERROR"}


def render_markdown(run: EvalRun) -> str:
    report, meta = run.report, run.metadata
    summary = report.summary
    model = meta.agent_config.model
    lines = [
        f"# Test Report: {one_line(report.agent_name)}",
        "",
        f"**Date**: {report.timestamp}",
        f"**Engine**: {ENGINE} {report.holodeck_version}",
        f"**Prompt Version**: {meta.prompt_version.version}",
        f"**Model**: {model.provider.value} {model.name}",
        f"**Tests**: {summary.passed} passed, {summary.failed} failed, {summary.errored} errored "
        f"({summary.pass_rate:.0f}% pass rate)",
        f"**Duration**: {(summary.wall_time_ms or summary.total_duration_ms) / 1000:.1f}s",
        "",
        "## Summary",
        "",
        "| Metric | Average | Unit | Pass Rate | Errors |",
        "|--------|---------|------|-----------|--------|",
    ]
    names = sorted({*summary.metrics_evaluated, *summary.metrics_errored})
    units = metric_units(report)
    for name in names:
        rate = summary.metric_pass_rates.get(name)
        lines.append(
            f"| {_cell(name)} | {format_average(summary.average_scores.get(name), units[name])} | "
            f"{units[name]} | {'—' if rate is None else f'{rate:.0%}'} | "
            f"{summary.metrics_errored.get(name, 0)} |"
        )
    if summary.statistics is not None:
        lines += ["", "## Statistics", ""]
        lines += [f"- {line}" for line in statistics_lines(summary.statistics)]
    if summary.cost is not None:
        lines += ["", "## Cost", ""]
        lines += [f"- {line}" for line in cost_lines(summary.cost)]
    lines += ["", "## Test Results", ""]
    for number, result in enumerate(report.results, start=1):
        lines += _result(number, result)
    return "\n".join(lines).rstrip() + "\n"


def _result(number: int, result: TestResult) -> list[str]:
    name = one_line(result.test_name or result.test_id or f"case {number}")
    lines = [
        f"### {_ICONS[result.status]} Test {number}: {name} ({_WORDS[result.status]})",
        "",
        f"**Input**: {one_line(result.test_input)}",
        f"**Response**: {one_line(result.agent_response or '(none)')}",
    ]
    if result.tool_calls or result.expected_tools:
        called = one_line(", ".join(result.tool_calls)) or "none"
        if result.tools_matched is None:
            verdict = ""
        else:
            verdict = " ✅ (matched expected)" if result.tools_matched else " ❌ (expected: "
            if not result.tools_matched:
                expected = ", ".join(_expected(e) for e in result.expected_tools or [])
                verdict += one_line(expected) + ")"
        lines.append(f"**Tools Called**: {called}{verdict}")
    if result.trials:
        marks = "".join(_ICONS[t.status] for t in result.trials)
        lines.append(f"**Trials**: {result.trial_passes}/{result.trial_count} passed {marks}")
    lines.append(f"**Execution Time**: {result.execution_time_ms / 1000:.1f}s")
    metrics = list(result.metric_results) + [
        m for turn in result.turns or [] for m in turn.metric_results
    ]
    if metrics:
        lines += ["", "**Metrics**:"]
        lines += [f"- {_metric(m)}" for m in metrics]
    if result.errors:
        lines += ["", "**Errors**:"]
        lines += [f"- {one_line(error)}" for error in result.errors]
    return [*lines, ""]


def _expected(item: str | ExpectedTool) -> str:
    """Object-form expectations render as text (HoloDeck 0.7.1 crashed here)."""
    if isinstance(item, str):
        return item
    args = ", ".join(f"{k}={v}" for k, v in (item.args or {}).items())
    return f"{item.name}({args})" + (f" x{item.count}" if item.count > 1 else "")


def _metric(metric: MetricResult) -> str:
    if metric.error is not None:
        return f"{one_line(metric.metric_name)}: error: {one_line(metric.error)} ⚠️"
    value = metric.score if metric.score is not None else metric.raw_score
    shown = "—" if value is None else f"{value:.2f}"
    if metric.unit:
        shown += f" {metric.unit}"
    threshold = "" if metric.threshold is None else f" / {metric.threshold:.2f}"
    return f"{one_line(metric.metric_name)}: {shown}{threshold} {'✅' if metric.passed else '❌'}"


def _cell(text: str) -> str:
    """A table cell: one line, ``|`` escaped so it cannot split the row."""
    return one_line(text).replace("|", "\\|")
