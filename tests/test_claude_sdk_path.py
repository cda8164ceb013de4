"""``anthropic`` and ``ollama`` agents run as HoloDeck 0.7.1 runs them: the real ``holodeck test``
starts the Claude Code CLI the Claude Agent SDK bundles, against the loopback model server, with
the agent's tools behind the SDK's in-process MCP server; nothing lands in the agent's folder or
the temporary folder; ``execution.anthropic_path: direct`` is our loop and says so
(docs/holodeck-fidelity.md)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.cli.main import main
from holodeck_core.models import EvalRun, Status
from holodeck_core.testing import run_model_server

TOOLS_PY = "def get_weather(city: str) -> str:\n    return f'Sunny in {city}'\n"
WEATHER = {
    "name": "weather",
    "match": {"user": r"weather in (\w+)"},
    "tool_calls": [{"name": "mcp__holodeck_tools__get_weather", "arguments": {"city": "$1"}}],
    "reply": "{tool_result}",
}
RULES: dict[str, Any] = {
    "rules": [
        WEATHER,
        {"name": "slow", "match": {"user": "slowly"}, "reply": "late", "fault": {"kind": "slow"}},
        {"name": "capital", "match": {"user": "capital"}, "reply": "Paris"},
    ],
    "faults": {"slow_seconds": 30},
}
CASES = """\
- name: paris weather
  input: weather in Paris?
  ground_truth: Sunny in Paris
  expected_tools: [{name: get_weather, args: {city: Paris}}]
- {name: capital, input: capital of France?, ground_truth: Paris}
"""


def anthropic(url: str, key: str = "k") -> str:
    return f'{{provider: anthropic, name: claude-t, endpoint: "{url}", api_key: {key}}}'


def write_agent(folder: Path, model: str, cases: str = CASES, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tools.py").write_text(TOOLS_PY)
    agent = folder / "agent.yaml"
    agent.write_text(
        textwrap.dedent(f"""\
            name: claude-path
            model: {model}
            instructions: {{inline: "You are a weather agent."}}
            tools:
              - {{type: function, name: get_weather, description: Weather of a city,
                 file: tools.py, function: get_weather}}
            evaluations:
              metrics: [{{type: standard, metric: equality, case_insensitive: true}}]
            """)
        + extra
        + "test_cases:\n"
        + textwrap.indent(cases, "  ")
    )
    return agent


def listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if "results" not in p.parts}


def run(
    agent: Path, monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[int, EvalRun, set[str], list[str]]:
    """``holodeck test`` from the agent's folder, TMPDIR a folder of its own; the agent folder
    and TMPDIR's entries after the run (minus results/ and .holodeck/ state)."""
    tmp = agent.parent.parent / "tmpdir"
    tmp.mkdir(exist_ok=True)
    monkeypatch.chdir(agent.parent)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    before = listing(agent.parent)
    code = main(["test", str(agent), "-q", *args])
    [path] = sorted(agent.parent.glob("results/*/holodeck-pipelines/*.json"))[-1:]
    after = listing(agent.parent) - {p for p in listing(agent.parent) if p.startswith(".holodeck")}
    assert after == before, sorted(after ^ before)
    return code, EvalRun.model_validate_json(path.read_text()), after, os.listdir(tmp)


def test_anthropic_agent_runs_through_the_claude_cli_with_its_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_model_server(RULES) as server:
        model = anthropic(server.anthropic_base_url, "sk-ant-secret-777")
        code, eval_run, _, left = run(write_agent(tmp_path / "agent", model), monkeypatch)
        requests = server.requests()
    results = eval_run.report.results
    assert [(r.test_name, r.status) for r in results] == [
        ("paris weather", Status.PASS),
        ("capital", Status.PASS),
    ], [r.errors for r in results]
    assert results[0].tool_invocations[0].name == "get_weather"
    assert results[0].tool_invocations[0].args == {"city": "Paris"}
    assert code == 0 and left == []  # the CLI's HOME and cwd were removed
    assert eval_run.report.environment["agent_backend"] == "claude_agent_sdk"
    messages = [r for r in requests if r["path"] == "/v1/messages"]
    assert messages and all(r["query"].get("beta") == "true" for r in messages)  # the CLI's
    body = next(r["body"] for r in messages if r["body"].get("tools"))  # not the title's
    assert any("Claude Agent SDK" in block["text"] for block in body["system"])
    assert any("You are a weather agent." in b["text"] for b in body["system"])
    assert "mcp__holodeck_tools__get_weather" in {t["name"] for t in body["tools"]}
    assert not {"Bash", "Write", "Edit", "WebFetch"} & {t["name"] for t in body["tools"]}
    assert eval_run.report.summary.cost is not None
    agent = eval_run.report.summary.cost.headings["agent"]
    assert agent.calls == 2 and agent.prompt_tokens > 1000  # the SDK's results: every request
    out = capsys.readouterr()
    assert "sk-ant-secret-777" not in out.out + out.err
    assert "Traceback" not in out.err


def test_ollama_agent_sends_anthropic_messages_to_its_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with run_model_server(RULES) as server:
        for endpoint in (server.url, server.url + "/v1/"):  # both written as the samples do
            server.reset()
            model = f'{{provider: ollama, name: gpt-oss:20b, endpoint: "{endpoint}"}}'
            folder = tmp_path / f"agent{len(endpoint)}"
            code, eval_run, _, left = run(write_agent(folder, model), monkeypatch)
            paths = {r["path"] for r in server.requests()}
            assert code == 0 and left == [], [r.errors for r in eval_run.report.results]
            assert paths == {"/v1/messages"}, paths


def test_a_slow_turn_times_out_as_an_error_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = "- {name: slow, input: answer slowly}\n" + CASES.splitlines()[-1] + "\n"
    with run_model_server(RULES) as server:
        model = anthropic(server.anthropic_base_url, "k")
        agent = write_agent(tmp_path / "agent", model, cases)
        code, eval_run, _, left = run(agent, monkeypatch, "--timeout", "8")
    slow, capital = eval_run.report.results
    assert slow.status is Status.ERROR and "no answer within 8 s" in slow.errors[0], slow.errors
    assert capital.status is Status.PASS
    assert code == 3 and left == []
    assert "Traceback" not in capsys.readouterr().err


def test_direct_path_is_an_explicit_opt_in_that_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = {
        "rules": [
            {**WEATHER, "tool_calls": [{"name": "get_weather", "arguments": {"city": "$1"}}]},
            RULES["rules"][2],
        ]
    }
    with run_model_server(rules) as server:
        model = anthropic(server.anthropic_base_url, "k")
        extra = "execution: {anthropic_path: direct}\n"
        code, eval_run, _, _ = run(write_agent(tmp_path / "agent", model, extra=extra), monkeypatch)
        requests = server.requests()
    assert code == 0, [r.errors for r in eval_run.report.results]
    assert eval_run.report.environment["agent_backend"] == "direct"
    assert "did not run HoloDeck's agent" in eval_run.report.environment["agent_backend_note"]
    assert "did not run HoloDeck's agent" in capsys.readouterr().out
    assert all(not r.get("query") for r in requests)  # our SDK call, not the CLI's


def test_the_agents_tool_descriptions_are_cut_as_holodeck_cuts_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HoloDeck's Claude backend offers a tool description of more than 200 characters cut to
    197 and ``...``; one of 200 or fewer whole (what samples/financial-assistant/claude's
    archive tool shows the model). Measured on the request the CLI sends."""
    descriptions = {
        "long_ascii": "Weather of a city. " * 14,
        "exactly_200": "w" * 200,
        "just_over": "ü" * 201,
        "short": "Weather of a city",
    }
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "tools.py").write_text(TOOLS_PY)
    tools = "".join(
        f"  - {{type: function, name: {name}, description: '{text}', file: tools.py, "
        "function: get_weather}\n"
        for name, text in descriptions.items()
    )
    with run_model_server(RULES) as server:
        agent = folder / "agent.yaml"
        agent.write_text(
            f"name: cut\nmodel: {anthropic(server.anthropic_base_url)}\n"
            f"instructions: {{inline: Be brief.}}\ntools:\n{tools}"
            "test_cases:\n  - {name: capital, input: capital of France?}\n"
        )
        code, _, _, _ = run(agent, monkeypatch)
        bodies = [r["body"] for r in server.requests() if r["body"].get("tools")]
    assert code == 0 and bodies
    sent = {t["name"]: t["description"] for t in bodies[0]["tools"]}
    expected = {
        name: text if len(text) <= 200 else text[:197] + "..."
        for name, text in descriptions.items()
    }
    assert {n: sent[f"mcp__holodeck_tools__{n}"] for n in descriptions} == expected
    assert len(sent["mcp__holodeck_tools__long_ascii"]) == 200
