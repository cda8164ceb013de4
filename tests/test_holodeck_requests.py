"""The differential test against HoloDeck 0.7.1 (docs/holodeck-fidelity.md), in CI without HoloDeck:
every corpus sample and ``examples/acme-support`` run by us against the loopback server, the
requests normalised (``holodeck_core.testing.request_log``) and compared with the fixtures
``bench/holodeck_fidelity.py`` recorded from both HoloDeck and us; ``anthropic`` and ``ollama``
agents through the Claude Agent SDK's CLI on both sides, streaming Anthropic Messages.

A sample fails when a request we send changes (re-record with ``bench/holodeck_fidelity.py
--ours-only`` and say why in the commit), and when the fields where we differ from HoloDeck are
not exactly those listed for it in ``docs/holodeck-fidelity.md`` (a new difference, or a listed
one that has gone: the list stays true)."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.cli.main import main
from holodeck_core.testing import ModelServer, run_model_server
from holodeck_core.testing.request_log import differing_fields, normalise, request_set
from tests.conftest import REPO, corpus_path
from tests.holodeck_requests_samples import (
    FIXTURES,
    fixture_path,
    load_fixture,
    our_command,
    prepare,
    recorded_set,
    rules,
    sample_env,
    samples,
)

sys.path.insert(0, str(REPO / "bench"))  # bench/retrieval_compat.py, reused as it is
DOC = REPO / "docs" / "holodeck-fidelity.md"
FAST = {
    "examples/acme-support",
    "generated/tool_calls",
    "generated/geval",
    "samples/customer-support/openai",
    "samples/customer-support/ollama",
    "samples/ticket-routing/ollama",
}
"""Run in the default suite (the two ``ollama`` ones through the Claude CLI, ~10 s together);
the others (PDF indexes, contextual embeddings, more cases) are marked slow."""
_ROW = re.compile(r"^\| (`(?:agent|embeddings|other)\.[a-z_]+`(?:, `[a-z_.]+`)*) \| (.+?) \|", re.M)
"""A row of the known differences: its fields, then the samples where they differ."""


def listed_differences() -> dict[str, set[str]]:
    """Sample key -> the fields listed as different in the docs' table of known differences."""
    listed: dict[str, set[str]] = {}
    for fields, cell in _ROW.findall(DOC.read_text()):
        for key in re.findall(r"`([^`]+)`", cell):
            listed.setdefault(key, set()).update(re.findall(r"`([^`]+)`", fields))
    return listed


def _params() -> list[Any]:
    return [pytest.param(k, id=k, marks=() if k in FAST else pytest.mark.slow) for k in samples()]


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with run_model_server() as shared:
        yield shared


def _agent_file(key: str) -> Path:
    if key.startswith("examples/"):
        return REPO / key / "agent.yaml"
    return corpus_path("holodeck", key, "agent.yaml")


def test_every_recorded_sample_lists_its_differences() -> None:
    """The table lists, for each recorded sample, exactly the fields its fixture says differ
    (and no sample that has no fixture)."""
    corpus_path("holodeck", "samples")
    keys = set(samples())
    assert len(keys) == 16  # 11 sample agents, 4 generated, the example
    recorded = {k for k in keys if fixture_path(k).is_file()}
    listed = listed_differences()
    assert set(listed) <= recorded, set(listed) - recorded
    for key in recorded:
        differences = set(load_fixture(key)["differences"])
        assert differences == listed.get(key, set()), (key, differences ^ listed.get(key, set()))


def test_the_normal_form_tells_chat_completions_from_responses() -> None:
    """The same turn (instructions, a tool call and its result, one tool, temperature, limit)
    sent to Chat Completions and to Responses: equal messages, tools and sampling, and still
    two different requests: route, path and the token-limit field tell them apart."""
    tool = {"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}
    chat = {
        "model": "gpt-4o",
        "temperature": 0.3,
        "max_tokens": 100,
        "tools": [{"type": "function", "function": tool}],
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
        ],
    }
    responses = {
        "model": "gpt-4o",
        "temperature": 0.3,
        "max_output_tokens": 100,
        "instructions": "Be brief.",
        "tools": [{"type": "function", **tool}],
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
            {
                "type": "function_call",
                "call_id": "x9",
                "id": "fc_1",
                "name": "get_weather",
                "arguments": '{"city": "Paris"}',
            },
            {"type": "function_call_output", "call_id": "x9", "output": "Sunny"},
        ],
    }
    a = normalise({"route": "chat", "path": "/v1/chat/completions", "body": chat})
    b = normalise({"route": "responses", "path": "/v1/responses", "body": responses})
    assert a != b
    assert {k for k in a if a[k] != b[k]} == {"route", "path", "token_limit_field"}
    assert a["messages"][1] == {
        "role": "assistant",
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
    }


def _cli_request(**changes: Any) -> dict[str, Any]:
    """A request as the Claude Code CLI sends it (Anthropic Messages, streamed)."""
    body: dict[str, Any] = {
        "model": "gpt-oss:20b",
        "max_tokens": 32000,
        "stream": True,
        "thinking": {"type": "adaptive"},
        "metadata": {"user_id": '{"device_id":"abc","session_id":"s-1"}'},
        "system": [
            {
                "type": "text",
                "text": "x-anthropic-billing-header: cc_version=2.1.142.8b7; cch=9f7cf;",
            },
            {"type": "text", "text": "You are Eva.", "cache_control": {"type": "ephemeral"}},
        ],
        "tools": [{"name": "mcp__holodeck_tools__faq_search", "input_schema": {"type": "object"}}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>\nToday's date is 2026-12-06.\n"},
                    {"type": "text", "text": "How do I reset my password?"},
                ],
            }
        ],
    }
    body.update(changes)
    return {"route": "messages", "path": "/v1/messages", "body": body}


def test_the_normal_form_of_a_cli_request_keeps_what_the_model_reads() -> None:
    """What varies between two runs of one case (billing-header hashes, today's date, the
    session and device ids) is not a difference; the system text, a reminder's text, the
    tools, thinking and the stream flag are. The CLI's reminders are messages of their own, so
    the request and the CLI's title request (the input in ``<session>`` tags) are the case's."""
    base = normalise(_cli_request())
    again = _cli_request(metadata={"user_id": '{"device_id":"def","session_id":"s-2"}'})
    again["body"]["system"][0]["text"] = (
        "x-anthropic-billing-header: cc_version=2.1.142.d75; cch=e4259;"
    )
    again["body"]["messages"][0]["content"][0]["text"] = (
        "<system-reminder>\nToday's date is 2027-01-31.\n"
    )
    assert normalise(again) == base
    assert "cc_version=2.1.142.<hash>; cch=<hash>;" in base["instructions"]
    assert [m["role"] for m in base["messages"]] == ["reminder", "user"]
    assert base["stream"] is True and base["extra"] == {"thinking": {"type": "adaptive"}}
    other_version = _cli_request()
    other_version["body"]["system"][0]["text"] = (
        "x-anthropic-billing-header: cc_version=2.2.0.8b7; cch=9f7cf;"
    )
    for changed in (
        _cli_request(stream=False),
        _cli_request(thinking={"type": "enabled", "budget_tokens": 1024}),
        _cli_request(tools=[]),
        _cli_request(system=[{"type": "text", "text": "You are Bob."}]),
        other_version,
    ):
        assert normalise(changed) != base
    title = _cli_request(
        messages=[{"role": "user", "content": "<session>\nHow do I reset my password?\n</session>"}]
    )
    found = request_set([_cli_request(), title], [["How do I reset my password?"]])
    assert [r["case"] for r in found["agent"]] == [0, 0] and found["other"] == []


@pytest.mark.parametrize("key", _params())
def test_our_requests_are_the_recorded_ones(
    key: str,
    server: ModelServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent_file = _agent_file(key)
    if not fixture_path(key).is_file():
        pytest.skip(f"{key} not recorded yet: bench/holodeck_fidelity.py --only {key}")
    fixture = load_fixture(key)
    server.set_rules(rules(key, agent_file))
    server.reset()
    copy = tmp_path / "sample"
    agent = prepare(agent_file, copy, server.url)
    for name, value in sample_env(agent, server.url).items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(copy)
    code = main(our_command(agent))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert code == fixture["ours"]["exit_code"], err[-2000:]
    ours = recorded_set(server.requests(), copy)
    changed = differing_fields(ours, fixture["ours"]["requests"])
    assert ours == fixture["ours"]["requests"], (
        f"{key}: the requests we send changed in {sorted(changed)}; if on purpose, re-record "
        "with `bench/holodeck_fidelity.py --ours-only` and update docs/holodeck-fidelity.md"
    )
    differences = differing_fields(ours, fixture["holodeck"]["requests"])
    listed = listed_differences().get(key, set())
    assert differences == listed, (
        f"{key}: new differences from HoloDeck {sorted(differences - listed)}, listed ones "
        f"gone {sorted(listed - differences)} (docs/holodeck-fidelity.md, section 4)"
    )


def test_retrieval_overlap_with_holodeck_is_one_on_every_corpus_tool(
    server: ModelServer, tmp_path: Path
) -> None:
    """Our retrieval tools' results for the samples' own questions, now, against HoloDeck's
    recorded ones (bench/retrieval_compat.py's comparison, HoloDeck's side from the fixture):
    overlap@k 1.00 on every query that either side answers; hierarchical_document chunks (cut
    as HoloDeck cuts them) must be equal, not only alike."""
    corpus_path("holodeck", "samples")
    retrieval_compat = pytest.importorskip("retrieval_compat")  # bench/ is on the path here
    rows = json.loads((FIXTURES / "retrieval.json").read_text())["tools"]
    recorded = {row["tool"]: row for row in rows}
    items = retrieval_compat.tools()
    assert {i["key"] for i in items} == set(recorded)
    server.set_rules(None)
    mine = asyncio.run(retrieval_compat.ours(items, server, tmp_path))
    for item in items:
        row = recorded[item["key"]]
        for output, query in zip(mine[item["key"]], row["queries"], strict=True):
            ids = [c.chunk_id if row["structured"] else c.text for c in output.chunks or []]
            score = retrieval_compat.overlap(ids, query["holodeck"], row["k"], row["exact"])
            assert score in (None, 1.0), (item["key"], query["query"], score)
