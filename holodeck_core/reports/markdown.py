"""The Markdown report, in seed 000's layout (with ERROR kept apart from FAIL)."""

from __future__ import annotations

from holodeck_core.models import ExpectedTool, MetricResult, Status, TestReport, TestResult
from holodeck_core.reports.statistics import statistics_lines

_ICONS = {Status.PASS: "✅", Status.FAIL: "❌", Status.ERROR: "⚠️"}
_WORDS = {Status.PASS: "PASSED", Status.FAIL: "FAILED", Status.ERROR: "ERROR"}


def render_markdown(report: TestReport) -> str:
    summary = report.summary
    lines = [
        f"# Test Report: {report.agent_name}",
        "",
        f"**Date**: {report.timestamp}",
        f"**HoloDeck Version**: {report.holodeck_version}",
        f"**Tests**: {summary.passed} passed, {summary.failed} failed, {summary.errored} errored "
        f"({summary.pass_rate:.0f}% pass rate)",
        f"**Duration**: {(summary.wall_time_ms or summary.total_duration_ms) / 1000:.1f}s",
        "",
        "## Summary",
        "",
        "| Metric | Avg Score | Pass Rate | Errors |",
        "|--------|-----------|-----------|--------|",
    ]
    names = sorted({*summary.metrics_evaluated, *summary.metrics_errored})
    for name in names:
        average = summary.average_scores.get(name)
        rate = summary.metric_pass_rates.get(name)
        lines.append(
            f"| {name} | {'—' if average is None else f'{average:.2f}'} | "
            f"{'—' if rate is None else f'{rate:.0%}'} | {summary.metrics_errored.get(name, 0)} |"
        )
    if summary.statistics is not None:
        lines += ["", "## Statistics", ""]
        lines += [f"- {line}" for line in statistics_lines(summary.statistics)]
    lines += ["", "## Test Results", ""]
    for number, result in enumerate(report.results, start=1):
        lines += _result(number, result)
    return "\n".join(lines).rstrip() + "\n"


def _result(number: int, result: TestResult) -> list[str]:
    name = result.test_name or result.test_id or f"case {number}"
    lines = [
        f"### {_ICONS[result.status]} Test {number}: {name} ({_WORDS[result.status]})",
        "",
        f"**Input**: {_one_line(result.test_input)}",
        f"**Response**: {_one_line(result.agent_response or '(none)')}",
    ]
    if result.tool_calls or result.expected_tools:
        called = ", ".join(result.tool_calls) or "none"
        if result.tools_matched is None:
            verdict = ""
        else:
            verdict = " ✅ (matched expected)" if result.tools_matched else " ❌ (expected: "
            if not result.tools_matched:
                verdict += ", ".join(_expected(e) for e in result.expected_tools or []) + ")"
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
        lines += [f"- {_one_line(error)}" for error in result.errors]
    return [*lines, ""]


def _expected(item: str | ExpectedTool) -> str:
    """Object-form expectations render as text (HoloDeck 0.7.1 crashed here)."""
    if isinstance(item, str):
        return item
    args = ", ".join(f"{k}={v}" for k, v in (item.args or {}).items())
    return f"{item.name}({args})" + (f" x{item.count}" if item.count > 1 else "")


def _metric(metric: MetricResult) -> str:
    if metric.error is not None:
        return f"{metric.metric_name}: error: {_one_line(metric.error)} ⚠️"
    value = metric.score if metric.score is not None else metric.raw_score
    shown = "—" if value is None else f"{value:.2f}"
    if metric.unit:
        shown += f" {metric.unit}"
    threshold = "" if metric.threshold is None else f" / {metric.threshold:.2f}"
    return f"{metric.metric_name}: {shown}{threshold} {'✅' if metric.passed else '❌'}"


def _one_line(text: str, limit: int = 500) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
