"""Prompt-tool templates get data only (docs/agent-yaml.md): a path reads keys, list items and
``length``, never an attribute or a method of a Python object; ``validate`` rejects a path that
would; rendering is off the event loop under a deadline."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holodeck_core.config import templates as config_templates
from holodeck_core.models import EvalRun
from holodeck_core.testing import run_model_server
from holodeck_core.tools import templates
from holodeck_core.tools.templates import data_template, render_off_loop
from tests.hostile import no_traceback, run_cli
from tests.test_mcp_tools import write_agent


def prompt_tool(template: str, kind: str = "string") -> str:
    return (
        "- type: prompt\n  name: summarize\n  description: Summarize a text\n"
        f"  template: '{template}'\n  parameters:\n    text: {{type: {kind}}}\n"
        "    items: {type: array}\n"
    )


@pytest.mark.parametrize(
    "template",
    [
        "{{text.capitalize}}",
        "{{#if text}}{{text.__class__.__mro__}}{{/if}}",
        "{{this.__init__}}",
        "{{#each items}}{{__len__}}{{/each}}",
        "{{@root.__class__}}",
        "{{text/upper}}",
    ],
)
def test_validate_rejects_a_template_that_reads_attributes(tmp_path: Path, template: str) -> None:
    agent = write_agent(tmp_path, "http://127.0.0.1:9/v1", prompt_tool(template), "- {input: x}\n")
    proc = run_cli(["validate", str(agent)])
    no_traceback(proc)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "agent.yaml" in proc.stderr and "tools[0].template" in proc.stderr, proc.stderr
    assert "reads an attribute" in proc.stderr


RULES: dict[str, Any] = {
    "default": {"reply": "done"},
    "rules": [
        {"match": {"user": "^Render: (.*)$"}, "reply": "rendered($1)"},
        {
            "match": {"user": "as text"},
            "tool_calls": [{"name": "summarize", "arguments": {"text": "abc", "items": ["x"]}}],
            "reply": "{tool_result}",
        },
        {
            "match": {"user": "as object"},
            "tool_calls": [
                {"name": "summarize", "arguments": {"text": {"k": "v"}, "items": [[1], {}]}}
            ],
            "reply": "{tool_result}",
        },
    ],
}
# ``text`` is declared an object, so validate cannot know what the model sends: at run time a
# method or an attribute is simply not there
TEMPLATE = (
    "Render: [{{text.upper}}|{{text.keys}}|{{text.k}}|{{items.length}}|{{items.0}}|"
    "{{#each items}}{{this.pop}}{{this.length}};{{/each}}]"
)


def test_at_run_time_a_path_reads_data_never_methods(tmp_path: Path) -> None:
    cases = (
        "- {name: text, input: as text, ground_truth: 'rendered([|||1|x|;])'}\n"
        "- {name: object, input: as object, ground_truth: 'rendered([||v|2|[1]|1;;])'}\n"
    )
    with run_model_server(RULES) as server:
        agent = write_agent(
            tmp_path, server.openai_base_url, prompt_tool(TEMPLATE, "object"), cases
        )
        proc = run_cli(["test", str(agent)])
    no_traceback(proc)
    [path] = sorted((tmp_path / "results").glob("*/holodeck-pipelines/*.json"))
    results = EvalRun.model_validate_json(path.read_text()).report.results
    assert [r.agent_response for r in results] == [
        "rendered([|||1|x|;])",
        "rendered([||v|2|[1]|1;;])",
    ]
    assert proc.returncode == 0, proc.stderr


NAMES = st.sampled_from(
    [
        "__class__",
        "__init__",
        "upper",
        "keys",
        "pop",
        "copy",
        "clear",
        "length",
        "0",
        "k",
        "this",
        "@root",
        "@index",
        "..",
        "__mro__",
        "__subclasses__",
        "append",
    ]
)
DATA = st.recursive(
    st.text("abc", max_size=5) | st.integers() | st.none() | st.booleans(),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(["k", "upper"]), c),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(path=st.lists(NAMES, min_size=1, max_size=4).map(".".join), data=DATA, block=st.booleans())
def test_no_path_reaches_a_python_object(path: str, data: Any, block: bool) -> None:
    source = f"{{{{#each v}}}}{{{{{path}}}}}{{{{/each}}}}" if block else f"{{{{v.{path}}}}}"
    render = data_template(source, where="t")  # what validate would reject, too
    before = repr(data)
    text = asyncio.run(render_off_loop(render, {"v": data}))
    assert "<" not in text  # no <built-in method ...>, <class ...>: data has no "<"
    assert repr(data) == before  # nothing was called on it (pop, clear, append)


def test_rendering_has_a_deadline_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(templates, "TEMPLATE_RENDER_S", 0.2)

    def never(arguments: dict[str, Any]) -> str:
        while True:
            time.sleep(0.05)

    async def render_and_tick() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        with pytest.raises(TimeoutError):
            await render_off_loop(never, {})
        task.cancel()
        return ticks

    assert asyncio.run(render_and_tick()) > 1  # the loop kept running meanwhile


def test_a_template_past_the_size_cap_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pybars compiles in time proportional to the template (a 1 MB one took minutes), so a
    template over :data:`MAX_TEMPLATE_CHARS` is refused at load naming the tool's field; the
    cap is lowered to 2,000 characters to show the edge."""
    monkeypatch.setattr(config_templates, "MAX_TEMPLATE_CHARS", 2000)
    filler = "Summarize {{text}} please. "
    for size, code in ((2000, 0), (2001, 2)):
        template = (filler * (size // len(filler) + 1))[:size]
        folder = tmp_path / str(size)
        folder.mkdir()
        agent = write_agent(
            folder, "http://127.0.0.1:9/v1", prompt_tool(template), "- {input: x}\n"
        )
        proc = run_cli(["validate", str(agent)])
        no_traceback(proc)
        assert proc.returncode == code, (size, proc.stderr)
    assert "tools[0].template" in proc.stderr and "at most 2,000" in proc.stderr
    monkeypatch.undo()
    (tmp_path / "big.hbs").write_text("{{text}} " + "x" * 1_000_000)
    tool = prompt_tool("x").replace("  template: 'x'\n", "  file: big.hbs\n")
    with run_model_server({"default": {"reply": "ok"}}) as server:
        agent = write_agent(tmp_path, server.openai_base_url, tool, "- {input: x}\n")
        for command in ("validate", "test"):
            proc = run_cli([command, str(agent)])
            no_traceback(proc)
            assert proc.returncode == 2, (command, proc.stderr)
            assert "the template is 1,000,009 characters" in proc.stderr, proc.stderr
            assert "tools[0].file" in proc.stderr and "agent.yaml" in proc.stderr
        assert server.stats()["total_calls"] == 0
