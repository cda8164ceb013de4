"""A network MCP server (streamable HTTP, SSE, WebSocket) that dies mid-call (docs/agent-yaml.md,
class 18): every shape of death is ``tool_crashed``, a transient ERROR a rerun resumes, as a stdio
server's is; never a "timed out" tool error the model reads and the case PASSes on. The real CLI,
the loopback model server and real servers on 127.0.0.1: the SDK's FastMCP server of
tests/mcp_server.py killed, and tests/mcp_hostile_http.py resetting, half-sending or hanging up."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.models import Status
from holodeck_core.testing import run_model_server
from tests.conftest import REPO
from tests.hostile import no_traceback, run_cli
from tests.test_mcp_tools import NETWORK, eval_run_of, free_port, wait_until, write_agent

REQUEST_TIMEOUT = 20
"""Past every test's own run time: a call that waited for it is the defect."""


@contextmanager
def listening(command: list[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    import socket

    def up() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(up, 30)
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def rules(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "default": {"reply": "done"},
        "rules": [
            {"match": {"tool_result": True}, "reply": "done"},
            {"match": {"user": "go"}, "tool_calls": [{"name": tool, "arguments": arguments}]},
        ],
    }


def run_dying(
    tmp_path: Path, transport: str, url: str, tool: str, arguments: dict[str, Any]
) -> tuple[subprocess.CompletedProcess[str], float]:
    config = (
        f"- {{type: mcp, name: remote, description: Remote, transport: {transport}, url: '{url}',"
        f" request_timeout: {REQUEST_TIMEOUT}}}\n"
    )
    with run_model_server(rules(tool, arguments)) as server:
        agent = write_agent(
            tmp_path, server.openai_base_url, config, "- {input: go, ground_truth: done}\n"
        )
        started = time.monotonic()
        proc = run_cli(["test", str(agent), "-q"])
    return proc, time.monotonic() - started


def assert_crashed(tmp_path: Path, proc: subprocess.CompletedProcess[str], took: float) -> None:
    no_traceback(proc)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    run, _ = eval_run_of(tmp_path / "agent.yaml")
    [result] = run.report.results
    assert result.status is Status.ERROR, (result.status, result.errors, result.tool_invocations)
    [error] = result.errors
    assert error.startswith("tool_crashed: tools[0] (remote): "), error
    assert "timed out" not in error and result.error_source == "execution"
    assert took < REQUEST_TIMEOUT, took  # the death was seen, not waited out
    journal = tmp_path / "holodeck-home" / "journal"
    assert not list(journal.rglob("*.done"))  # transient: a rerun resumes the case
    assert all(j.read_text() == "" for j in journal.rglob("*.jsonl"))


@pytest.mark.parametrize("transport", sorted(NETWORK))
def test_a_network_server_killed_mid_call_is_tool_crashed(tmp_path: Path, transport: str) -> None:
    served, scheme, path = NETWORK[transport]
    port = free_port()
    server = [sys.executable, str(REPO / "tests" / "mcp_server.py"), "--transport", served]
    with listening([*server, "--port", str(port)], port):
        url = f"{scheme}://127.0.0.1:{port}{path}"
        proc, took = run_dying(tmp_path, transport, url, "die", {"how": "kill"})
    assert_crashed(tmp_path, proc, took)


@pytest.mark.parametrize("shape", ["reset", "half", "hangup", "exit"])
def test_a_streamable_http_call_cut_off_mid_response_is_tool_crashed(
    tmp_path: Path, shape: str
) -> None:
    port = free_port()
    server = [sys.executable, str(REPO / "tests" / "mcp_hostile_http.py"), str(port)]
    with listening(server, port):
        proc, took = run_dying(tmp_path, "http", f"http://127.0.0.1:{port}/mcp", shape, {})
    assert_crashed(tmp_path, proc, took)
