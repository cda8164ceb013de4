"""JUnit XML for CI: FAIL is ``<failure>``, ERROR is ``<error>``, metric scores are
properties."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from holodeck_core.models import Status, TestReport
from holodeck_core.models.results import all_metric_results
from holodeck_core.reports.cost import cost_properties
from holodeck_core.reports.statistics import statistics_properties
from holodeck_core.terminal import escape_match

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """``text`` with what XML 1.0 forbids (ESC, BEL, ``\\x01``, lone surrogates, U+FFFE...)
    written out as ``\\xNN`` / ``\\uNNNN``, so every report parses."""
    return _NOT_XML.sub(escape_match, text)


def render_junit(report: TestReport) -> str:
    summary = report.summary
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=xml_text(report.agent_name),
        tests=str(summary.total_tests),
        failures=str(summary.failed),
        errors=str(summary.errored),
        skipped="0",
        time=f"{(summary.wall_time_ms or summary.total_duration_ms) / 1000:.3f}",
        timestamp=xml_text(report.timestamp),
    )
    flat = {
        **(
            {f"stats.{k}": f"{v:.6g}" for k, v in statistics_properties(summary.statistics).items()}
            if summary.statistics is not None
            else {}
        ),
        **(cost_properties(summary.cost) if summary.cost is not None else {}),
    }
    if flat:
        properties = ET.SubElement(suite, "properties")
        for key, text in flat.items():
            ET.SubElement(properties, "property", name=xml_text(key), value=xml_text(text))
    for number, result in enumerate(report.results, start=1):
        case = ET.SubElement(
            suite,
            "testcase",
            classname=xml_text(report.agent_name),
            name=xml_text(result.test_name or result.test_id or f"case {number}"),
            time=f"{result.execution_time_ms / 1000:.3f}",
        )
        metrics = all_metric_results(result)
        if metrics or result.test_id or result.trials:
            properties = ET.SubElement(case, "properties")
            if result.test_id:
                ET.SubElement(
                    properties, "property", name="test_id", value=xml_text(result.test_id)
                )
            if result.trials:
                ET.SubElement(
                    properties,
                    "property",
                    name="trials.passed",
                    value=f"{result.trial_passes}/{result.trial_count}",
                )
            for metric in metrics:
                value = metric.score if metric.score is not None else metric.raw_score
                ET.SubElement(
                    properties,
                    "property",
                    name=xml_text(f"metric.{metric.metric_name}"),
                    value="error" if value is None else f"{value:.6g}",
                )
        details = xml_text("\n".join(result.errors))
        failed_metrics = [xml_text(m.metric_name) for m in metrics if m.passed is False]
        if result.status is Status.FAIL:
            message = (
                f"below threshold: {', '.join(failed_metrics)}" if failed_metrics else details
            ) or "failed"
            ET.SubElement(case, "failure", message=message[:500]).text = details or message
        elif result.status is Status.ERROR:
            ET.SubElement(case, "error", message=(details or "error")[:500]).text = details
        if result.agent_response:
            ET.SubElement(case, "system-out").text = xml_text(result.agent_response)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode")
