"""MCP tools for real: the SDK's FastMCP server of tests/mcp_server.py over stdio and streamable
HTTP on 127.0.0.1, the real CLI and the loopback model server (docs/agent-yaml.md)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.cli.main import main
from holodeck_core.config.loader import load_agent
from holodeck_core.engine.suite import load_suite
from holodeck_core.models import EvalRun, Status, ToolInvocation
from holodeck_core.testing import request_key, run_model_server
from holodeck_core.tools.runtime import ToolCrashedError
from tests.conftest import REPO

SERVER = REPO / "tests" / "mcp_server.py"
CANARY = "canary-mcp-env-7f3a9c1e"
HEADER_CANARY = "canary-mcp-header-5b2d8e4f"
FILE_CANARY = "canary-mcp-env-file-91c0d2aa"


@pytest.fixture
def uvx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``command`` admits only npx, node, uvx and docker (HoloDeck's rule), so a ``uvx`` on
    PATH runs the test server with this interpreter. Returns the agent folder, which holds a
    copy of the server (its path tells its processes apart from other tests')."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "uvx"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    shutil.copy(SERVER, agent_dir / "mcp_server.py")
    return agent_dir


def write_agent(folder: Path, base_url: str, tool: str, cases: str) -> Path:
    agent = folder / "agent.yaml"
    agent.write_text(
        textwrap.dedent(f"""\
            name: mcp-test
            model: {{provider: openai, name: test-model, endpoint: "{base_url}",
                     api_key: sk-test-key-1234}}
            instructions: {{inline: "You are helpful."}}
            evaluations:
              metrics: [{{type: standard, metric: equality}}]
            tools:
            """)
        + textwrap.indent(textwrap.dedent(tool), "  ")
        + "test_cases:\n"
        + textwrap.indent(textwrap.dedent(cases), "  ")
    )
    return agent


def stdio_tool(*args: str, extra: str = "") -> str:
    quoted = ", ".join(f'"{a}"' for a in ["./mcp_server.py", *args])
    return (
        "- {type: mcp, name: testsrv, description: Test server, command: uvx,\n"
        f"   args: [{quoted}]{extra}}}\n"
    )


def call_rule(user: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "match": {"user": user},
        "tool_calls": [{"name": tool, "arguments": arguments}],
        "reply": "{tool_result}",
    }


RULES: dict[str, Any] = {
    "default": {"reply": "I don't know."},
    "rules": [
        call_rule("add two and three", "add", {"a": 2, "b": 3}),
        call_rule("which secret", "read_env", {"name": "API_TOKEN"}),
        call_rule("which file secret", "read_env", {"name": "FILE_TOKEN"}),
        call_rule("what config", "read_env", {"name": "MCP_CONFIG"}),
        call_rule("where are you", "where", {}),
        call_rule("please fail", "fail", {"reason": "no"}),
        call_rule("be slow", "slow", {"seconds": 30}),
    ],
}


def eval_run_of(agent: Path) -> tuple[EvalRun, str]:
    [path] = sorted((agent.parent / "results" / "mcp-test" / "holodeck-pipelines").glob("*.json"))
    text = path.read_text()
    return EvalRun.model_validate_json(text), text


def invocations(run: EvalRun) -> dict[str, ToolInvocation]:
    return {r.test_name or "": r.tool_invocations[0] for r in run.report.results}


def test_stdio_server_tools_run_for_real_and_secrets_stay_out(
    uvx: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (uvx / "server.env").write_text(f"FILE_TOKEN={FILE_CANARY}\n")
    tool = stdio_tool(
        extra=f",\n   env: {{API_TOKEN: {CANARY}, MCP_TEST_STDERR: 'stderr says {CANARY}'}},"
        "\n   env_file: server.env, config: {region: eu}, request_timeout: 1"
    )
    cases = """\
        - {name: add, input: add two and three, ground_truth: "5"}
        - {name: secret, input: which secret, ground_truth: x}
        - {name: file secret, input: which file secret, ground_truth: x}
        - {name: config, input: what config, ground_truth: x}
        - {name: cwd, input: where are you, ground_truth: x}
        - {name: fail, input: please fail, ground_truth: x}
        - {name: slow, input: be slow, ground_truth: x}
        """
    with run_model_server(RULES) as server:
        agent = write_agent(uvx, server.openai_base_url, tool, cases)
        code = main(["test", str(agent)])
    assert code == 1
    run, text = eval_run_of(agent)
    calls = invocations(run)
    assert calls["add"].result == "5" and calls["add"].args == {"a": 2, "b": 3}
    assert run.report.results[0].status is Status.PASS
    assert calls["config"].result == '{"region": "eu"}'  # config reaches the server as MCP_CONFIG
    assert calls["cwd"].result == str(uvx)  # the agent's folder is the server's cwd
    assert calls["fail"].error is not None and "refused: no" in calls["fail"].error
    assert calls["slow"].error == "MCP tool slow timed out after 1 s"
    assert calls["secret"].result == "***"  # the server saw the value; no output does
    assert calls["file secret"].result == "***"  # env_file values too
    out = capsys.readouterr()
    home = Path(os.environ["HOLODECK_HOME"])
    written = [
        text,
        out.out,
        out.err,
        *(p.read_bytes().decode("latin-1") for p in home.rglob("*") if p.is_file()),
    ]
    assert not [w for w in written if CANARY in w or FILE_CANARY in w]


def test_a_missing_command_is_a_config_error_before_any_model_call(
    uvx: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tool = (
        "- {type: mcp, name: fs, description: Files, command: npx, args: [x],\n"
        "   env: {PATH: /nowhere}}\n"
    )
    with run_model_server(RULES) as server:
        agent = write_agent(uvx, server.openai_base_url, tool, "- {input: hi}\n")
        code = main(["test", str(agent)])
        assert server.stats()["total_calls"] == 0
    err = capsys.readouterr().err
    assert code == 2 and "tools[0] (fs).command" in err and "'npx' is not found" in err
    assert "Traceback" not in err
    pinned = tool.replace("}\n", ", mock: {result: pinned}}\n")  # a mock still wins
    rules = {"rules": [call_rule("hi", "fs", {}), *RULES["rules"]]}
    with run_model_server(rules) as server:
        agent = write_agent(
            uvx, server.openai_base_url, pinned, "- {input: hi, ground_truth: pinned}\n"
        )
        assert main(["test", str(agent), "-q"]) == 0


def test_a_missing_env_file_is_a_config_error(
    uvx: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tool = stdio_tool(extra=", env_file: missing.env")
    agent = write_agent(uvx, "http://127.0.0.1:9/v1", tool, "- {input: hi}\n")
    assert main(["test", str(agent)]) == 2
    err = capsys.readouterr().err
    assert "env_file" in err and "missing.env" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("flag", "timeout", "reason"),
    [
        ("--exit-at-start", 60, "exited during the MCP handshake"),
        ("--hang", 2, "no answer to the MCP handshake within 2 s"),
    ],
)
def test_a_server_that_cannot_start_stops_the_run_with_its_redacted_stderr(
    uvx: Path, capsys: pytest.CaptureFixture[str], flag: str, timeout: int, reason: str
) -> None:
    env = f"{{MCP_TEST_STDERR: 'key {CANARY}'}}"
    tool = stdio_tool(flag, extra=f", timeout: {timeout}, env: {env}")
    with run_model_server(RULES) as server:
        agent = write_agent(uvx, server.openai_base_url, tool, "- {input: add two and three}\n")
        code = main(["test", str(agent)])
        assert server.stats()["total_calls"] == 0
    err = capsys.readouterr().err
    assert code == 3 and reason in err and "tools[0] (testsrv)" in err
    assert "its stderr ended with" in err and "***" in err and CANARY not in err
    assert "Traceback" not in err
    assert server_pids(uvx) == []


def test_a_server_dying_mid_run_is_restarted_once_and_the_rerun_resumes(
    uvx: Path, tmp_path: Path
) -> None:
    state = tmp_path / "calls"
    tool = stdio_tool(extra=f", env: {{MCP_TEST_STATE: '{state}', MCP_TEST_CRASH_ON: '2'}}")
    cases = "".join(
        f"- {{name: c{i}, input: 'add two and three ({i})', ground_truth: '5'}}\n" for i in range(4)
    )
    with run_model_server(RULES) as server:
        agent = write_agent(uvx, server.openai_base_url, tool, cases)
        assert main(["test", str(agent), "-q", "--parallel", "1"]) == 3
        run, _ = eval_run_of(agent)
        statuses = [r.status for r in run.report.results]
        assert statuses == [Status.PASS, Status.ERROR, Status.PASS, Status.PASS]
        assert "MCP server died" in run.report.results[1].errors[0]
        before = server.stats()["by_key"]
        for path in (agent.parent / "results").rglob("holodeck-pipelines/*.json"):
            path.unlink()
        assert main(["test", str(agent), "-q"]) == 0  # the journal stayed open: a resume
        after = server.stats()["by_key"]
    rerun, _ = eval_run_of(agent)
    assert [r.status for r in rerun.report.results] == [Status.PASS] * 4
    changed = [i for i in range(4) if after[key(i)] != before[key(i)]]
    assert changed == [1]  # only the unfinished case called the model again


def key(i: int) -> str:
    return request_key("responses", f"add two and three ({i})")


def server_pids(marker: Path) -> list[int]:
    """Live processes whose command line names ``marker`` (a folder only the test uses)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(marker) in cmdline and state != "Z" and int(proc.name) != os.getpid():
            pids.append(int(proc.name))
    return pids


def wait_until(condition: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_a_killed_or_interrupted_cli_leaves_no_server_behind(
    uvx: Path, sig: signal.Signals
) -> None:
    tool = stdio_tool(extra=", request_timeout: 120")
    with run_model_server(RULES) as server:
        agent = write_agent(uvx, server.openai_base_url, tool, "- {input: be slow}\n")
        proc = subprocess.Popen(
            [sys.executable, "-m", "holodeck_core.cli", "test", str(agent), "-q"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert wait_until(lambda: server.stats()["total_calls"] >= 1, 60)  # mid tool call
            assert server_pids(uvx)
        finally:
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=30)
    if sig is signal.SIGINT:
        assert proc.returncode == 3 and "Traceback" not in err
    assert wait_until(lambda: server_pids(uvx) == [], 5)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


NETWORK = {"http": ("streamable-http", "http", "/mcp"), "sse": ("sse", "http", "/sse")}
NETWORK["websocket"] = ("websocket", "ws", "/ws")


@pytest.fixture(params=sorted(NETWORK))
def network_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """(transport, url) of the test server on 127.0.0.1, over each network transport."""
    transport = str(request.param)
    served, scheme, path = NETWORK[transport]
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--transport", served, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def listening() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        assert wait_until(listening, 30)
        yield transport, f"{scheme}://127.0.0.1:{port}{path}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_network_servers_with_secret_headers(
    tmp_path: Path, network_server: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    transport, url = network_server
    headers = "" if transport == "websocket" else f"headers: {{X-Trace: {HEADER_CANARY}}}, "
    tool = (
        f"- {{type: mcp, name: remote, description: Remote, transport: {transport}, url: '{url}',"
        f"\n   {headers}timeout: 10, sse_read_timeout: 60,"
        "\n   terminate_on_close: true, is_retrieval: true}\n"
    )
    with run_model_server(RULES) as server:
        cases = "- {input: add two and three, ground_truth: '5'}\n"
        agent = write_agent(tmp_path, server.openai_base_url, tool, cases)
        assert main(["test", str(agent)]) == 0
    run, text = eval_run_of(agent)
    [invocation] = run.report.results[0].tool_invocations
    assert invocation.result == "5"
    assert invocation.retrieval_context == ["5"]  # is_retrieval: what RAG metrics read
    out = capsys.readouterr()
    assert HEADER_CANARY not in text + out.out + out.err


def test_websocket_without_headers_validates_and_with_headers_names_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tool = (
        "- {type: mcp, name: ws, description: WS, transport: websocket,\n"
        "   url: 'ws://127.0.0.1:9', headers: {A: b}}\n"
    )
    agent = write_agent(tmp_path, "http://127.0.0.1:9/v1", tool, "- {input: hi}\n")
    assert main(["test", str(agent)]) == 2
    assert "tools[0] (ws).headers" in capsys.readouterr().err


def test_the_journal_is_scoped_by_the_server_identity(uvx: Path, tmp_path: Path) -> None:
    """The case fingerprint holds env names (never values), the server's name and version and its
    tool list (docs/architecture.md); an upgraded server (one more tool, same config) gets another
    journal."""
    flag = tmp_path / "upgraded"
    env = f"{{API_TOKEN: {CANARY}, MCP_TEST_UPGRADED: '{flag}'}}"
    agent = write_agent(
        uvx, "http://127.0.0.1:9/v1", stdio_tool(extra=f", env: {env}"), "- {input: hi}\n"
    )

    def opened() -> tuple[dict[str, Any], Path]:
        suite = load_suite(load_agent(agent))

        async def go() -> tuple[dict[str, Any], Path]:
            await suite.open_tools()
            try:
                toolbox = suite.runtime.toolbox
                assert toolbox is not None
                return toolbox.identities()[0], suite.journal.path
            finally:
                await suite.aclose()

        return asyncio.run(go())

    plain, plain_journal = opened()
    flag.touch()
    upgraded, upgraded_journal = opened()
    assert plain["env"] == ["API_TOKEN", "MCP_TEST_UPGRADED"] and CANARY not in json.dumps(plain)
    assert (
        plain["server"] == upgraded["server"] and plain["server"]["name"] == "holodeck-test-server"
    )
    assert plain["transport"] == "stdio" and plain["command"] == "uvx"
    assert plain["tools"] != upgraded["tools"] and plain_journal != upgraded_journal
    assert server_pids(uvx) == []  # aclose stopped both


def test_allowed_tools_limit_the_offer_and_a_name_offered_twice_is_a_config_error(
    uvx: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    allowed = stdio_tool(extra=", config: {allowed_tools: [add]}")
    twice = allowed + allowed.replace("name: testsrv", "name: again")
    agent = write_agent(uvx, "http://127.0.0.1:9/v1", twice, "- {input: hi}\n")
    assert main(["test", str(agent), "-q"]) == 2
    err = capsys.readouterr().err
    assert "tools (again) offers a tool named 'add', as tools (testsrv) does" in err
    assert "where" not in err  # only the allowed tool was offered
    assert wait_until(lambda: server_pids(uvx) == [], 5)


def test_validate_tells_real_tools_from_mocked_ones(
    uvx: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = stdio_tool(extra=", load_prompts: true") + (
        "- {type: vectorstore, name: kb, description: KB, source: kb.md, mock: {result: x}}\n"
    )
    (uvx / "kb.md").write_text("kb")
    agent = write_agent(uvx, "http://127.0.0.1:9/v1", tools, "- {input: hi}\n")
    assert main(["validate", str(agent)]) == 0
    out = capsys.readouterr().out
    assert "run for real: testsrv" in out and "mocked: kb" in out
    assert "load_prompts is not supported" in out


def test_a_server_is_restarted_once_only(uvx: Path, tmp_path: Path) -> None:
    env = f"{{MCP_TEST_STATE: '{tmp_path / 'calls'}', MCP_TEST_CRASH_ON: '2,3'}}"
    agent = write_agent(
        uvx, "http://127.0.0.1:9/v1", stdio_tool(extra=f", env: {env}"), "- {input: hi}\n"
    )
    suite = load_suite(load_agent(agent))

    async def calls() -> list[str]:
        await suite.open_tools()
        toolbox = suite.runtime.toolbox
        assert toolbox is not None
        [runtime] = toolbox.runtimes
        outcomes = []
        try:
            for _ in range(4):
                try:
                    outcomes.append(str((await runtime.call("add", {"a": 1, "b": 1})).result))
                except ToolCrashedError as exc:
                    outcomes.append("down" if "restarted once already" in str(exc) else "died")
                outcomes.append(str(len(server_pids(uvx))))
        finally:
            await suite.aclose()
        return outcomes

    # ok; died and restarted (a live server); died again, not restarted; no server, no call
    assert asyncio.run(calls()) == ["2", "1", "died", "1", "died", "0", "down", "0"]
