"""Unbounded loops on server input (docs/agent-yaml.md): a tool list whose cursor never ends,
a server offering 60,000 tools, a tool schema nested 120 levels. Each is a clear start error
(exit 3) before any model call, naming the tool config; no traceback, no process left."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from holodeck_core.testing import run_model_server
from tests.conftest import REPO
from tests.hostile import no_traceback, run_cli
from tests.test_mcp_tools import server_pids, uvx, write_agent  # noqa: F401

HOSTILE = REPO / "tests" / "mcp_hostile_server.py"


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("cursor", "did not end within 100 pages"),
        ("many", "more than 50,000 tools"),
        ("deep", "nested too deeply to read"),
        ("deep60", "input schema nests deeper than 64 levels"),
    ],
)
def test_a_hostile_tool_list_is_a_clear_start_error(
    uvx: Path,  # noqa: F811
    mode: str,
    reason: str,
) -> None:
    shutil.copy(HOSTILE, uvx / "hostile.py")
    tool = (
        "- {type: mcp, name: hostile, description: h, command: uvx,"
        f" args: [./hostile.py, {mode}]}}\n"
    )
    with run_model_server({"default": {"reply": "ok"}}) as server:
        agent = write_agent(uvx, server.openai_base_url, tool, "- {input: q, ground_truth: ok}\n")
        proc = run_cli(["test", str(agent)])
        calls = server.stats()["total_calls"]
    no_traceback(proc)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "tools[0] (hostile)" in proc.stderr and reason in proc.stderr, proc.stderr
    assert calls == 0
    assert server_pids(uvx) == []


def test_an_ordinary_tool_list_still_opens(uvx: Path) -> None:  # noqa: F811
    shutil.copy(HOSTILE, uvx / "hostile.py")
    tool = (
        "- {type: mcp, name: hostile, description: h, command: uvx, args: [./hostile.py, fine]}\n"
    )
    with run_model_server({"default": {"reply": "ok"}}) as server:
        agent = write_agent(uvx, server.openai_base_url, tool, "- {input: q, ground_truth: ok}\n")
        proc = run_cli(["test", str(agent)])
    assert proc.returncode == 0, proc.stderr
