"""Targets (issue 24, DESIGN §8.6): the agent evaluated where it runs, end to end through
``holodeck test`` against a scripted agent served on 127.0.0.1 (tests/target_servers.py)
over each protocol: a plain JSON API (``http``), an OpenAI-compatible endpoint
(``openai_chat``), HoloDeck's REST serve (``holodeck_serve``); and a Python callable."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.cli.main import main
from holodeck_core.models import EvalRun, Status
from tests.target_servers import AgentState, agent_server

CANARY = "canary-header-secret-5f1e2d"

AGENT = """\
name: served
model: {provider: openai, name: gpt-4o-mini, endpoint: "http://127.0.0.1:9", api_key: unused}
instructions: {inline: "Answer briefly."}
evaluations:
  metrics: [{type: standard, metric: equality, case_insensitive: true}]
test_cases:
"""

CASES = """\
- name: weather
  input: weather in Paris
  ground_truth: It is sunny in Paris.
  expected_tools: [{name: get_weather, args: {city: {regex: "^Paris$"}}}]
- name: wrong tool expectation
  input: weather in Paris
  ground_truth: It is sunny in Paris.
  expected_tools: [{name: get_weather, args: {city: Rome}}]
- name: remembers
  turns:
    - {input: my name is Ada, ground_truth: "Nice to meet you, Ada."}
    - {input: what is my name, ground_truth: Your name is Ada.}
- name: rate limited
  input: weather in Oslo [429x2]
  ground_truth: It is sunny in Oslo.
- name: dropped
  input: weather in Rome [drop]
  ground_truth: It is sunny in Rome.
"""

HTTP_TARGET = {
    "http": {
        "url": "{base}/chat",
        "headers": {"X-Agent-Key": "${AGENT_KEY}"},
        "body": {"input": "{{input}}", "session": "{{session}}", "turn": "{{turn}}"},
        "response": {"text": "output.text", "tool_calls": "calls", "usage": "usage"},
    }
}
OPENAI_TARGET = {
    "openai_chat": {"url": "{base}/v1", "model": "served-agent", "api_key": "${AGENT_KEY}"}
}
SERVE_TARGET = {"holodeck_serve": {"url": "{base}"}}


def project(tmp_path: Path, target: dict[str, Any] | None, cases: str = CASES) -> Path:
    """agent.yaml and a holodeck.yaml declaring its target (the string form beside it)."""
    agent = tmp_path / "agent.yaml"
    agent.write_text(AGENT + textwrap.indent(cases, "  "))
    other = tmp_path / "other.yaml"
    other.write_text(AGENT.replace("name: served", "name: other") + "  - {input: x}\n")
    entries: list[Any] = ["other.yaml"]
    if target is not None:
        entries.insert(0, {"path": "agent.yaml", "target": target})
    (tmp_path / "holodeck.yaml").write_text(json.dumps({"agents": entries}))
    return agent


def with_base(target: dict[str, Any], base: str) -> dict[str, Any]:
    return json.loads(json.dumps(target).replace("{base}", base))


def eval_run(tmp_path: Path) -> tuple[EvalRun, str]:
    path = sorted((tmp_path / "results" / "served").glob("*.json"))[-1]
    return EvalRun.model_validate_json(path.read_text()), path.read_text()


def statuses(run: EvalRun) -> dict[str, Status]:
    return {r.test_name or "": r.status for r in run.report.results}


KINDS = {"http": HTTP_TARGET, "openai_chat": OPENAI_TARGET, "holodeck_serve": SERVE_TARGET}


@pytest.mark.parametrize("target", KINDS.values(), ids=KINDS.keys())
def test_a_served_agent_is_scored_like_an_in_process_one(
    tmp_path: Path, target: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_KEY", CANARY)
    state = AgentState()
    with agent_server(state) as base:
        agent = project(tmp_path, with_base(target, base))
        code = main(["test", str(agent), "-q"])
    run, text = eval_run(tmp_path)
    assert statuses(run) == {
        "weather": Status.PASS,
        "wrong tool expectation": Status.FAIL,
        "remembers": Status.PASS,
        "rate limited": Status.PASS,
        "dropped": Status.PASS,
    }
    assert code == 1
    weather = run.report.results[0]
    assert [(t.name, t.args) for t in weather.tool_invocations] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert weather.token_usage is not None and weather.token_usage.total_tokens > 0
    assert state.calls["weather in Oslo [429x2]"] == 3  # two 429s, then the answer
    assert state.calls["weather in Rome [drop]"] == 2  # a dropped connection, then the answer
    kind = next(iter(target))
    recorded = run.metadata.provenance["target"]
    assert list(recorded) == [kind] and recorded[kind]["url"].startswith(base)
    assert run.metadata.provenance["scheduler"]["rate_limited"] == 2
    assert CANARY not in text and recorded[kind].get("headers", {}).get("X-Agent-Key") in (
        None,
        "***",
    )
    assert_no_canary(tmp_path)
    sent = {name.lower(): value for name, value in state.headers[0].items()}
    if kind == "http":
        assert sent["x-agent-key"] == CANARY
        assert state.bodies[0] == {"input": "weather in Paris", "session": ANY_SESSION, "turn": 0}
    elif kind == "openai_chat":
        assert sent["authorization"] == f"Bearer {CANARY}"


class _AnySession:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and len(other) == 32


ANY_SESSION = _AnySession()


def assert_no_canary(tmp_path: Path) -> None:
    """The header secret is in no file written: EvalRuns, journal, history, prompts."""
    leaked = [
        path
        for path in tmp_path.rglob("*")
        if path.is_file() and path.name != ".env" and CANARY.encode() in path.read_bytes()
    ]
    assert leaked == []
