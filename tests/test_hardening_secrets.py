"""Secrets past redaction (docs/agent-yaml.md): every encoding of a secret a server echoes
(JSON-escaped with quotes, backslashes and non-ASCII; URL-encoded; base64, and base64 of a
URL's ``user:pass``), a stderr tail cut inside a secret, a server's stray stdout logged by the
``mcp`` SDK, secrets in names and ids, refused at load, and what a function tool prints."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from holodeck_core.testing import run_model_server
from tests.conftest import REPO
from tests.hostile import agent_yaml, everything_written, no_traceback, run_cli
from tests.test_mcp_tools import server_pids, stdio_tool, uvx, write_agent  # noqa: F401

TOKEN = 'tök"en\\ünï-code-77aa'  # a quote, a backslash and non-ASCII: JSON escapes all three
USER, PASSWORD = "bob", "pa55word-xyz9"
ECHOES = {
    "json-ascii": json.dumps(TOKEN)[1:-1],
    "json-utf8": json.dumps(TOKEN, ensure_ascii=False)[1:-1],
    "url": quote(TOKEN, safe=""),
    "base64": base64.b64encode(TOKEN.encode()).decode(),
    "basic": base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(),
}


def test_every_encoding_of_a_secret_is_redacted_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SERVICE_TOKEN", TOKEN)
    rules: dict[str, Any] = {
        "default": {"reply": "ok"},
        "rules": [
            {"match": {"user": f"^{name}$"}, "reply": f"echo {echo} end"}
            for name, echo in ECHOES.items()
        ],
    }
    extra = f"""\
tools:
  - type: mcp
    name: svc
    description: a service
    url: "https://{USER}:{PASSWORD}@mcp.example/x"
    headers: {{X-Service: "${{SERVICE_TOKEN}}"}}
    mock: {{result: "ok"}}
"""
    cases = "".join(f"- {{name: {n}, input: {n}, ground_truth: ok}}\n" for n in ECHOES)
    with run_model_server(rules) as server:
        agent = agent_yaml(tmp_path / "a", server.openai_base_url, cases, extra=extra)
        proc = run_cli(["test", str(agent), "-v", "-o", str(tmp_path / "report.md")])
    no_traceback(proc)
    assert proc.returncode == 1, proc.stderr  # the echoes are not "ok"
    agent.unlink()
    outputs = "\n".join([proc.stdout, proc.stderr, everything_written(tmp_path)])
    for name, echo in ECHOES.items():
        assert echo not in outputs, name
    assert outputs.count("echo *** end") >= len(ECHOES)


def test_names_and_ids_holding_a_secret_are_refused_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("API_TOKEN", "tok-5e3c2b1a9d8f")
    monkeypatch.setenv("TOOL_API_KEY", "k5e3c2b1a9d8f")
    shapes = {
        "name": ('name: "agent-${API_TOKEN}"\n', "- {input: q}\n"),
        "case id": ("", "- {id: 'c-${API_TOKEN}', input: q}\n"),
        "case name": ("", "- {name: 'about ${API_TOKEN}', input: q}\n"),
        "tool name": (
            "tools:\n  - {type: function, name: 't_${TOOL_API_KEY}', description: d,"
            " file: t.py, function: f, mock: {result: x}}\n",
            "- {input: q}\n",
        ),
    }
    for shape, (head, cases) in shapes.items():
        folder = tmp_path / shape.replace(" ", "-")
        agent = agent_yaml(
            folder, "http://127.0.0.1:9/v1", cases, extra="" if head.startswith("name") else head
        )
        if head.startswith("name"):
            agent.write_text(agent.read_text().replace("name: hostile\n", head))
        (folder / "t.py").write_text("def f():\n    return 1\n")
        for command in (["validate", str(agent)], ["test", str(agent)]):
            proc = run_cli(command)
            no_traceback(proc)
            assert proc.returncode == 2, (shape, proc.stdout, proc.stderr)
            assert "holds a secret" in proc.stderr and "agent.yaml" in proc.stderr
            assert "5e3c2b1a9d8f" not in proc.stdout + proc.stderr
        assert not (folder / "results").exists()
    assert not list((tmp_path / "holodeck-home").rglob("*.md"))  # no prompt snapshot


CANARY = "canary-stderr-secret-0c9b8a7f6e5d"


def test_a_stderr_tail_cut_inside_a_secret_shows_no_half_of_it(uvx: Path) -> None:  # noqa: F811
    # the server's stderr ends "<CANARY> n…n\nfatal: cannot start\n"; the last 2,000 bytes
    # start inside the canary by ``inside`` bytes
    for inside in (1, len(CANARY) // 2, len(CANARY) - 1):
        after = 2000 - len(" \nfatal: cannot start\n") - (len(CANARY) - inside)
        env = f"{{API_TOKEN: {CANARY}, MCP_TEST_STDERR: '{CANARY} {'n' * after}'}}"
        tool = stdio_tool("--exit-at-start", extra=f", env: {env}")
        agent = write_agent(uvx, "http://127.0.0.1:9/v1", tool, "- {input: q}\n")
        proc = run_cli(["test", str(agent)])
        no_traceback(proc)
        assert proc.returncode == 3 and "its stderr ended with" in proc.stderr
        for half in (CANARY[:8], CANARY[-8:]):
            assert half not in proc.stderr, (inside, proc.stderr[-300:])
    assert server_pids(uvx) == []


SHORT = "cnry-5d4c3b2a1f0e"  # short: pydantic's error shows the whole stray line


def test_a_servers_stray_stdout_logged_by_the_sdk_is_redacted(uvx: Path) -> None:  # noqa: F811
    rules = {
        "default": {"reply": "ok"},
        "rules": [
            {"match": {"tool_result": True}, "reply": "ok"},
            {
                "match": {"user": "say"},
                "tool_calls": [{"name": "say", "arguments": {"name": "API_TOKEN"}}],
            },
        ],
    }
    tool = stdio_tool(extra=f", env: {{API_TOKEN: {SHORT}}}")
    with run_model_server(rules) as server:
        agent = write_agent(uvx, server.openai_base_url, tool, "- {input: say, ground_truth: ok}\n")
        proc = subprocess.run(  # a process of its own: pytest captures log records in its own
            [sys.executable, "-m", "holodeck_core.cli", "test", str(agent)],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )
    assert "Failed to parse JSONRPC message from server" in proc.stderr  # the SDK's own log
    assert SHORT not in proc.stdout + proc.stderr and "stray line: ***" in proc.stderr


PRINTED = "sk-printed-canary-8e7d6c5b4a39"
PRINTING_TOOLS = textwrap.dedent("""\
    import os, sys
    print("at import", os.environ["HOLO_KEY"])

    def shout(x: str = "") -> str:
        key = os.environ["HOLO_KEY"]
        print(key)                                  # a line of its own
        print("the key is", key, "ok")              # in pieces: one line
        sys.stderr.write("err:" + key + "\\n")     # stderr
        print(key[:12], end="", flush=True)         # a piece with no newline, flushed
        print(key[12:])
        print("tail", key, end="")                  # never ended by a newline
        return "done"
""")


def test_what_a_function_tool_prints_is_scrubbed(tmp_path: Path) -> None:
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "tools.py").write_text(PRINTING_TOOLS)
    rules = {
        "default": {"reply": "done"},
        "rules": [
            {"match": {"tool_result": True}, "reply": "done"},
            {"match": {"user": "go"}, "tool_calls": [{"name": "shout", "arguments": {}}]},
        ],
    }
    tools = (
        "tools:\n  - {type: function, name: shout, description: s, file: tools.py,"
        " function: shout}\n"
    )
    with run_model_server(rules) as server:
        agent = agent_yaml(
            folder,
            server.openai_base_url,
            "- {name: go, input: go, ground_truth: done}\n",
            api_key="${HOLO_KEY}",
            extra=tools,
        )
        proc = subprocess.run(  # a process of its own: the tool writes to the real stdout
            [sys.executable, "-m", "holodeck_core.cli", "test", str(agent), "-v"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
            env={**os.environ, "HOLO_KEY": PRINTED, "HOLODECK_HOME": str(tmp_path / "home")},
        )
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    console = proc.stdout + proc.stderr
    assert "the key is *** ok" in console and "err:***" in console  # it printed, scrubbed
    assert "at import ***" in console and "tail ***" in console
    written = everything_written(tmp_path)
    assert "done" in written  # the EvalRun and the history are there
    for piece in (PRINTED, PRINTED[:12], PRINTED[12:]):
        assert piece not in console + written, piece


def test_what_a_function_tool_prints_in_a_dagster_step_is_scrubbed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same tool in a materialization: its prints reach neither the event log, the
    materializations' metadata, the compute logs nor the project's files."""
    import dagster as dg

    from tests.dagster_helpers import geo_folder, materialize_v1

    monkeypatch.setenv("HOLO_KEY", PRINTED)
    root = tmp_path / "project"
    folder = geo_folder(root, "You call tools.")
    (folder / "tools.py").write_text(PRINTING_TOOLS)
    rules = {
        "default": {"reply": "done"},
        "rules": [
            {"match": {"tool_result": True}, "reply": "done"},
            {"match": {"user": "go"}, "tool_calls": [{"name": "shout", "arguments": {}}]},
        ],
    }
    with run_model_server(rules) as server, dg.instance_for_test() as instance:
        (folder / "agent.yaml").write_text(
            "name: Geo Agent\n"
            f"model: {{provider: openai, name: m, endpoint: '{server.openai_base_url}',"
            " api_key: '${HOLO_KEY}'}\n"
            "instructions: {file: prompts/v1.md}\n"
            "evaluations: {metrics: [{type: standard, metric: equality}]}\n"
            "tools:\n  - {type: function, name: shout, description: s, file: tools.py,"
            " function: shout}\n"
            "test_cases:\n  - {name: go, input: go, ground_truth: done}\n"
        )
        _, result = materialize_v1(root, instance)
        assert result.success
        logs = "\n".join(str(entry) for entry in instance.all_logs(result.run_id))
        storage = everything_written(Path(instance.root_directory))
    written = everything_written(root)
    assert "done" in written and "shout" in logs
    assert "the key is *** ok" in logs + storage  # the compute logs caught the prints
    for piece in (PRINTED, PRINTED[:12], PRINTED[12:]):
        assert piece not in logs + storage + written, piece
