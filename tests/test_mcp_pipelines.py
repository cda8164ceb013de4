"""A Dagster partition of an agent with an MCP tool: the agent step opens the server and
closes it; a server that dies mid-run fails the step after journaling (docs/dagster.md), and the
step's retry calls the model only for the unfinished case."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import dagster as dg
import pytest

from holodeck_core.config.project import Project
from holodeck_core.testing import request_key, run_model_server
from holodeck_pipelines.builder import build_definitions
from tests.conftest import REPO
from tests.dagster_helpers import history_rows, materialize, register
from tests.test_mcp_tools import (  # noqa: F401  (uvx: a fixture)
    CANARY,
    RULES,
    SERVER,
    server_pids,
    uvx,
    wait_until,
)


def make_project(root: Path, base_url: str, crash_flag: Path) -> Project:
    agent = root / "agents" / "geo"
    (agent / "prompts").mkdir(parents=True)
    (agent / "prompts" / "v1.md").write_text("---\nversion: v1\n---\nYou add numbers.\n")
    shutil.copy(SERVER, agent / "mcp_server.py")
    cases = "".join(
        f"  - {{name: c{a}, input: 'add two and three ({a})', ground_truth: '5'}}\n"
        for a in range(3)
    )
    (agent / "agent.yaml").write_text(
        textwrap.dedent(f"""\
            name: Geo Agent
            model: {{provider: openai, name: m, endpoint: "{base_url}", api_key: sk-test-123456}}
            instructions: {{file: prompts/v1.md}}
            execution: {{parallel_test_cases: 1}}
            tools:
              - {{type: mcp, name: calc, description: Calculator, command: uvx,
                 args: [./mcp_server.py],
                 env: {{MCP_TEST_CRASH_FLAG: '{crash_flag}', API_TOKEN: {CANARY},
                       MCP_TEST_STARTS: '{root / "starts"}'}}}}
            evaluations:
              metrics: [{{type: standard, metric: equality}}]
            test_cases:
            """)
        + cases
        + "  - {name: c13, input: 'add thirteen', ground_truth: '14'}\n"
        + "  - {name: secret, input: 'which secret', ground_truth: x}\n"
    )
    (root / "holodeck.yaml").write_text("agents: [agents/geo/agent.yaml]\n")
    return Project.discover(root)


def test_a_partition_with_an_mcp_tool_materializes_and_resumes_after_a_server_crash(
    uvx: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    crash_flag = tmp_path / "outage"
    crash_flag.touch()  # the server dies on c13's call, once
    rules = {
        **RULES,
        "rules": [
            {
                "match": {"user": "add thirteen"},
                "tool_calls": [{"name": "add", "arguments": {"a": 13, "b": 1}}],
                "reply": "{tool_result}",
            },
            *RULES["rules"],
        ],
    }
    root = tmp_path / "project"
    with run_model_server(rules) as server, dg.instance_for_test() as instance:
        project = make_project(root, server.openai_base_url, crash_flag)
        defs = build_definitions(project)
        assert register(defs, instance) == ["v1"]
        result = materialize(defs, instance, "v1")
        calls = server.stats()["by_key"]
        logs = [str(entry) for entry in instance.all_logs(result.run_id)]
    assert result.success and not crash_flag.exists()
    events = [e.event_type_value for e in result.all_events]
    assert events.count("STEP_UP_FOR_RETRY") == 1  # the attempt with the outage failed
    for a in range(3):  # finished before the outage: one tool round trip each, never repeated
        assert calls[request_key("responses", f"add two and three ({a})")] == 2
    # the crashed call, then a full retry
    assert calls[request_key("responses", "add thirteen")] == 3
    assert history_rows(project, "SELECT count(*), max(passed) FROM eval_runs") == [(1, 4)]
    starts = (root / "starts").read_text().split()
    assert len(starts) == 3  # attempt 1 and its restart, attempt 2: no other stage opened one
    assert logs and not [entry for entry in logs if CANARY in entry]  # metadata, logs: redacted
    assert CANARY.encode() not in project.history_db.read_bytes()
    assert server_pids(root) == []  # each attempt of the step closed its server


MATERIALIZE = """
import sys
from pathlib import Path
import dagster as dg
import pytest
from holodeck_core.config.project import Project
from holodeck_pipelines.builder import build_definitions
from tests.dagster_helpers import materialize, register
defs = build_definitions(Project.discover(Path(sys.argv[1])))
with dg.instance_for_test() as instance:
    register(defs, instance)
    materialize(defs, instance, "v1")
"""


@pytest.mark.slow  # the same stdin EOF as test_a_killed_or_interrupted_cli_leaves_no_server_behind
def test_a_killed_dagster_step_leaves_no_server_behind(uvx: Path, tmp_path: Path) -> None:  # noqa: F811
    root = tmp_path / "project"
    with run_model_server({"default": {"reply": "late", "latency": 120}}) as server:
        make_project(root, server.openai_base_url, tmp_path / "no-outage")
        proc = subprocess.Popen(
            [sys.executable, "-c", MATERIALIZE, str(root)],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:  # the agent step is waiting on the model: its server is up
            assert wait_until(lambda: server.stats()["in_flight"] >= 1, 120)
            assert server_pids(root)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    assert wait_until(lambda: server_pids(root) == [], 5)
