"""What an MCP server sends back, or fails to (docs/agent-yaml.md): a server that dies
with calls in flight makes every one of them ``tool_crashed`` (transient: the case is ERROR,
not journaled, and a rerun redoes it), whatever killed it; a huge result is cut once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from holodeck_core.defaults import MAX_TOOL_RESULT_BYTES as MAX_RESULT_BYTES
from holodeck_core.models import Status
from holodeck_core.testing import run_model_server
from tests.hostile import no_traceback, run_cli
from tests.test_mcp_tools import (  # noqa: F401  (uvx: a fixture)
    eval_run_of,
    server_pids,
    stdio_tool,
    uvx,
    write_agent,
)

IN_FLIGHT = 12


def slow_cases(n: int) -> str:
    return "".join(
        f"- {{name: s{i}, input: 'be slow {i}', ground_truth: done}}\n" for i in range(n)
    )


def rules(killer: dict[str, Any]) -> dict[str, Any]:
    return {
        "default": {"reply": "done"},
        "rules": [
            {"match": {"tool_result": True}, "reply": "done"},
            {
                "match": {"user": "be slow"},
                "tool_calls": [{"name": "slow", "arguments": {"seconds": 20}}],
            },
            {"match": {"user": "die now"}, "tool_calls": [killer], "latency": 1.5},
        ],
    }


KILLERS = {
    "exit": {"name": "die", "arguments": {"how": "exit"}},
    "kill": {"name": "die", "arguments": {"how": "kill"}},
    "garbage": {"name": "die", "arguments": {"how": "garbage"}},
    "close": {"name": "die", "arguments": {"how": "close"}},
}


@pytest.mark.parametrize("how", list(KILLERS))
def test_every_call_in_flight_when_the_server_dies_is_tool_crashed(
    uvx: Path,  # noqa: F811
    tmp_path: Path,
    how: str,
) -> None:
    cases = slow_cases(IN_FLIGHT) + "- {name: killer, input: die now, ground_truth: done}\n"
    tool = stdio_tool(extra=", request_timeout: 40")
    with run_model_server(rules(KILLERS[how])) as server:
        agent = write_agent(uvx, server.openai_base_url, tool, cases)
        text = agent.read_text()
        agent.write_text(
            text.replace("tools:", f"execution: {{parallel_test_cases: {IN_FLIGHT + 1}}}\ntools:")
        )
        proc = run_cli(["test", str(agent)])
    no_traceback(proc)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    run, _ = eval_run_of(agent)
    statuses = {r.test_name: r.status for r in run.report.results}
    assert all(statuses[f"s{i}"] is Status.ERROR for i in range(IN_FLIGHT)), statuses
    for result in run.report.results:
        if result.test_name != "killer":
            assert result.error_source == "execution" and "MCP server" in result.errors[0], (
                result.errors
            )
    assert server_pids(uvx) == []  # the server that went deaf but lived on, too
    journal = tmp_path / "holodeck-home" / "journal"
    assert not list(journal.rglob("*.done"))  # transient: not closed, a rerun resumes
    assert all(j.read_text() == "" for j in journal.rglob("*.jsonl"))  # and redoes every case


def test_a_huge_mcp_result_is_cut_once_with_a_marker(uvx: Path, tmp_path: Path) -> None:  # noqa: F811
    size = 5 * MAX_RESULT_BYTES
    big_rules = {
        "default": {"reply": "done"},
        "rules": [
            {"match": {"tool_result": True}, "reply": "done"},
            {
                "match": {"user": "big"},
                "tool_calls": [{"name": "big", "arguments": {"size": size}}],
            },
        ],
    }
    with run_model_server(big_rules) as server:
        agent = write_agent(
            uvx, server.openai_base_url, stdio_tool(), "- {input: big, ground_truth: done}\n"
        )
        proc = run_cli(["test", str(agent)])
    no_traceback(proc)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run, text = eval_run_of(agent)
    [invocation] = run.report.results[0].tool_invocations
    assert isinstance(invocation.result, str)
    assert invocation.result.endswith(
        f"[tool result truncated: {size:,} bytes, the limit is {MAX_RESULT_BYTES:,}]"
    )
    assert len(text) < 2 * MAX_RESULT_BYTES
    journal = sum(f.stat().st_size for f in (tmp_path / "holodeck-home" / "journal").rglob("*"))
    assert journal < 2 * MAX_RESULT_BYTES
