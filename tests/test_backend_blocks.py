"""HoloDeck 0.7.1's backend blocks of ``agent.yaml`` (docs/holodeck-fidelity.md): ``openai:``
(``max_turns``, ``effort``, disallowed tools) and ``claude:`` (``max_turns``) shape the agent we
run as they shape HoloDeck's; the loop's default is HoloDeck's 20 model calls a turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from holodeck_core.cli.main import main
from holodeck_core.config.loader import load_agent
from holodeck_core.engine.suite import load_suite
from holodeck_core.errors import ConfigError
from holodeck_core.models import Status
from holodeck_core.runner import fingerprint as fp
from holodeck_core.testing import run_model_server
from tests.test_reliability import run_suite

LOOP = {
    "rules": [
        {"match": {"user": "loop"}, "tool_calls": [{"name": "get_weather", "arguments": {}}]},
        {"match": {"user": "hello"}, "reply": "Paris"},
    ]
}
"""A model that calls the tool for ever on ``loop``, and answers ``hello``."""


def _agent_requests(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["body"] for r in requests if r["route"] in ("responses", "chat")]


@pytest.mark.parametrize(
    ("provider", "extra", "calls"),
    [
        ("openai", "", 20),  # HoloDeck's default, both backends
        ("ollama", "", 20),
        ("openai", "openai: {max_turns: 3}\n", 3),
        ("ollama", "claude: {max_turns: 4}\n", 4),
        ("openai", "claude: {max_turns: 4}\n", 20),  # not the block of openai's backend
        ("openai", "execution: {max_tool_turns: 2}\n", 2),  # ours, HoloDeck's key unset
    ],
)
def test_the_tool_loop_stops_where_holodecks_would(
    tmp_path: Path, provider: str, extra: str, calls: int
) -> None:
    with run_model_server(LOOP) as server:
        url = server.openai_base_url if provider == "openai" else server.url
        code, run, _ = run_suite(
            tmp_path, url, "  - {input: loop}\n", provider=provider, extra=extra
        )
        sent = _agent_requests(server.requests())
    [result] = run.report.results
    assert result.status is Status.ERROR and code == 3
    assert f"after {calls} model calls" in result.errors[0]
    assert len(sent) == calls and len(result.tool_invocations) == calls


def test_effort_is_sent_as_holodecks_reasoning(tmp_path: Path) -> None:
    """``openai.effort`` → the Responses ``reasoning`` of HoloDeck's backend (``max`` is
    ``xhigh``, with ``summary: auto``); without it, no ``reasoning`` key."""
    bodies = {}
    for effort in ("max", None):
        folder = tmp_path / str(effort)
        folder.mkdir()
        extra = f"openai: {{effort: {effort}}}\n" if effort else ""
        with run_model_server(LOOP) as server:
            code, _, _ = run_suite(
                folder, server.openai_base_url, "  - {input: hello}\n", extra=extra
            )
            [bodies[effort]] = _agent_requests(server.requests())
        assert code == 0
    assert bodies["max"]["reasoning"] == {"effort": "xhigh", "summary": "auto"}
    assert "reasoning" not in bodies[None]


def test_disallowed_tools_are_not_offered(tmp_path: Path) -> None:
    """HoloDeck drops ``openai.disallowed_tools`` and ``permissions.disallowed_tools`` (by
    config name) from the tools the model is given."""
    for extra, offered in [
        ("", ["get_weather"]),
        ("openai: {disallowed_tools: [get_weather]}\n", []),
        ("openai: {permissions: {disallowed_tools: [get_weather]}}\n", []),
    ]:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        with run_model_server(LOOP) as server:
            run_suite(folder, server.openai_base_url, "  - {input: hello}\n", extra=extra)
            [body] = _agent_requests(server.requests())
        assert [tool["name"] for tool in body["tools"]] == offered, extra


AGENT = """\
name: a
model: {provider: openai, name: m}
instructions: {inline: "Be brief."}
test_cases: [{input: hi}]
"""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("openai: {max_turns: 5}\nexecution: {max_tool_turns: 3}\n", "keep openai.max_turns"),
        ("openai: {max_turn: 5}\n", "max_turn"),  # HoloDeck refuses unknown keys too
        ("openai: {effort: extreme}\n", "effort"),
        ("openai: {max_turns: 0}\n", "max_turns"),
        (
            "openai: {permissions: {allowed_tools: [x], disallowed_tools: [x]}}\n",
            "both allowed_tools and disallowed_tools: x",
        ),
    ],
)
def test_a_bad_block_is_a_config_error_naming_the_field(
    tmp_path: Path, extra: str, message: str
) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text(AGENT + extra)
    with pytest.raises(ConfigError, match=message) as raised:
        load_agent(agent)
    assert "agent.yaml" in str(raised.value)


def test_the_blocks_are_no_longer_listed_as_ignored(tmp_path: Path) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text(AGENT + "openai: {max_turns: 5, max_concurrent_sessions: 8}\n")
    loaded = load_agent(agent)
    assert loaded.agent.ignored_blocks() == [] and loaded.agent.max_turns == 5


def test_what_shapes_the_agent_is_in_its_fingerprints(tmp_path: Path) -> None:
    """A run before and after a frontmatter edit (the model reads it: HoloDeck sends the file
    as it is), an ``effort`` or a turn limit never shares a journal, a cache entry or a
    config hash with the other: they are different agents."""
    (tmp_path / "p.md").write_text("---\nversion: v1\n---\nBe brief.\n")
    agent = tmp_path / "agent.yaml"
    base = AGENT.replace('{inline: "Be brief."}', "{file: p.md}")

    def identity(extra: str = "") -> tuple[str, str]:
        agent.write_text(base + extra)
        loaded = load_agent(agent)
        suite = load_suite(loaded)
        return suite.suite_fingerprint, fp.config_hash(loaded, suite.prompt.text)

    before = identity()
    assert identity() == before
    (tmp_path / "p.md").write_text("---\nversion: v1\nauthor: ann\n---\nBe brief.\n")
    edited = identity()
    assert edited[0] != before[0] and edited[1] != before[1]
    variants = {
        identity(extra) for extra in ("openai: {effort: high}\n", "openai: {max_turns: 3}\n")
    }
    assert len(variants | {edited}) == 3


def test_validate_says_what_the_blocks_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text(AGENT)
    assert main(["validate", str(agent)]) == 0
    assert "at most 20 model calls a turn (default, HoloDeck's)" in capsys.readouterr().out
    (tmp_path / "tools.py").write_text("def f() -> str:\n    return 'x'\n")
    tool = "tools: [{type: function, name: f, description: d, file: tools.py, function: f}]\n"
    block = "openai: {max_turns: 7, effort: low, disallowed_tools: [f]}\n"
    agent.write_text(AGENT + tool + block)
    assert main(["validate", str(agent)]) == 0
    out = capsys.readouterr().out
    assert "at most 7 model calls a turn (openai.max_turns)" in out
    assert "effort:   low" in out and "not offered to the model: f" in out
    assert "ignored:" not in out


CLAUDE_AGENT = """\
name: a
model: {provider: anthropic, name: claude-x, api_key: sk-ant-test}
instructions: {inline: "Be brief."}
test_cases: [{input: hi}]
"""


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ("claude: {max_turn: 3}\n", "claude.max_turn"),  # a typo
        ("claude: {max_turns: lots}\n", "claude.max_turns"),  # a wrong type
        ("claude: {web_search: maybe}\n", "claude.web_search"),
        ("claude: {bash: {enable: true}}\n", "claude.bash.enable"),  # a nested unknown key
        ("claude: {extended_thinking: {budget_tokens: 5}}\n", "claude.extended_thinking"),
        ("claude: {agents: {r: {description: d, promt: p}}}\n", "claude.agents.r.promt"),
        ("claude: {setting_sources: [all, user]}\n", "'all' cannot be combined"),
        ("claude: {subagents: {}}\n", "claude.subagents"),
    ],
)
def test_a_bad_claude_block_is_refused_as_holodeck_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], block: str, field: str
) -> None:
    """HoloDeck 0.7.1's ``ClaudeConfig`` forbids unknown keys at every level, so a block it
    refuses is a config error here too: ``validate`` and ``test`` exit 2 naming the file and
    the field, before any model call, with no traceback and nothing written."""
    agent = tmp_path / "agent.yaml"
    agent.write_text(CLAUDE_AGENT + block)
    for command in ("validate", "test"):
        assert main([command, str(agent)]) == 2
        err = capsys.readouterr().err
        assert "agent.yaml" in err and field in err, err
        assert "Traceback" not in err
    assert not (tmp_path / "results").exists()


def test_a_claude_block_holodeck_accepts_loads(tmp_path: Path) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        CLAUDE_AGENT
        + "claude: {permission_mode: acceptAll, max_turns: 4, web_search: true,\n"
        + "  bash: {enabled: true, excluded_commands: [rm]}, session_memory_estimate_mib: 500,\n"
        + "  agents: {r: {description: researcher, prompt: look it up, model: haiku}},\n"
        + "  setting_sources: [all], extended_thinking: {enabled: true, budget_tokens: 2000}}\n"
    )
    assert load_agent(agent).agent.max_turns == 4
