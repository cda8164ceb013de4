"""Hostile text (docs/agent-yaml.md): redaction stays linear, reports stay
well-formed, and nothing from data is ever read as Rich markup or sent as a terminal escape.

Time is never compared with a threshold: the scaling checks compare the CPU time of the
same function on an input and on one four times as long (linear: ~4x; quadratic: ~16x)."""

from __future__ import annotations

import io
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from holodeck_core.cli.console import Progress, print_summary
from holodeck_core.models import EvalRun, MetricResult, Status, TestReport
from holodeck_core.redaction import redact_text, register_secret
from holodeck_core.reports import render_junit, render_markdown
from tests.test_models import make_run

SECRET = "sk-fuzz-canary-7f3a9b2c4d5e"
# Characters that the redaction patterns and Rich markup care about, plus what XML and
# terminals must never receive raw.
HOSTILE = "-:/@?&=;x_+ Bearer\t\n[]/\\*.#'\"<>\x00\x01\x07\x1b\x7f\x9b\u202e\ufffe"
units = st.text(alphabet=st.sampled_from(list(HOSTILE)), min_size=1, max_size=24)
fuzz = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def cpu_time(function: Callable[[], object]) -> float:
    """The least CPU time of three calls (other processes on the machine do not count)."""
    best = float("inf")
    for _ in range(2):
        start = time.process_time()
        function()
        best = min(best, time.process_time() - start)
    return best


def assert_linear(function: Callable[[str], object], unit: str, size: int) -> None:
    small = unit * (size // len(unit) + 1)
    large = small * 4
    t_small = max(cpu_time(lambda: function(small)), 1e-3)
    t_large = cpu_time(lambda: function(large))
    assert t_large < 12 * t_small, (repr(unit), t_small, t_large)


def run_with(text: str) -> EvalRun:
    """A run whose report's every free-text field holds ``text``."""
    run = make_run()
    result = run.report.results[0].model_copy(
        update={
            "test_name": f"case {text}",
            "test_id": f"id{text}",
            "test_input": text,
            "agent_response": text,
            "errors": [text],
            "status": Status.ERROR,
            "metric_results": [
                MetricResult(metric_name=f"m{text}", score=0.5, passed=False, error=text)
            ],
        }
    )
    report = run.report.model_copy(update={"agent_name": f"agent {text}", "results": [result]})
    return run.model_copy(update={"report": report})


def report_with(text: str) -> TestReport:
    return run_with(text).report


def console_lines(text: str) -> str:
    """What the progress lines and the summary print for a case and metric named ``text``."""
    report = report_with(text)
    suite: Any = SimpleNamespace(cases=[1], resumable=0, loaded=SimpleNamespace(secrets=()))
    progress = Progress(suite, quiet=False, verbose=True)
    buffer = io.StringIO()
    progress.console = Console(file=buffer, force_terminal=True, width=120)
    progress.live = False
    progress.case_done(report.results[0], resumed=False)
    return buffer.getvalue()


@fuzz
@given(unit=units)
def test_redaction_is_linear_on_hostile_repetitions(unit: str) -> None:
    assert_linear(redact_text, unit, 64_000)


@pytest.mark.parametrize(
    "unit",
    ["x", "-", "a://", "--token", "Bearer ", "?key=&", "https://u:", "sk-fuzz-c", "@:"],
)
def test_redaction_is_linear_on_the_known_worst_cases(unit: str) -> None:
    register_secret(SECRET)
    assert_linear(redact_text, unit, 250_000)


@fuzz
@given(prefix=st.text(max_size=200), suffix=st.text(max_size=200))
def test_a_secret_or_its_echoed_pieces_never_survive(prefix: str, suffix: str) -> None:
    register_secret(SECRET)
    masked = f"{SECRET[:8]}{'*' * 12}{SECRET[-4:]}"
    for text in (f"{prefix}{SECRET}{suffix}", f"{prefix} {masked} {suffix}"):
        out = redact_text(text)
        assert SECRET not in out and SECRET[:8] not in out.replace(prefix, "").replace(suffix, "")


@fuzz
@given(text=st.text(max_size=3000) | units.map(lambda u: u * 200))
def test_junit_and_markdown_are_well_formed_for_any_text(text: str) -> None:
    report = report_with(text)
    root = ET.fromstring(render_junit(report).encode("utf-8"))  # raises if not well-formed
    assert root.find("testsuite/testcase") is not None
    markdown = render_markdown(run_with(text))
    assert "\x1b" not in markdown and "\x07" not in markdown
    headings = [line for line in markdown.splitlines() if line.startswith("### ")]
    assert len(headings) == 1  # a newline in the name cannot start another section


@fuzz
@given(text=st.text(max_size=2000) | units.map(lambda u: u * 100))
def test_console_never_reads_data_as_markup_or_passes_escapes(text: str) -> None:
    out = console_lines(text)  # a MarkupError would raise here
    printed = out.replace("\x1b[", "")  # Rich's own styling codes
    assert "\x1b" not in printed and "\x07" not in printed and "\x9b" not in printed


@pytest.mark.parametrize("text", ["[bold]x[/]", "[/y]", "[/messages/0/content]", ":smile:"])
def test_markup_in_data_is_shown_literally(text: str) -> None:
    out = console_lines(text)
    assert f"case {text}" in out


@pytest.mark.parametrize(
    "writer",
    [
        lambda t: render_junit(report_with(t)),
        lambda t: render_markdown(run_with(t)),
        console_lines,
        redact_text,
    ],
    ids=["junit", "markdown", "console", "redaction"],
)
def test_writers_take_several_megabytes_in_linear_time(writer: Callable[[str], str]) -> None:
    register_secret(SECRET)
    assert_linear(writer, "ab-[/x]\x1b:/?key=1&", 600_000)  # and 2.4 MB


def test_summary_prints_hostile_names_literally(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run()
    data = run.model_dump(mode="json")
    data["report"]["agent_name"] = data["metadata"]["agent_config"]["name"] = "agent [/a]"
    data["report"]["summary"]["average_scores"] = {"eq [/m]": 1.0}
    data["report"]["summary"]["metrics_evaluated"] = {"eq [/m]": 1}
    print_summary(EvalRun.model_validate(data), tmp_path / "[red]x[/].json", quiet=False)
    out = capsys.readouterr().out
    assert "eq [/m]" in out and "agent [/a]" in out and "[red]x[/].json" in out


@pytest.mark.parametrize(
    ("secret", "text"),
    [
        ("dummy-claude_code_oauth_token", "auth_provider: oauth_token"),
        ("dummy-opensearch_password", "provider: opensearch, the password field"),
    ],
)
def test_words_inside_a_secret_are_not_redacted(secret: str, text: str) -> None:
    register_secret(secret)
    assert redact_text(text) == text
    assert redact_text(f"echoed {secret[:12]}****") == "echoed *******"
