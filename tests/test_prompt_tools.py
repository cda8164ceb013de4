"""``type: prompt`` tools for real: the template rendered with the model's arguments and
answered by the loopback model through the suite's scheduler, tokens counted in the case."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.cli.main import main
from holodeck_core.config.loader import load_agent
from holodeck_core.engine.suite import load_suite
from holodeck_core.models import EvalRun
from holodeck_core.testing import run_model_server
from tests.test_mcp_tools import write_agent as write_mcp_test_agent

RULES: dict[str, Any] = {
    "default": {"reply": "I don't know."},
    "rules": [
        {
            "match": {"user": "please shorten (.+)"},
            "tool_calls": [{"name": "summarize", "arguments": {"text": "$1", "style": "terse"}}],
            "reply": "{tool_result}",
        },
        {"match": {"user": "^Summarize in a terse style: (.*)$"}, "reply": "short($1)"},
    ],
}
TEMPLATE = "Summarize{{#if style}} in a {{style}} style{{/if}}: {{text}}"


CASE = "- {input: 'please shorten <b>Tom & Jerry</b>', ground_truth: 'short(<b>Tom & Jerry</b>)'}\n"


def write_agent(folder: Path, base_url: str, tool: str) -> Path:
    return write_mcp_test_agent(folder, base_url, tool, CASE)


def prompt_tool(source: str, model: str = "") -> str:
    return (
        "- type: prompt\n  name: summarize\n  description: Summarize a text\n"
        f"  {source}\n  parameters:\n    text: {{type: string, description: The text}}\n"
        "    style: {type: string, default: plain}\n" + model
    )


@pytest.mark.parametrize("inline", [True, False])
def test_a_prompt_tool_renders_its_template_and_asks_the_model(
    tmp_path: Path, inline: bool
) -> None:
    if inline:
        source = f"template: '{TEMPLATE}'"
    else:
        (tmp_path / "summarize.hbs").write_text(TEMPLATE)
        source = "file: summarize.hbs"
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, server.openai_base_url, prompt_tool(source))
        assert main(["test", str(agent), "-q"]) == 0
        stats = server.stats()
    [path] = (tmp_path / "results").rglob("holodeck-pipelines/*.json")
    [result] = EvalRun.model_validate_json(path.read_text()).report.results
    assert result.agent_response == "short(<b>Tom & Jerry</b>)"  # inserted verbatim, no escaping
    [invocation] = result.tool_invocations
    assert invocation.result == "short(<b>Tom & Jerry</b>)"
    assert invocation.usage is not None and invocation.usage.total_tokens > 0
    assert stats["total_calls"] == 3  # two agent turns and the tool's own call
    assert result.token_usage is not None
    assert result.token_usage.total_tokens > invocation.usage.total_tokens  # counted in the case


def test_the_tool_model_overlays_the_agent_model_and_is_part_of_its_identity(
    tmp_path: Path,
) -> None:
    model = "  model: {name: loopback-judge, temperature: 0.1}\n"
    agent = write_agent(
        tmp_path, "http://127.0.0.1:9/v1", prompt_tool(f"template: '{TEMPLATE}'", model)
    )
    suite = load_suite(load_agent(agent))
    toolbox = suite.runtime.toolbox
    assert toolbox is not None
    [runtime] = toolbox.runtimes
    identity = runtime.identity()
    asyncio.run(suite.aclose())
    assert identity["model"]["name"] == "loopback-judge" and identity["model"]["temperature"] == 0.1
    assert identity["model"]["provider"] == "openai" and len(identity["template"]) == 64


def test_an_invalid_template_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = write_agent(
        tmp_path, "http://127.0.0.1:9/v1", prompt_tool("template: '{{#if x}}open{{/each}}'")
    )
    assert main(["test", str(agent), "-q"]) == 2
    err = capsys.readouterr().err
    assert "tools[0] (summarize).template" in err and "Traceback" not in err
