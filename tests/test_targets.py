"""Targets (docs/targets.md): the agent evaluated where it runs, end to end through
``holodeck test`` against a scripted agent served on 127.0.0.1 (tests/target_servers.py)
over each protocol: a plain JSON API (``http``), an OpenAI-compatible endpoint
(``openai_chat``), HoloDeck's REST serve (``holodeck_serve``); and a Python callable."""

from __future__ import annotations

import base64
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
    path = sorted((tmp_path / "results" / "served").glob("holodeck-pipelines/*.json"))[-1]
    return EvalRun.model_validate_json(path.read_text()), path.read_text()


def statuses(run: EvalRun) -> dict[str, Status]:
    return {r.test_name or "": r.status for r in run.report.results}


KINDS = {"http": HTTP_TARGET, "openai_chat": OPENAI_TARGET, "holodeck_serve": SERVE_TARGET}


@pytest.mark.parametrize("target", KINDS.values(), ids=KINDS.keys())
def test_a_served_agent_is_scored_like_an_in_process_one(
    tmp_path: Path,
    target: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AGENT_KEY", CANARY)
    state = AgentState()
    with agent_server(state) as base:
        agent = project(tmp_path, with_base(target, base))
        code = main(["test", str(agent), "-v"])
    run, text = eval_run(tmp_path)
    shown = capsys.readouterr()
    assert CANARY not in shown.out + shown.err
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
    label = run.report.environment["target"]
    assert label.startswith(kind) and base in label
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


FAULT_CASES = """\
- name: server error
  input: weather in Oslo [500]
- name: refused input
  input: weather in Oslo [400]
- name: garbled
  input: weather in Oslo [garble]
- name: own error
  input: weather in Oslo [polite-error]
  ground_truth: It is sunny in Oslo.
- name: fine
  input: weather in Paris
  ground_truth: It is sunny in Paris.
"""


def test_target_failures_are_errors_naming_the_endpoint_and_a_rerun_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_KEY", CANARY)
    state = AgentState()
    with agent_server(state) as base:
        target = with_base(HTTP_TARGET, base)
        target["http"]["attempts"] = 2
        agent = project(tmp_path, target, FAULT_CASES)
        code = main(["test", str(agent), "-q"])
        run, _ = eval_run(tmp_path)
        assert code == 3  # execution errors
        results = {r.test_name: r for r in run.report.results}
        assert statuses(run) == {
            "server error": Status.ERROR,
            "refused input": Status.ERROR,
            "garbled": Status.ERROR,
            "own error": Status.FAIL,  # a 2xx error object is the agent's answer
            "fine": Status.PASS,
        }
        where = f"target http POST {base}/chat"
        assert (
            results["server error"]
            .errors[0]
            .startswith(f"server_error 500 after 2 attempts: {where}: HTTP 500")
        )
        assert results["refused input"].errors[0].startswith(f"bad_request 400: {where}: HTTP 400")
        assert (
            results["garbled"]
            .errors[0]
            .startswith(f"malformed_response after 2 attempts: {where}: the reply is not JSON")
        )
        assert json.loads(results["own error"].agent_response or "") == {
            "error": {"message": "I cannot help with that."}
        }
        assert state.calls["weather in Oslo [400]"] == 1  # permanent: never retried
        # the transient errors keep the journal open: the rerun pays only for them
        before = state.calls.copy()
        assert main(["test", str(agent), "-q"]) == 3
        assert state.calls - before == {
            "weather in Oslo [500]": 2,
            "weather in Oslo [garble]": 2,
            "weather in Oslo [400]": 1,
        }
    [journal] = (tmp_path / "holodeck-home" / "journal").rglob("*.jsonl")  # still open
    assert "It is sunny in Paris." in journal.read_text()
    assert_no_canary(tmp_path)
    shown = capsys.readouterr()
    assert CANARY not in shown.out + shown.err


def test_a_target_that_refuses_connections_is_a_transient_error(tmp_path: Path) -> None:
    with agent_server(AgentState()) as base:
        pass  # the port is free again: nothing listens there
    agent = project(tmp_path, {"holodeck_serve": {"url": base, "attempts": 1}}, "- {input: hi}\n")
    assert main(["test", str(agent), "-q"]) == 3
    run, _ = eval_run(tmp_path)
    [result] = run.report.results
    assert result.status is Status.ERROR
    assert result.errors[0].startswith(f"connection_error: target holodeck_serve {base}: ")


def test_a_429_wave_is_ridden_out_within_the_targets_own_limit(tmp_path: Path) -> None:
    cities = [f"City{i}" for i in range(12)]
    cases = "".join(
        f"- {{input: 'weather in {c} [429x2]', ground_truth: 'It is sunny in {c}.'}}\n"
        for c in cities
    )
    state = AgentState(latency=0.05)
    with agent_server(state) as base:
        target = with_base(HTTP_TARGET, base)
        target["http"]["limit"] = 4
        del target["http"]["headers"]
        agent = project(tmp_path, target, cases)
        assert main(["test", str(agent), "-q", "--parallel", "12"]) == 0
    run, _ = eval_run(tmp_path)
    assert set(statuses(run).values()) == {Status.PASS}
    assert state.peak <= 4  # the target's limit, not --parallel's 12
    scheduler = run.metadata.provenance["scheduler"]
    assert scheduler["rate_limited"] == 24 and scheduler["lowest_limit"] < 4


def test_an_http_body_template_gets_the_conversation_and_the_files(tmp_path: Path) -> None:
    (tmp_path / "note.txt").write_text("hello from the note\n")
    state = AgentState()
    cases = """\
- turns:
    - {input: my name is Ada, files: [{path: note.txt, type: text}]}
    - {input: what is my name}
"""
    with agent_server(state) as base:
        target = with_base(HTTP_TARGET, base)
        del target["http"]["headers"]
        target["http"]["body"] = {
            "input": "turn {{turn}}: {{input}}",
            "session": "{{session}}",
            "history": "{{messages}}",
            "files": "{{files}}",
        }
        main(["test", str(project(tmp_path, target, cases)), "-q"])
    first, second = state.bodies
    assert first["input"] == "turn 0: my name is Ada"
    assert first["history"] == [{"role": "user", "content": "my name is Ada"}]
    [attached] = first["files"]
    assert (
        attached["path"] == str(tmp_path / "note.txt")
        and "hello from the note" in (attached["markdown"])
    )
    assert second["session"] == first["session"] and second["files"] == []
    assert [m["role"] for m in second["history"]] == ["user", "assistant", "user"]


def test_the_dagster_assets_run_a_target_agent_unchanged(tmp_path: Path) -> None:
    import dagster as dg

    from holodeck_core.config.project import Project
    from holodeck_pipelines.builder import build_definitions
    from tests.dagster_helpers import materialize, register

    folder = tmp_path / "agents" / "geo"
    folder.mkdir(parents=True)
    (folder / "agent.yaml").write_text(
        AGENT.replace("name: served", "name: Geo Agent")
        + "  - {name: w, input: weather in Lima, ground_truth: It is sunny in Lima.}\n"
        + "  - {name: n, input: hello, ground_truth: hi}\n"
    )
    state = AgentState()
    with agent_server(state, agent_name="Geo Agent") as base, dg.instance_for_test() as instance:
        target = {"path": "agents/geo/agent.yaml", "target": {"holodeck_serve": {"url": base}}}
        (tmp_path / "holodeck.yaml").write_text(json.dumps({"agents": [target]}))
        defs = build_definitions(Project.discover(tmp_path))
        [key] = register(defs, instance)
        result = materialize(defs, instance, key)
    assert result.success
    assert sum(state.calls.values()) == 2  # every case went to the served agent
    [path] = (folder / "results" / "geo-agent").glob("holodeck-pipelines/*.json")
    assert (path.parent.parent / path.name).is_file()  # HoloDeck's file beside our superset
    run = EvalRun.model_validate_json(path.read_text())
    assert statuses(run) == {"w": Status.PASS, "n": Status.FAIL}
    assert run.metadata.provenance["target"] == {"holodeck_serve": {"url": base}}


def test_a_target_that_answers_too_slowly_times_out(tmp_path: Path) -> None:
    with agent_server(AgentState(latency=1.0)) as base:
        target = {"holodeck_serve": {"url": base, "timeout": 0.2, "attempts": 1}}
        assert main(["test", str(project(tmp_path, target, "- {input: hi}\n")), "-q"]) == 3
    [result] = eval_run(tmp_path)[0].report.results
    assert result.errors[0] == f"timeout: target holodeck_serve {base}: no answer within 0.2 s"


def test_holodeck_serve_gets_files_as_file_content(tmp_path: Path) -> None:
    (tmp_path / "note.txt").write_text("hello from the note\n")
    state = AgentState()
    cases = """\
- input: summarize the note
  files: [{path: note.txt, type: text}]
  ground_truth: "I don't know. I read 1 file(s): note.txt."
"""
    with agent_server(state) as base:
        agent = project(tmp_path, {"holodeck_serve": {"url": base}}, cases)
        assert main(["test", str(agent), "-q"]) == 0
    [request] = state.bodies
    [sent] = request["files"]
    assert request["message"] == "summarize the note" and request["session_id"] is None
    assert (sent["mime_type"], sent["filename"]) == ("text/plain", "note.txt")
    assert base64.b64decode(sent["content"]) == b"hello from the note\n"


@pytest.mark.parametrize("kind", ["holodeck_serve", "openai_chat"])
def test_a_2xx_error_object_is_the_agents_answer(tmp_path: Path, kind: str) -> None:
    with agent_server(AgentState()) as base:
        target = with_base(KINDS[kind], base)
        target[kind].pop("api_key", None)
        cases = "- {input: 'hi [polite-error]', ground_truth: hello}\n"
        assert main(["test", str(project(tmp_path, target, cases)), "-q"]) == 1
    [result] = eval_run(tmp_path)[0].report.results
    assert result.status is Status.FAIL
    assert json.loads(result.agent_response or "") == {
        "error": {"message": "I cannot help with that."}
    }
