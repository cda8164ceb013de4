"""The Markdown report, in HoloDeck 0.7.1's layout (with ERROR kept apart from FAIL), and the one
way outside text (names, inputs, replies, errors) enters any Markdown we write: the report,
the pull-request summary and the Dagster metadata render it as text (:func:`markdown_text`,
:func:`markdown_code`)."""

from __future__ import annotations

import re

from holodeck_core.defaults import REPORT_LINE_CHARS, SHOWN_LINE_CHARS
from holodeck_core.models import EvalRun, ExpectedTool, MetricResult, Status, TestResult
from holodeck_core.reports.cost import cost_lines
from holodeck_core.reports.statistics import statistics_lines
from holodeck_core.reports.units import format_average, metric_units
from holodeck_core.terminal import one_line

ENGINE = "holodeck-pipelines"
"""The engine that ran the suite; ``holodeck_version`` holds its version (HoloDeck's field)."""
_ICONS = {Status.PASS: "✅", Status.FAIL: "❌", Status.ERROR: "⚠️"}
_WORDS = {Status.PASS: "PASSED", Status.FAIL: "FAILED", Status.ERROR: "ERROR"}


def render_markdown(run: EvalRun) -> str:
    report, meta = run.report, run.metadata
    summary = report.summary
    model = meta.agent_config.model
    lines = [
        f"# Test Report: {markdown_text(report.agent_name)}",
        "",
        f"**Date**: {report.timestamp}",
        f"**Engine**: {ENGINE} {report.holodeck_version}",
        f"**Prompt Version**: {markdown_text(meta.prompt_version.version)}",
        f"**Model**: {model.provider.value} {markdown_text(model.name)}",
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
        average = format_average(summary.average_scores.get(name), units[name])
        lines.append(
            f"| {markdown_text(name)} | {average} | "
            f"{units[name]} | {'—' if rate is None else f'{rate:.0%}'} | "
            f"{summary.metrics_errored.get(name, 0)} |"
        )
    if summary.statistics is not None:
        lines += ["", "## Statistics", ""]
        lines += [f"- {_ours(line)}" for line in statistics_lines(summary.statistics)]
    if summary.cost is not None:
        lines += ["", "## Cost", ""]
        lines += [f"- {_ours(line)}" for line in cost_lines(summary.cost, summary.passed)]
    lines += ["", "## Test Results", ""]
    for number, result in enumerate(report.results, start=1):
        lines += _result(number, result)
    return "\n".join(lines).rstrip() + "\n"


def _result(number: int, result: TestResult) -> list[str]:
    name = markdown_text(result.test_name or result.test_id or f"case {number}")
    lines = [
        f"### {_ICONS[result.status]} Test {number}: {name} ({_WORDS[result.status]})",
        "",
        f"**Input**: {markdown_text(result.test_input)}",
        f"**Response**: {markdown_text(result.agent_response or '(none)')}",
    ]
    if result.tool_calls or result.expected_tools:
        called = markdown_text(", ".join(result.tool_calls)) or "none"
        if result.tools_matched is None:
            verdict = ""
        else:
            verdict = " ✅ (matched expected)" if result.tools_matched else " ❌ (expected: "
            if not result.tools_matched:
                expected = ", ".join(_expected(e) for e in result.expected_tools or [])
                verdict += markdown_text(expected) + ")"
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
        lines += [f"- {markdown_text(error)}" for error in result.errors]
    return [*lines, ""]


def _expected(item: str | ExpectedTool) -> str:
    """Object-form expectations render as text (HoloDeck 0.7.1 crashed here)."""
    if isinstance(item, str):
        return item
    args = ", ".join(f"{k}={v}" for k, v in (item.args or {}).items())
    return f"{item.name}({args})" + (f" x{item.count}" if item.count > 1 else "")


def _metric(metric: MetricResult) -> str:
    if metric.error is not None:
        return f"{markdown_text(metric.metric_name)}: error: {markdown_text(metric.error)} ⚠️"
    value = metric.score if metric.score is not None else metric.raw_score
    shown = "—" if value is None else f"{value:.2f}"
    if metric.unit:
        shown += f" {metric.unit}"
    threshold = "" if metric.threshold is None else f" / {metric.threshold:.2f}"
    mark = "✅" if metric.passed else "❌"
    return f"{markdown_text(metric.metric_name)}: {shown}{threshold} {mark}"


def _ours(line: str) -> str:
    """A line of ours naming outside things (flaky cases, metrics, cost headings)."""
    return markdown_text(line, limit=REPORT_LINE_CHARS)


# Markdown and HTML syntax (CommonMark's and GitHub's: tables, strikethrough, math; "_" only
# where it can emphasise, so snake_case stays as it is) and the
# triggers of GitHub's autolinks and references: "@name" and "@org/team" mentions, e-mail
# addresses, "#12" issues, "http://" / "www." URLs.
_SPECIAL = re.compile(
    r"[\\`*~\[\]|$<>&]|(?<![^\W_])_|_(?![^\W_])|@(?=[\w-]+\.\w)|(?<!\w)@(?=\w)|#(?=\d)|:(?=//)"
    r"|(?i:(?<=www)\.)"
)
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
INERT = "\u200d"
"""A zero-width joiner: after ``@``, ``#``, the ``:`` of ``://`` or the ``www`` of ``www.``, it
keeps a mention, a reference or a URL from being linked; a reader sees the same text."""
_BLOCK_START = re.compile(r"^(?:[-+=#]|\d+(?=[.)]))")
"""What would make the text a list item, a heading or a setext underline where it starts a
line (or follows a list marker of ours)."""


def _escape(match: re.Match[str]) -> str:
    char = match[0]
    if char in _ENTITIES:
        return _ENTITIES[char]
    if char == ".":  # www.
        return INERT + char
    if char in "@#:":
        return char + INERT
    return "\\" + char


def _unblock(match: re.Match[str]) -> str:
    marker = match[0]
    return marker + "\\" if marker[0].isdigit() else "\\" + marker


def markdown_text(text: str, limit: int = SHOWN_LINE_CHARS) -> str:
    """``text`` as Markdown that renders it literally on one line (at most ``limit``
    characters before escaping): no HTML or comments, images, links or autolinks, mentions
    or references, emphasis, code, math or table cells; control characters escaped."""
    escaped = _SPECIAL.sub(_escape, one_line(text, limit))
    return _BLOCK_START.sub(_unblock, escaped, count=1)


def markdown_code(text: str) -> str:
    """``text`` as an inline code span (literal, never linked), on one line: its fence is
    longer than any run of backticks inside."""
    flat = one_line(text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    padded = f" {flat} " if flat.startswith("`") or flat.endswith("`") else flat
    return f"{fence}{padded}{fence}"
