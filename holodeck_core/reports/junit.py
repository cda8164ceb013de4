"""JUnit XML for CI: FAIL is ``<failure>``, ERROR is ``<error>``, metric scores are
properties."""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

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
    """JUnit valid against both public schemas strict consumers use (Jenkins xUnit's
    ``junit-10.xsd`` and Windy Road's ``JUnit.xsd``, see tests/fixtures/junit): a test case
    holds only its outcome, so per-case scores are suite properties named
    ``case.<id>.<key>`` and the agent's answers are the suite's ``system-out``."""
    summary = report.summary
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=xml_text(report.agent_name) or "holodeck",
        tests=str(summary.total_tests),
        failures=str(summary.failed),
        errors=str(summary.errored),
        skipped="0",
        time=f"{(summary.wall_time_ms or summary.total_duration_ms) / 1000:.3f}",
        timestamp=_local_timestamp(report.timestamp),
        hostname=xml_text(socket.gethostname()) or "localhost",
        id="0",
        package=xml_text(report.agent_name) or "holodeck",
    )
    properties = ET.SubElement(suite, "properties")
    if summary.statistics is not None:
        for key, number in statistics_properties(summary.statistics).items():
            _property(properties, f"stats.{key}", f"{number:.6g}")
    if summary.cost is not None:
        for key, text in cost_properties(summary.cost).items():
            _property(properties, key, text)
    output = []
    for number, result in enumerate(report.results, start=1):
        name = xml_text(result.test_name or result.test_id or f"case {number}")
        case = ET.SubElement(
            suite,
            "testcase",
            classname=xml_text(report.agent_name) or "holodeck",
            name=name,
            time=f"{result.execution_time_ms / 1000:.3f}",
        )
        key = f"case.{xml_text(result.test_id or str(number))}"
        metrics = all_metric_results(result)
        if result.trials:
            _property(
                properties, f"{key}.trials.passed", f"{result.trial_passes}/{result.trial_count}"
            )
        for metric in metrics:
            value = metric.score if metric.score is not None else metric.raw_score
            _property(
                properties,
                f"{key}.metric.{xml_text(metric.metric_name)}",
                "error" if value is None else f"{value:.6g}",
            )
        details = xml_text("\n".join(result.errors))
        failed_metrics = [xml_text(m.metric_name) for m in metrics if m.passed is False]
        if result.status is Status.FAIL:
            message = (
                f"below threshold: {', '.join(failed_metrics)}" if failed_metrics else details
            ) or "failed"
            failure = ET.SubElement(case, "failure", message=message[:500], type="threshold")
            failure.text = details or message
        elif result.status is Status.ERROR:
            kind = result.error_source or "execution"
            error = ET.SubElement(case, "error", message=(details or "error")[:500], type=kind)
            error.text = details
        if result.agent_response:
            output.append(f"--- {name}\n{xml_text(result.agent_response)}")
    ET.SubElement(suite, "system-out").text = "\n".join(output)
    ET.SubElement(suite, "system-err").text = ""
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode")


def _property(parent: ET.Element, name: str, value: str) -> None:
    """A property; its name may hold a metric's or a case's text (written out, see xml_text)."""
    ET.SubElement(parent, "property", name=xml_text(name), value=value)


def _local_timestamp(timestamp: str) -> str:
    """The run's UTC time as ``YYYY-MM-DDTHH:MM:SS``: the schemas take no zone, no fraction."""
    try:
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        moment = datetime.now(UTC)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S")
