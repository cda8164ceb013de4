"""Targets (docs/targets.md): python targets (sync and async, tool calls, usage, state across turns,
files, exceptions) and a target's config: ``holodeck validate`` shows it redacted, a bad one
is a config error naming holodeck.yaml's field and line, ``--target`` is checked alike."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.cli.main import main
from holodeck_core.models import Status
from tests.test_targets import (
    CANARY,
    CASES,
    HTTP_TARGET,
    eval_run,
    project,
    statuses,
    with_base,
)

PY_AGENT = """\
from holodeck_core.agents.targets.python import (
    TargetCase, TargetReply, TargetToolCall, TargetUsage,
)


async def answer(case: TargetCase) -> TargetReply | str:
    if "weather" in case.input:
        call = TargetToolCall("get_weather", {"city": "Paris"}, result="sunny")
        return TargetReply("It is sunny in Paris.", [call], TargetUsage(7, 3))
    if case.input.startswith("my name is"):
        case.state["name"] = case.input.split()[-1]
        return f"Nice to meet you, {case.state['name']}."
    if case.input == "what is my name":
        return f"Your name is {case.state['name']}."
    if case.files:
        [attached] = case.files
        assert attached.path is not None and attached.path.is_file()
        return attached.markdown.strip()
    if case.input == "flaky":
        raise ConnectionResetError("the agent's backend went away")
    raise ValueError("this agent cannot answer that")


def sync_answer(case: TargetCase) -> str:
    return f"turn {case.turn} of {len(case.messages)} messages: {case.input}"
"""

PY_CASES = (
    CASES.split("- name: rate limited")[0]
    + """\
- name: reads files
  input: summarize
  files: [{path: note.txt, type: text}]
  ground_truth: the note says hello
- name: raises
  input: something else
- name: flaky
  input: flaky
"""
)


def test_python_targets_sync_and_async(tmp_path: Path) -> None:
    (tmp_path / "my_agent.py").write_text(PY_AGENT)
    (tmp_path / "note.txt").write_text("the note says hello\n")
    agent = project(tmp_path, {"python": {"callable": "my_agent:answer", "attempts": 2}}, PY_CASES)
    assert main(["test", str(agent), "-q"]) == 3
    run, _ = eval_run(tmp_path)
    assert statuses(run) == {
        "weather": Status.PASS,
        "wrong tool expectation": Status.FAIL,
        "remembers": Status.PASS,
        "reads files": Status.PASS,
        "raises": Status.ERROR,
        "flaky": Status.ERROR,
    }
    results = {r.test_name: r for r in run.report.results}
    assert results["weather"].tool_invocations[0].result == "sunny"
    usage = results["weather"].token_usage
    assert usage is not None and (usage.prompt_tokens, usage.completion_tokens) == (7, 3)
    assert results["raises"].errors[0] == (
        "internal_error: target python my_agent:answer: ValueError: this agent cannot answer that"
    )
    assert results["flaky"].errors[0] == (  # transient: retried, and the journal stays open
        "connection_error after 2 attempts: target python my_agent:answer: "
        "ConnectionResetError: the agent's backend went away"
    )
    # a sync function, chosen on the command line over holodeck.yaml's target
    option = '{python: {callable: "my_agent:sync_answer"}}'
    main(["test", str(agent), "-q", "--target", option, "--filter", "remembers"])
    run, _ = eval_run(tmp_path)
    [remembers] = run.report.results
    assert [t.response for t in remembers.turns or []] == [
        "turn 0 of 1 messages: my name is Ada",
        "turn 1 of 3 messages: what is my name",
    ]
    assert run.metadata.provenance["target"] == {"python": {"callable": "my_agent:sync_answer"}}


def test_validate_shows_the_target_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AGENT_KEY", CANARY)
    target = with_base(HTTP_TARGET, "https://agents.example.com")
    target["http"]["limit"] = 8
    agent = project(tmp_path, target)
    assert main(["validate", str(agent)]) == 0
    out = capsys.readouterr().out
    assert (
        "  target:   http POST https://agents.example.com/chat "
        "(limit 8; headers X-Agent-Key (secret))"
    ) in out
    assert CANARY not in out
    assert main(["validate", str(tmp_path / "other.yaml")]) == 0  # the string form
    assert "target:" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (
            {"http": {"url": "ftp://x/chat"}},
            "agents[0].target.http.url: url must be an http:// or https:// URL",
        ),
        (
            {"http": {"url": "http://x/chat", "response": {"text": "a..b"}}},
            "agents[0].target.http.response.text: 'a..b' is not a path",
        ),
        (
            {"http": {"url": "http://x/chat", "body": {"q": "{{question}}"}}},
            "agents[0].target.http.body: unknown template variable(s) question",
        ),
        (
            {"http": {"url": "http://x", "headers": {"Authorization": "Bearer ${NOT_SET_VAR}"}}},
            "agents[0].target.http.headers.Authorization: environment variable NOT_SET_VAR",
        ),
        (
            {"http": {"url": "http://x"}, "python": {"callable": "m:f"}},
            "a target has exactly one of holodeck_serve, http, openai_chat, python; "
            "got http, python",
        ),
        (
            {"python": {"callable": "no_such_module:fn"}},
            "agents[0].target.python.callable: 'no_such_module:fn': module 'no_such_module' "
            "not found",
        ),
        ({"openai_chat": {"url": "http://x"}}, "agents[0].target.openai_chat.model"),
    ],
    ids=["url", "path", "variable", "env", "two-kinds", "callable", "model"],
)
def test_a_bad_target_is_a_config_error_naming_file_and_field(
    tmp_path: Path, target: dict[str, Any], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = project(tmp_path, target)
    assert main(["validate", str(agent)]) == 2
    assert main(["test", str(agent)]) == 2
    err = capsys.readouterr().err
    assert re.search(r"holodeck\.yaml:\d+: ", err) and expected in err and "Traceback" not in err
    assert not (tmp_path / "results").exists()


def test_an_inline_target_option_is_checked_like_a_declared_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = project(tmp_path, None)
    assert main(["validate", str(agent), "--target", "{holodeck_serve: {url: nowhere}}"]) == 2
    assert "--target" in capsys.readouterr().err
    assert main(["validate", str(agent), "--target", str(tmp_path / "missing.yaml")]) == 2
    assert "file not found" in capsys.readouterr().err
