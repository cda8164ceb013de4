"""Lifecycle and surface (issue 25, class 12): a stdio MCP server's own children end with it,
whether the run is clean, the server cannot start or it dies mid-run."""

from __future__ import annotations

from pathlib import Path

import pytest

from holodeck_core.testing import run_model_server
from tests.hostile import no_traceback, run_cli
from tests.test_mcp_tools import RULES, server_pids, stdio_tool, uvx, wait_until, write_agent  # noqa: F401


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize(
    ("flag", "env", "code"),
    [
        ("", "", 0),  # a clean run: the server exits when its stdin closes, its child did not
        ("--exit-at-start", "", 3),  # the server cannot start
        ("", ", MCP_TEST_STATE: ./calls, MCP_TEST_CRASH_ON: '1'", 3),  # dies mid-call
    ],
)
def test_a_stdio_servers_children_end_with_it(
    uvx: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    flag: str,
    env: str,
    code: int,
) -> None:
    children = uvx / "children"
    tool = stdio_tool(
        *([flag] if flag else []), extra=f", env: {{MCP_TEST_CHILD: {children}{env}}}"
    )
    cases = "- {input: add two and three, ground_truth: '5'}\n"
    with run_model_server(RULES) as server:
        agent = write_agent(uvx, server.openai_base_url, tool, cases)
        monkeypatch.chdir(uvx)  # MCP_TEST_STATE is relative
        proc = run_cli(["test", str(agent)])
    no_traceback(proc)
    assert proc.returncode == code, proc.stdout + proc.stderr
    pid = int(children.read_text())
    assert not alive(pid)
    assert wait_until(lambda: server_pids(uvx) == [], 5), server_pids(uvx)
