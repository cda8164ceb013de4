"""What we print and render from outside text (docs/agent-yaml.md): under GitHub Actions
no printed line from a config, a model or a tool can be a workflow command, and the PR summary,
the job summary, the Markdown report and Dagster's ``report`` metadata render it as text.

Each run goes through the real CLI in a subprocess (``GITHUB_ACTIONS=true``,
``GITHUB_STEP_SUMMARY`` set) against the loopback model server; the Markdown is rendered by
markdown-it (CommonMark with raw HTML on, and GFM tables) to see what a reader would get."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from holodeck_core.cli.main import main
from holodeck_core.reports.markdown import markdown_code, markdown_text
from holodeck_core.terminal import WorkflowCommandGuard
from holodeck_core.testing import run_model_server
from tests.conftest import REPO
from tests.hostile import agent_yaml

COMMANDS = [
    "x\n::error title=spoof::pwned",
    "::add-mask::hidden",
    "  ::stop-commands::tok",
    "y\r::warning file=a.py::w",
    "##[error]old form",
    "%0A::error::encoded",
    "z\n\u3000::notice::wide blank",
]
MARKUP = [
    "<img src=http://evil.example/a.png>",
    "<script>alert(1)</script>",
    "[x](javascript:alert(1))",
    "![x](http://evil.example/a.png)",
    "cc @org/team and @octocat",
    "<!-- hidden --> a | b | c",
    "one\n| forged | row |\n## forged heading",
    "see www.evil.example, #12 and me@evil.example",
    "<a href='https://evil.example'>x</a> **bold** `code` $x$",
]
HOSTILE = COMMANDS + MARKUP
# A metric name with a newline reaches the statistics lines; an agent name long enough wraps the
# console table's title onto a line of its own, indented.
METRIC = "eq\n::warning::metric <b>m</b> @team"
AGENT = "spoof " + "w " * 30 + "::error::wrapped title"


def _cases() -> str:
    lines = []
    for number, name in enumerate(HOSTILE):
        lines.append(f"- {{name: {json.dumps(name)}, input: {json.dumps(f'q{number}')}, "
                     "ground_truth: ok}")  # fmt: skip
    return "\n".join(lines) + "\n"


def _rules() -> dict[str, object]:
    """Case ``q<n>`` gets hostile text back: replies for the commands, 400 errors whose
    message is hostile for the markup."""
    rules: list[dict[str, object]] = []
    for number, text in enumerate(HOSTILE):
        action: dict[str, object] = (
            {"reply": text}
            if number < len(COMMANDS)
            else {"fault": {"kind": "400", "message": text}}
        )
        rules.append({"match": {"user": f"q{number}"}, **action})
    return {"default": {"reply": "ok"}, "rules": rules}


def _run(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``holodeck test`` of the hostile agent as a GitHub Actions job runs it."""
    with run_model_server(_rules()) as server:
        agent = agent_yaml(
            tmp_path / "agent",
            server.openai_base_url,
            _cases(),
            name=json.dumps(AGENT),
            metric=f"{{type: standard, metric: equality, name: {json.dumps(METRIC)}}}",
        )
        env = {**os.environ, "GITHUB_ACTIONS": "true", "HOLODECK_HOME": str(tmp_path / "home")}
        env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "step-summary.md")
        out = tmp_path / "out"
        args = ["test", str(agent), "-v", "--summary", str(out / "summary.md")]
        proc = subprocess.run(
            [sys.executable, "-m", "holodeck_core.cli", *args, "-o", str(out / "report.md")],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
    return proc, out


@pytest.fixture(scope="module")
def hostile_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    return _run(tmp_path_factory.mktemp("ci-outputs"))


def command_lines(text: str) -> list[str]:
    """Every line GitHub's runner would take as a workflow command (it splits at CR and LF,
    trims leading blanks; ``##[`` is the older form, anywhere in a line)."""
    return [
        line
        for line in re.split(r"\r\n?|\n", text)
        if line.lstrip().startswith("::") or "##[" in line
    ]


ANNOTATION = re.compile(r"::error file=[^:,\r\n]*,title=[^:,\r\n]*::[^\r\n]*")


def test_no_printed_line_of_outside_text_is_a_workflow_command(
    hostile_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    proc, _ = hostile_run
    assert proc.returncode == 3, proc.stderr  # the 400s are execution errors
    assert "Traceback" not in proc.stderr
    assert "wrapped title" in proc.stdout and "metric" in proc.stdout  # the shapes were printed
    commands = command_lines(proc.stdout) + command_lines(proc.stderr)
    assert len(commands) == len(HOSTILE), commands  # one annotation per failing case, ours
    assert all(ANNOTATION.fullmatch(line) for line in commands), commands
    titles = "\n".join(commands)
    assert "· x%0A%3A%3Aerror title=spoof%3A%3Apwned FAIL::" in titles  # the toolkit's escapes
    assert "%250A%3A%3Aerror%3A%3Aencoded" in titles  # %0A stays text, never a newline
    # what was defused is still shown, readably
    shown = proc.stdout + proc.stderr
    assert "%3A:warning::metric" in shown and "#%23[error]old form" in shown
    assert "\n                 %3A:error::wrapped title" in proc.stdout  # the table's title


def _rendered(markdown: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


ACTIVE = ("<img", "<script", "<a ", "<a>", "<!--", "<b>", "<strong>bold", "<code>code", "<em>")
"""HTML that only outside text could have put there (our own Markdown has none of it)."""


def _assert_text_only(markdown: str) -> None:
    html = _rendered(markdown)
    for tag in ACTIVE:
        assert tag not in html, (tag, html)
    assert not any(h.startswith("forged") for h in re.findall(r"<h\d>(.*?)</h\d>", html))
    assert "<td>forged</td>" not in html and "<th>forged</th>" not in html
    assert not re.search(r"(?<!\w)@\w", markdown)  # mentions: @\u200dorg
    assert not re.search(r"#\d|https?://|www\.|\w@\w+\.", markdown, re.IGNORECASE)
    assert "\n::" not in markdown


def test_pr_summary_step_summary_and_report_render_outside_text_as_text(
    hostile_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = hostile_run
    summary = (out / "summary.md").read_text()
    step = (out.parent / "step-summary.md").read_text()
    report = (out / "report.md").read_text()
    assert step == summary
    assert summary.count("\n- ") >= len(HOSTILE)  # every failing case is listed
    for markdown in (summary, report):
        _assert_text_only(markdown)
    # the table of the report keeps its five columns whatever a metric is called
    rows = [line for line in report.splitlines() if line.startswith("|")]
    assert rows and all(len(re.findall(r"(?<!\\)\|", row)) == 6 for row in rows), rows
    assert "&lt;img src=http:\u200d//evil.example/a.png&gt;" in report
    assert "@\u200dorg/team" in report and "\\[x\\](javascript:alert(1))" in summary


@pytest.mark.parametrize(
    "text", [*HOSTILE, METRIC, "# h", "1. item", "- item", "+ x", "= x", "_em_ a__b__ snake_case"]
)
def test_markdown_text_keeps_one_line_of_text(text: str) -> None:
    for wrapped in (markdown_text(text), f"- {markdown_text(text)}", markdown_code(text)):
        html = _rendered(wrapped)
        assert html.count("<p>") + html.count("<li>") == 1, html  # one paragraph or item
        for tag in ("<h", "<table", "<ol", "<ul>\n<li><ul", "<br", "<strong", "<em"):
            assert tag not in html, (tag, html)
        if wrapped != markdown_code(text):  # a code span is never linked nor a mention
            _assert_text_only(wrapped)


@pytest.mark.parametrize(
    "chunks",
    [
        ["::error::x\n"],
        [":", ":error::x\n"],
        ["ok\n  ", "::warning::x\n"],
        ["a\r::add-mask::b\r\n"],
        ["##", "[error]x\n"],
        ["#", "#[error]x"],
        ["\u3000", "::notice::x"],
    ],
)
def test_the_guard_defuses_commands_split_across_writes_and_flushes(chunks: list[str]) -> None:
    raw = io.StringIO()
    guard = WorkflowCommandGuard(raw)
    for chunk in chunks:
        guard.write(chunk)
        guard.flush()
    guard.close_line()
    assert not command_lines(raw.getvalue()), raw.getvalue()
    assert raw.getvalue().replace("%3A", ":").replace("#%23[", "##[").rstrip("\n") == "".join(
        chunks
    ).rstrip("\n")


def test_dagster_report_metadata_renders_outside_text_as_text(tmp_path: Path) -> None:
    """The ``report`` Markdown a real Dagster run stores for its partition."""
    import dagster as dg

    from holodeck_core.config.loader import load_agent
    from holodeck_core.config.project import Project
    from holodeck_pipelines.builder import build_definitions
    from holodeck_pipelines.pools import apply_pools

    with run_model_server(_rules()) as server:
        metric = f"{{type: standard, metric: equality, name: {json.dumps(METRIC)}}}"
        agent = agent_yaml(
            tmp_path / "agent", server.openai_base_url, _cases(), name="hostile", metric=metric
        )
        assert main(["prompts", "register", str(agent)]) == 0
        (tmp_path / "holodeck.yaml").write_text("agents: [agent/agent.yaml]\n")
        defs = build_definitions(Project.discover(tmp_path))
        with dg.instance_for_test() as instance:
            [prompt] = load_agent(tmp_path / "agent" / "agent.yaml").active_prompts
            key = prompt.version.version
            instance.add_dynamic_partitions("hostile_prompt_versions", [key])
            apply_pools(instance, Project.discover(tmp_path))
            result = defs.resolve_job_def("Hostile_eval").execute_in_process(
                partition_key=f"default|{key}", instance=instance, raise_on_error=False
            )
            reports = [
                event.materialization.metadata["report"].value
                for event in result.get_asset_materialization_events()
                if "report" in event.materialization.metadata
            ]
    [report] = reports
    assert isinstance(report, str) and "<b>m</b>" not in report
    _assert_text_only(report)
    assert "&lt;img src=http:\u200d//evil.example/a.png&gt;" in report
