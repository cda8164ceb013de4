"""What a model or a tool sends back (docs/agent-yaml.md): tool names the model
invents, tool results that are not JSON or are huge, tools that raise ``SystemExit`` or never
return. Each is a tool error the model reads (or a result cut with a marker); the run finishes,
journals its cases, writes its EvalRun and exits by the contract (docs/cli.md)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import dagster as dg
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holodeck_core.defaults import MAX_TOOL_NAME_CHARS as MAX_NAME_CHARS
from holodeck_core.defaults import MAX_TOOL_RESULT_BYTES as MAX_RESULT_BYTES
from holodeck_core.models import Agent, EvalRun, FunctionTool, MCPTool, Status, ToolMock
from holodeck_core.providers.messages import ToolCall
from holodeck_core.testing import run_model_server
from holodeck_core.tools.toolbox import ToolBox, tool_message
from holodeck_core.tools.untrusted import bounded
from tests.conftest import REPO
from tests.dagster_helpers import geo_folder, history_rows, materialize_v1
from tests.hostile import agent_yaml, no_traceback, run_cli

TOOLS = textwrap.dedent("""\
    import time

    class Loud:
        def __str__(self):
            raise RuntimeError("no str for you")

    def ok(x: str = "") -> str:
        return "fine"

    def circular(x: str = ""):
        items = []
        items.append(items)
        return items

    def tuple_keys(x: str = ""):
        return {(1, 2): "pair"}

    def huge_int(x: str = ""):
        return 10**5000

    def deep(x: str = ""):
        value = []
        for _ in range(100_000):
            value = [value]
        return value

    def deep300(x: str = ""):
        value = []
        for _ in range(300):
            value = [value]
        return value

    def unprintable(x: str = ""):
        return {"value": Loud()}

    def big_text(x: str = ""):
        return "y" * 3_000_000

    def big_json(x: str = ""):
        return {"rows": [{"n": n, "text": "z" * 100} for n in range(30_000)]}

    def exits(x: str = ""):
        raise SystemExit(5)

    def interrupts(x: str = ""):
        raise KeyboardInterrupt

    async def async_exits(x: str = ""):
        raise SystemExit(7)

    def huge_error(x: str = ""):
        raise ValueError("e" * 3_000_000)

    def hangs(x: str = ""):
        while True:
            time.sleep(0.05)
""")
FUNCTIONS = [
    "ok",
    "circular",
    "tuple_keys",
    "huge_int",
    "deep",
    "deep300",
    "unprintable",
    "big_text",
    "big_json",
    "exits",
    "interrupts",
    "async_exits",
    "huge_error",
    "hangs",
]


def tools_block(functions: list[str]) -> str:
    lines = "".join(
        f"  - {{type: function, name: {f}, description: {f}, file: tools.py, function: {f}}}\n"
        for f in functions
    )
    return (
        "tools:\n" + lines + "  - {type: mcp, name: evilsrv, description: e, mock: {result: m}}\n"
    )


def calling(name: str, user: str) -> dict[str, Any]:
    """A rule: on ``user``, call ``name``; after the tool's answer, reply ``done``."""
    return {"match": {"user": f"^{user}$"}, "tool_calls": [{"name": name, "arguments": {}}]}


def rules_for(calls: dict[str, str]) -> dict[str, Any]:
    return {
        "default": {"reply": "done"},
        "rules": [
            {"match": {"tool_result": True}, "reply": "done"},
            *(calling(name, user) for user, name in calls.items()),
        ],
    }


def suite(folder: Path, base_url: str, cases: list[str], functions: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tools.py").write_text(TOOLS)
    lines = "".join(f"- {{name: {c}, input: {c}, ground_truth: done}}\n" for c in cases)
    return agent_yaml(folder, base_url, lines, extra=tools_block(functions))


def eval_run(agent: Path) -> tuple[EvalRun, Path]:
    """The first run's EvalRun (HoloDeck's file)."""
    path = sorted((agent.parent / "results").glob("*/holodeck-pipelines/*.json"))[0]
    return EvalRun.model_validate_json(path.read_text()), path


def journaled(home: Path) -> int:
    files = list((home / "journal").rglob("*.jsonl*"))
    return sum(len(f.read_text().splitlines()) for f in files)


HOSTILE_NAMES = {
    "invented": "get_the_secret",
    "markup": "[bold]x[/] \x1b[2J\x07",
    "long": "n" * 5000,
    "blank": " ",
    "dunder": "__class__",
    "case": "OK",
    "mcpserver": "evilsrv_evil",
}


def on_claude_backend(agent: Path) -> Path:
    """The agent as an ``ollama`` one (HoloDeck runs it on its Claude Agent SDK backend), on
    our direct path: these tests are of our tool loop, which answers an unknown tool as the
    Claude CLI does (the CLI's own answer: tests/test_claude_sdk_path.py)."""
    doc = yaml.safe_load(agent.read_text())
    doc["model"]["provider"] = "ollama"
    doc["execution"] = {**(doc.get("execution") or {}), "anthropic_path": "direct"}
    agent.write_text(yaml.safe_dump(doc, sort_keys=False))
    return agent


def test_a_tool_name_the_model_invents_is_a_tool_error_back_to_the_model(tmp_path: Path) -> None:
    """On HoloDeck's Claude backend (anthropic, ollama agents) an unknown tool is an error the
    model reads (Claude Code's tool_result), and the case goes on."""
    calls = {f"case{n}": name for n, name in enumerate(HOSTILE_NAMES.values())}
    with run_model_server(rules_for(calls)) as server:
        agent = suite(tmp_path / "a", server.openai_base_url, list(calls), ["ok"])
        on_claude_backend(agent)
        proc = run_cli(["test", str(agent)])
        finished = journaled(tmp_path / "holodeck-home")
        rerun = run_cli(["test", str(agent), "-q"])
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    run, _ = eval_run(agent)
    assert [r.status for r in run.report.results] == [Status.PASS] * len(calls)
    for result in run.report.results:
        [invocation] = result.tool_invocations
        assert invocation.error is not None and invocation.error.startswith("unknown tool ")
        assert "available: ok, evilsrv" in invocation.error
        assert len(invocation.name) <= MAX_NAME_CHARS + 1
    assert finished == len(calls)
    assert rerun.returncode == 0 and "Traceback" not in rerun.stderr


def test_an_unknown_tool_ends_the_case_as_an_error_on_the_openai_agents_backend(
    tmp_path: Path,
) -> None:
    """HoloDeck's openai-agents backend (openai, azure_openai agents) raises
    ModelBehaviorError ("Tool ... not found"): the case is ERROR with the reason, no tool of
    that reply runs, and it is not retried (one model call)."""
    calls = {"c_invented": "get_the_secret", "c_markup": HOSTILE_NAMES["markup"], "c_ok": "ok"}
    mixed = {"match": {"user": "^c_mixed$"}, "tool_calls": [
        {"name": "ok", "arguments": {}}, {"name": "nobody", "arguments": {}}]}  # fmt: skip
    rules = rules_for(calls)
    rules["rules"].insert(1, mixed)
    with run_model_server(rules) as server:
        agent = suite(tmp_path / "a", server.openai_base_url, [*calls, "c_mixed"], ["ok"])
        proc = run_cli(["test", str(agent)])
        first = len(server.requests())
    no_traceback(proc)
    assert proc.returncode == 3, proc.stderr + proc.stdout  # an execution error
    run, _ = eval_run(agent)
    results = {r.test_name: r for r in run.report.results}
    assert results["c_ok"].status is Status.PASS
    for name, called in (("c_invented", "get_the_secret"), ("c_mixed", "nobody")):
        result = results[name]
        assert result.status is Status.ERROR and result.error_source == "execution"
        assert f"unknown tool '{called}'" in " ".join(result.errors), result.errors
        assert "ModelBehaviorError" in " ".join(result.errors)
        assert result.tool_invocations == []  # the reply's known tool did not run either
    assert results["c_markup"].status is Status.ERROR
    assert first == 5  # one per erroring case, two for c_ok: never retried


def test_which_backend_ends_a_case_on_an_unknown_tool() -> None:
    def agent(provider: str) -> Agent:
        model = {"provider": provider, "name": "m", "endpoint": "http://127.0.0.1:1"}
        return Agent.model_validate({"name": "a", "model": model, "instructions": {"inline": "x"}})

    assert agent("openai").on_openai_agents and agent("azure_openai").on_openai_agents
    assert not agent("anthropic").on_openai_agents and not agent("ollama").on_openai_agents


def test_a_runtime_tools_config_name_is_an_unknown_tool(tmp_path: Path) -> None:
    """A live runtime (here an MCP server, a mocked one standing beside it) is offered under its
    functions' names; its config name is no function at all."""
    (tmp_path / "tools.py").write_text(TOOLS)
    box = ToolBox(
        [FunctionTool(name="ok", description="d", file="tools.py", function="ok")],
        lambda f: tmp_path / f,
    )
    box._tools["evilsrv"] = MCPTool(name="evilsrv", description="e")  # a runtime's config
    invocation = asyncio.run(box.invoke(ToolCall("1", "evilsrv", "{}", {})))
    assert invocation.error == "unknown tool 'evilsrv'; available: ok"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.text(max_size=300))
def test_any_name_not_offered_comes_back_as_an_error(tmp_path_factory: Any, name: str) -> None:
    folder = tmp_path_factory.mktemp("box")
    (folder / "tools.py").write_text(TOOLS)
    box = ToolBox(
        [
            FunctionTool(name="ok", description="d", file="tools.py", function="ok"),
            MCPTool(name="evilsrv", description="e", mock=ToolMock(result="m")),
        ],
        lambda f: folder / f,
    )
    invocation = asyncio.run(box.invoke(ToolCall("1", name, "{}", {})))
    if name in ("ok", "evilsrv"):
        assert invocation.error is None
    else:
        assert invocation.error is not None and invocation.error.startswith("unknown tool ")
        assert tool_message(invocation).is_error


def test_results_that_are_not_json_or_huge_and_tools_that_exit_never_end_the_run(
    tmp_path: Path,
) -> None:
    names = [f for f in FUNCTIONS if f != "hangs"]
    calls = {f"c_{name}": name for name in names}
    with run_model_server(rules_for(calls)) as server:
        agent = suite(tmp_path / "a", server.openai_base_url, list(calls), names)
        proc = run_cli(["test", str(agent)])
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    run, path = eval_run(agent)
    got = {r.test_name: r.tool_invocations[0] for r in run.report.results}
    assert got["c_ok"].result == "fine"
    for name in ("circular", "tuple_keys", "huge_int", "deep"):
        assert (got[f"c_{name}"].error or "").startswith("the tool returned a value that is not")
    assert got["c_deep300"].error == "the tool returned a value nested deeper than 200"
    assert "no str for you" in (got["c_unprintable"].error or "")
    assert got["c_exits"].error == "the tool tried to exit the process (SystemExit: 5)"
    assert got["c_async_exits"].error == "the tool tried to exit the process (SystemExit: 7)"
    assert got["c_interrupts"].error == "KeyboardInterrupt: "
    for name in ("big_text", "big_json"):
        text = got[f"c_{name}"].result
        assert isinstance(text, str) and "[tool result truncated: " in text
        assert len(text.encode()) < MAX_RESULT_BYTES + 100
    assert "[tool result truncated: 3,000,0" in (got["c_huge_error"].error or "")
    assert path.stat().st_size < 8 * MAX_RESULT_BYTES  # four capped results, each stored once
    assert journaled(tmp_path / "holodeck-home") == len(calls)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text() | st.binary(),
    lambda children: (
        st.lists(children)
        | st.dictionaries(st.text() | st.integers() | st.tuples(st.integers()), children)
        | st.frozensets(st.integers())
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=JSONISH, limit=st.integers(min_value=10, max_value=400))
def test_whatever_a_tool_returns_is_recorded_as_json_within_the_cap(value: Any, limit: int) -> None:
    result, error, _ = bounded(value, None, limit)
    text = json.dumps(result, ensure_ascii=False)
    if error is None:
        shown = result if isinstance(result, str) else text
        marker = "\n[tool result truncated: "
        assert len(shown.split(marker)[0].encode("utf-8", "surrogatepass")) <= limit
    else:
        assert result is None and error.startswith("the tool returned a value that is not JSON")


HUNG = textwrap.dedent("""\
    import sys
    from holodeck_core.cli.main import main
    sys.exit(main(sys.argv[1:]))
""")


def test_a_tool_that_never_returns_ends_by_its_timeout_and_the_cli_exits(
    tmp_path: Path,
) -> None:
    """The case (``--timeout``) and the tool both give up; the thread still spinning is left
    behind, and the process exits with its EvalRun written."""
    calls = {"c_hangs": "hangs", "c_ok": "ok"}
    with run_model_server(rules_for(calls)) as server:
        agent = suite(tmp_path / "a", server.openai_base_url, list(calls), ["ok", "hangs"])
        text = agent.read_text()
        agent.write_text(text.replace("test_cases:", "execution: {tool_timeout: 1}\ntest_cases:"))
        proc = subprocess.run(
            [sys.executable, "-c", HUNG, "test", str(agent), "--timeout", "3"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
        )
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    run, _ = eval_run(agent)
    got = {r.test_name: r.tool_invocations[0] for r in run.report.results}
    assert got["c_hangs"].error == "tool timed out after 1 s"
    assert got["c_ok"].result == "fine"
    assert journaled(tmp_path / "holodeck-home") == 2


def test_a_dagster_partition_survives_invented_names_and_hostile_results(tmp_path: Path) -> None:
    calls = {"c_ok": "ok", "c_circular": "circular", "c_exits": "exits", "c_nobody": "evilsrv_evil"}
    root = tmp_path / "project"
    folder = geo_folder(root, "You call tools.")
    (folder / "tools.py").write_text(TOOLS)
    cases = "".join(f"  - {{name: {c}, input: {c}, ground_truth: done}}\n" for c in calls)
    with run_model_server(rules_for(calls)) as server, dg.instance_for_test() as instance:
        (folder / "agent.yaml").write_text(
            "name: Geo Agent\n"
            f"model: {{provider: openai, name: m, endpoint: '{server.openai_base_url}',"
            " api_key: sk-test-123456}\n"
            "instructions: {file: prompts/v1.md}\n"
            "evaluations: {metrics: [{type: standard, metric: equality}]}\n"
            + tools_block(["ok", "circular", "exits"])
            + "test_cases:\n"
            + cases
        )
        project, result = materialize_v1(root, instance)
    assert result.success
    assert history_rows(project, "SELECT count(*), max(passed) FROM eval_runs") == [(1, 3)]
    run, _ = eval_run(folder / "agent.yaml")
    results = {r.test_name: r for r in run.report.results}
    nobody = results.pop("c_nobody")  # an openai agent: HoloDeck's case ends on it
    assert nobody.status is Status.ERROR
    assert " ".join(nobody.errors).startswith("unknown tool 'evilsrv_evil'")
    errors = {name: r.tool_invocations[0].error for name, r in results.items()}
    assert errors["c_exits"] == "the tool tried to exit the process (SystemExit: 5)"
    assert (errors["c_circular"] or "").startswith("the tool returned a value that is not JSON")
