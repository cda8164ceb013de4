"""The samples of the differential test against HoloDeck 0.7.1 (docs/holodeck-fidelity.md): every
corpus agent (HoloDeck's 11 sample agents and the generated ones) and ``examples/acme-support``,
each copied so that both HoloDeck and we run it offline against one loopback server with the same
rules. ``bench/holodeck_fidelity.py`` runs both sides and records their request sets;
``tests/test_holodeck_requests.py`` runs ours again and compares.

The copy changes both sides' agent alike: every model endpoint points at the server; MCP tools
(``npx`` servers, network) are removed; retrieval tools lose ``database`` and
``keyword_index`` (HoloDeck would dial the ChromaDB/Qdrant/OpenSearch servers they name; we
embed the index whatever they say, docs/agent-yaml.md); ``observability`` goes (HoloDeck would
export to the OTLP collector it names and wait for it at exit; we ignore the block); a
``config.yaml``'s ``execution.cache_directory`` goes (HoloDeck refuses the whole file for it, we
warn: docs/holodeck-fidelity.md, section 3); a ``claude.permission_mode: acceptAll`` gets
``i_understand_this_is_unsafe: true`` (both refuse every case without it); a retrieval tool's
``contextual_embeddings`` is turned off (one request per chunk carrying the whole document: a
fixture of 26 MB for legal-assistant/claude; docs/holodeck-fidelity.md says what differs
there); the example runs without its sidecar of our additions (docs/agent-yaml.md: its
agent.yaml is HoloDeck's as it is)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from holodeck_core.naming import slugify
from holodeck_core.testing.request_log import request_set
from tests.conftest import CORPUS, REPO
from tests.retrieval_samples import RETRIEVAL_TYPES, prepare_sample, rules_for

FIXTURES = REPO / "tests" / "fixtures" / "holodeck_requests"
LIMIT = 2
"""Cases run per sample (``--limit``, which both CLIs have)."""
WEATHER = {
    "default": {"reply": "I don't know."},
    "rules": [
        {
            "name": "agent-weather",
            "match": {"user": r"(?i)weather in (\w+)", "tool_result": False},
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "$1"}}],
        },
        {"name": "agent-weather-answer", "match": {"tool_result": True}, "reply": "{tool_result}"},
    ],
}


def samples() -> dict[str, Path]:
    """Fixture key -> agent.yaml of every sample (empty when ../shared is absent)."""
    holodeck = CORPUS / "holodeck"
    found = sorted(
        [*holodeck.glob("samples/*/*/agent.yaml"), *holodeck.glob("generated/*/agent.yaml")]
    )
    keyed = {str(p.parent.relative_to(holodeck)): p for p in found}
    return {**keyed, "examples/acme-support": REPO / "examples" / "acme-support" / "agent.yaml"}


def fixture_path(key: str) -> Path:
    return FIXTURES / f"{slugify(key)}.json"


def _cases(agent_file: Path) -> list[dict[str, Any]]:
    doc = yaml.safe_load(agent_file.read_text())
    if doc.get("test_cases_file"):
        return list(yaml.safe_load((agent_file.parent / doc["test_cases_file"]).read_text()))
    return list(doc.get("test_cases") or [])


def case_inputs(agent_file: Path) -> list[list[str]]:
    """The inputs of the cases run (each case's turns' inputs, in order)."""
    return [
        [str(t["input"]) for t in case.get("turns") or [case] if t.get("input")]
        for case in _cases(agent_file)[:LIMIT]
    ]


HOLODECK_JUDGE = {
    "name": "holodeck-judge",
    "match": {"system": "^$", "user": "^(?!# Task:)"},
    "json": {
        "verdicts": [{"verdict": "yes", "reason": "scripted"}],
        "statements": ["scripted"],
        "claims": ["scripted"],
        "truths": ["scripted"],
        "steps": ["Check the answer against the expected output."],
        "score": 5,
        "reason": "scripted",
    },
}
"""HoloDeck's judges (DeepEval's prompts: no system message, not our ``# Task:``) get one
JSON every DeepEval schema reads, instead of the agent's tool calls they would retry on."""


CLAUDE_PROVIDERS = frozenset({"anthropic", "ollama"})
"""The providers both HoloDeck 0.7.1 and we run through the Claude Agent SDK's CLI."""
CLI_TITLE = {
    "name": "cli-session-title",
    "match": {"user": "^<session>\n"},
    "json": {"title": "Support question"},
}
"""The CLI's own title-generation request (the case input inside ``<session>`` tags)."""
CLI_INPUT = r"(?s)^(?!# Task:)(?:.*</system-reminder>\s*)?(.+)"
"""The case input of a CLI request: the text after the CLI's ``<system-reminder>`` blocks."""


def claude_path(agent_file: Path) -> bool:
    """Whether the sample's agent runs through the Claude Agent SDK (on both sides)."""
    doc = yaml.safe_load(agent_file.read_text())
    return str((doc.get("model") or {}).get("provider")) in CLAUDE_PROVIDERS


def _example(schema: dict[str, Any]) -> Any:
    """A value the JSON Schema accepts (an enum's first, a number within its bounds)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: _example(props[name]) for name in schema.get("required") or props}
    if kind in ("number", "integer"):
        return schema.get("minimum", 0)
    return {"boolean": True, "array": []}.get(str(kind), "scripted")


def claude_rules(found: dict[str, Any], response_format: Any) -> dict[str, Any]:
    """The agent rule as the CLI is served: its question after the system reminders, its
    tools on the ``holodeck_tools`` MCP server; the CLI's title request answered first; with a
    response format, the ``StructuredOutput`` call the CLI's stop hook asks for."""
    agent = dict(found["rules"][-1])
    agent["match"] = {**agent["match"], "user": CLI_INPUT}
    agent["tool_calls"] = [
        {**call, "name": f"mcp__holodeck_tools__{call['name']}"} for call in agent["tool_calls"]
    ]
    extra = []
    if isinstance(response_format, dict):
        structured = {"name": "StructuredOutput", "arguments": _example(response_format)}
        extra.append(
            {
                "name": "cli-structured-output",
                "match": {
                    "user": "^Stop hook feedback:[\\s\\S]*StructuredOutput",
                    "tool_result": False,
                },
                "tool_calls": [structured],
            }
        )
    return {**found, "rules": [CLI_TITLE, *found["rules"][:-1], *extra, agent]}


def rules(key: str, agent_file: Path) -> dict[str, Any]:
    """The server's rules: HoloDeck's judges' reply, then the example's own rules; the
    weather tool's; else call every retrieval tool with the user's question and answer from
    the results (tests/retrieval_samples.py), in JSON a multi-turn agent's ``response_format``
    reads (financial-assistant); a Claude-path agent's as its CLI asks."""
    if key == "examples/acme-support":
        found = dict(yaml.safe_load((agent_file.parent / "model-rules.yaml").read_text()))
    elif key == "generated/tool_calls":
        found = WEATHER
    else:
        doc = yaml.safe_load(agent_file.read_text())
        names = [t["name"] for t in doc.get("tools") or [] if t["type"] in RETRIEVAL_TYPES]
        found = rules_for(names)
        if doc.get("response_format") and any("turns" in c for c in _cases(agent_file)):
            # a later turn carries the answer before it, which openai-agents drops when the
            # schema refuses it: the structured multi-turn agent answers JSON
            found["rules"][-1] = {**found["rules"][-1], "reply": '{"answer": "NaN"}'}
        if claude_path(agent_file):
            found = claude_rules(found, doc.get("response_format"))
    return {**found, "rules": [HOLODECK_JUDGE, *found["rules"]]}


def prepare(agent_file: Path, dest: Path, server_url: str) -> Path:
    """The writable copy both sides run (see the module's docstring); its agent.yaml."""
    agent, _ = prepare_sample(agent_file, dest, server_url)
    doc = yaml.safe_load(agent.read_text())
    if agent_file.parent.parent.name == "examples":  # HoloDeck's agent.yaml alone
        (dest / f"{agent_file.stem}.pipelines.yaml").unlink(missing_ok=True)
    doc.pop("observability", None)
    tools = [t for t in doc.get("tools") or [] if t["type"] != "mcp"]
    for tool in tools:
        tool.pop("database", None)
        tool.pop("keyword_index", None)
        if tool.get("contextual_embeddings"):
            tool["contextual_embeddings"] = False  # one request per chunk with the document
    if tools:
        doc["tools"] = tools
    else:
        doc.pop("tools", None)
    agent.write_text(yaml.safe_dump(doc, sort_keys=False))
    config = dest / "config.yaml"
    project = yaml.safe_load(config.read_text()) if config.is_file() else None
    if project and "cache_directory" in (project.get("execution") or {}):
        del project["execution"]["cache_directory"]  # HoloDeck refuses the file for it
        config.write_text(yaml.safe_dump(project, sort_keys=False))
    return agent


def sample_env(agent: Path, server_url: str) -> dict[str, str]:
    """Every ``${VAR}`` of the copy (and its config.yaml) set to a dummy (an endpoint or URL
    variable to the server), and the keys."""
    config = agent.parent / "config.yaml"
    text = agent.read_text() + (config.read_text() if config.is_file() else "")
    found = set(re.findall(r"\$\{([A-Z_0-9]+)", text))
    env = {v: server_url if re.search("ENDPOINT|URL", v) else f"dummy-{v.lower()}" for v in found}
    keys = (
        "OPENAI_API_KEY",
        "AZURE_OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "CLAUDE_CODE_OAUTH_TOKEN",
    )
    return {**env, **dict.fromkeys(keys, "sk-loopback-test")}


def our_command(agent: Path) -> list[str]:
    """Our ``holodeck test`` arguments (after the program name), as both sides run it."""
    return ["test", str(agent), "--limit", str(LIMIT)]


def recorded_set(requests: list[dict[str, Any]], copy: Path) -> dict[str, Any]:
    """The normalised set of a run of the copy at ``copy`` (its path written ``<copy>``)."""
    text = json.dumps(requests).replace(json.dumps(str(copy))[1:-1], "<copy>")
    return request_set(json.loads(text), case_inputs(copy / "agent.yaml"))


def load_fixture(key: str) -> dict[str, Any]:
    return dict(json.loads(fixture_path(key).read_text()))
