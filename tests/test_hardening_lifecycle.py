"""Lifecycle and surface (docs/agent-yaml.md): a stdio MCP server's own children end with it,
whether the run is clean, the server cannot start or it dies mid-run; the dashboard answers
only to the names of this machine (DNS rebinding); a big file without aliases is no alias
bomb; a history lock that outlived its retries is exit 3."""

from __future__ import annotations

import http.client
import multiprocessing as mp
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from holodeck_core.config import yaml_source
from holodeck_core.reports.markdown import markdown_text
from holodeck_core.testing import run_model_server
from tests.dashboard_harness import running
from tests.history_helpers import build_history
from tests.hostile import agent_yaml, everything_written, no_traceback, run_cli
from tests.test_history_ingest import _hold_writer
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


def status_for(base: str, host: str, path: str = "/") -> tuple[int, str]:
    """What the server at ``base`` answers a GET of ``path`` sent with ``Host: host``."""
    where = urlsplit(base)
    connection = http.client.HTTPConnection(where.hostname or "", where.port, timeout=30)
    try:
        connection.putrequest("GET", path, skip_host=True)
        connection.putheader("Host", host)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


def test_the_dashboard_answers_only_to_this_machines_names(tmp_path: Path) -> None:
    db = tmp_path / "history.duckdb"
    build_history(db)
    with (tmp_path / "log").open("w") as log, running(db, log) as base:
        port = urlsplit(base).port
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "LocalHost"):
            for path in ("/", "/_dash-layout"):
                assert status_for(base, host, path)[0] == 200, (host, path)
        for host in (
            f"evil.example:{port}",  # a rebound name
            f"localhost.evil.example:{port}",
            f"127.0.0.1.nip.io:{port}",
            "",
            "[::1",
            "127.0.0.1@evil.example",
        ):
            for path in ("/", "/_dash-layout", "/_dash-update-component"):
                status, body = status_for(base, host, path)
                assert status in (400, 421), (host, path, status)
                assert "HoloDeck" not in body and "history" not in body, (host, path)


def test_the_host_it_serves_on_is_answered_too(tmp_path: Path) -> None:
    from holodeck_core.dashboard.app import create_app

    db = tmp_path / "history.duckdb"
    build_history(db)
    for served, ok, refused in (
        ("dash.lan", "dash.lan:8501", "other.lan:8501"),
        ("::1", "[::1]", "[::2]"),
        ("10.0.0.7", "10.0.0.7:80", "10.0.0.8"),
    ):
        client = create_app(db, served).server.test_client()
        assert client.get("/", headers={"Host": ok}).status_code == 200, served
        assert client.get("/", headers={"Host": "localhost"}).status_code == 200, served
        assert client.get("/", headers={"Host": refused}).status_code == 421, served


def test_a_big_file_without_aliases_is_bounded_by_its_size_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 1,000,000-case file was refused as an alias bomb: here the alias bound is lowered
    to 1,000 values and a 2,000-case file (14,000 values, no alias) loads, up to the size cap,
    while a bomb of 6,561 values and an anchor reused past the bound are refused."""
    monkeypatch.setattr(yaml_source, "MAX_YAML_NODES", 1000)
    cases = "".join(f"- {{name: c{i}, input: q{i}, ground_truth: a}}\n" for i in range(2000))
    agent = agent_yaml(tmp_path / "big", "http://127.0.0.1:9/v1", cases)
    size = len(agent.read_text())
    for cap, code in ((size, 0), (size - 1, 2)):
        monkeypatch.setattr(yaml_source, "MAX_YAML_BYTES", cap)
        proc = run_cli(["validate", str(agent)])
        no_traceback(proc)
        assert proc.returncode == code, proc.stdout + proc.stderr[-500:]
    assert "split the test cases" in proc.stderr
    monkeypatch.setattr(yaml_source, "MAX_YAML_BYTES", 64 * 1024 * 1024)
    laughs = "- {input: q, tags: &l0 [a, a, a, a, a, a, a, a, a]}\n" + "".join(
        f"- {{input: q, tags: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]}}\n" for i in range(1, 5)
    )
    tagged = "- {name: c0, input: q, tags: &t [x, y, z]}\n"
    shapes = {  # a reused tag list adds 4 values
        "laughs": (laughs, 2),
        "reused past the bound": (tagged + reused(400), 2),
        "reused within it": (tagged + reused(100), 0),
    }
    for shape, (cases, code) in shapes.items():
        small = agent_yaml(tmp_path / shape, "http://127.0.0.1:9/v1", cases)
        proc = run_cli(["validate", str(small)])
        no_traceback(proc)
        assert proc.returncode == code, (shape, proc.stderr[-500:])
        if code:
            assert "billion laughs" in proc.stderr and "agent.yaml" in proc.stderr, shape


def reused(count: int) -> str:
    return "".join(f"- {{name: c{i + 1}, input: q, tags: *t}}\n" for i in range(count))


def test_a_history_lock_that_outlives_its_retries_is_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``test``, ``rescore`` and ``history sync`` with another process holding the write lock:
    exit 3 (docs/cli.md) naming the holder, the EvalRun on disk; the sync after it ingests."""
    monkeypatch.setenv("HOLODECK_HISTORY_LOCK_TIMEOUT", "0.3")
    db = tmp_path / "holodeck-home" / "history.duckdb"
    with run_model_server({"default": {"reply": "ok"}}) as server:
        agent = agent_yaml(
            tmp_path / "a", server.openai_base_url, "- {input: q, ground_truth: ok}\n"
        )
        assert run_cli(["test", str(agent), "-q"]).returncode == 0  # creates the database
        context = mp.get_context("spawn")
        acquired, release = context.Event(), context.Event()
        holder = context.Process(target=_hold_writer, args=(str(db), acquired, release, 120))
        holder.start()
        try:
            assert acquired.wait(timeout=60)
            [first] = sorted((agent.parent / "results").glob("*/*.json"))
            results = str(first.parent)
            runs = {
                "test": run_cli(["test", str(agent), "-q"]),
                "rescore": run_cli(["rescore", str(first)]),
                "sync": run_cli(["history", "sync", results]),
            }
        finally:
            release.set()
            holder.join(timeout=60)
    for command, proc in runs.items():
        no_traceback(proc)
        assert proc.returncode == 3, (command, proc.stdout, proc.stderr)
        assert f"PID {holder.pid}" in proc.stderr and "history sync" in proc.stderr, command
    assert len(list(first.parent.glob("*.json"))) == 3  # the first run, the test, the rescore
    sync = run_cli(["history", "sync", results])
    assert sync.returncode == 0 and "synced 2 run(s)" in sync.stderr, sync.stderr


WRAPPED = {  # what the model says -> what every output shows
    "query": (
        "see `https://h.example/x?key=k3y-abcdef123456` now",
        "`https://h.example/x?key=***`",
    ),
    "argv": ("run `tool --api-key=abcdef123456`", "`tool --api-key=***`"),
    "link": (
        "[docs](https://h.example/?token=abcdef123456&b=1)",
        "(https://h.example/?token=***&b=1)",
    ),
    "paren": ("(https://h.example/?sig=abcdef123456)", "(https://h.example/?sig=***)"),
}


def test_a_redacted_url_keeps_what_wraps_it(tmp_path: Path) -> None:
    rules = {
        "default": {"reply": "ok"},
        "rules": [{"match": {"user": f"^{n}$"}, "reply": said} for n, (said, _) in WRAPPED.items()],
    }
    cases = "".join(f"- {{name: {n}, input: {n}, ground_truth: ok}}\n" for n in WRAPPED)
    report = tmp_path / "report.md"
    with run_model_server(rules) as server:
        agent = agent_yaml(tmp_path / "a", server.openai_base_url, cases)
        proc = run_cli(["test", str(agent), "-v", "-o", str(report)])
    no_traceback(proc)
    assert proc.returncode == 1, proc.stderr  # no reply is "ok"
    markdown, results = report.read_text(), everything_written(tmp_path / "a" / "results")
    for name, (_, shown) in WRAPPED.items():
        # the Markdown report shows outside text as text: escaped, links inert
        assert markdown_text(shown) in markdown and shown in results, (name, shown)
        assert "abcdef123456" not in markdown + results + proc.stdout + proc.stderr
