"""The agent's calls on the OpenAI Responses API, as HoloDeck 0.7.1 sends them
(docs/holodeck-fidelity.md, docs/holodeck-fidelity.md): HoloDeck runs ``openai`` and
``azure_openai`` agents through the openai-agents SDK (0.17.4, ``OpenAIResponsesModel``), its judges
on Chat Completions. Everything here goes through the real ``openai`` SDK to the loopback model
server, which records each request.

The expected bodies are those openai-agents 0.17.4 sent for the same agent to the same
server (recorded by hand from HoloDeck's peer venv; ids aside, byte for byte)."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.agents.loop import AgentRunner, TurnInput
from holodeck_core.calls.errors import CallErrorKind, ModelCallError
from holodeck_core.calls.scheduler import CallScheduler, RetryPolicy
from holodeck_core.cli.main import main
from holodeck_core.models import EvalRun, LLMProvider, Status
from holodeck_core.providers.factory import make_client
from holodeck_core.testing import ModelServer, request_key, run_model_server

RULES: dict[str, Any] = {
    "rules": [
        {"match": {"user": "Task: write G-Eval evaluation steps"}, "json": {"steps": ["a"]}},
        {"match": {"user": "Task: score a test case"}, "json": {"score": 9, "reason": "ok"}},
        {
            "match": {"user": r"weather in (\w+)"},
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "$1"}}],
            "reply": "It is {tool_result} in $1.",
        },
        {"match": {"user": "^again"}, "reply": "Still sunny."},
    ],
    "default": {"reply": "Paris"},
}
TOOL = "def get_weather(city: str) -> str:\n    return 'sunny'\n"
WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "The city"}},
    "required": ["city"],
    "additionalProperties": False,
}


def write_agent(folder: Path, model: str, cases: str, extra: str = "") -> Path:
    (folder / "tools.py").write_text(TOOL)
    agent = folder / "agent.yaml"
    agent.write_text(
        textwrap.dedent(f"""\
            name: responses
            model: {model}
            instructions: {{inline: "You are a forecaster."}}
            tools:
              - type: function
                name: get_weather
                description: Weather of a city
                file: tools.py
                function: get_weather
                parameters:
                  city: {{type: string, description: The city}}
            """)
        + extra
        + "test_cases:\n"
        + cases
    )
    return agent


def openai_model(server: ModelServer, name: str = "gpt-4o-mini", extra: str = "") -> str:
    return (
        f'{{provider: openai, name: {name}, endpoint: "{server.openai_base_url}", '
        f"api_key: sk-test-key-1, temperature: 0.3, max_tokens: 321{extra}}}"
    )


def superset(folder: Path) -> EvalRun:
    [path] = (folder / "results" / "responses").glob("holodeck-pipelines/*.json")
    return EvalRun.model_validate_json(path.read_text())


def without_ids(item: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if key not in ("id", "call_id")}


def test_a_tool_calling_agent_sends_holodecks_requests_and_its_judge_chat(
    tmp_path: Path,
) -> None:
    judge = (
        "evaluations:\n"
        "  model: {provider: openai, name: judge-model, endpoint: ENDPOINT, api_key: sk-j-1}\n"
        "  metrics: [{type: geval, name: Correct, criteria: 'Is it right?'}]\n"
    )
    cases = "  - {name: lima, input: weather in Lima, ground_truth: It is sunny in Lima.}\n"
    with run_model_server(RULES) as server:
        extra = judge.replace("ENDPOINT", f'"{server.openai_base_url}"')
        agent = write_agent(tmp_path, openai_model(server), cases, extra)
        assert main(["test", str(agent), "-q"]) == 0
        requests = server.requests()
    agent_requests = [r for r in requests if r["body"].get("model") == "gpt-4o-mini"]
    assert [r["path"] for r in agent_requests] == ["/v1/responses"] * 2
    first, second = (r["body"] for r in agent_requests)
    tool = {
        "type": "function",
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": WEATHER_PARAMETERS,
        "strict": False,
    }
    assert first == {
        "model": "gpt-4o-mini",
        "instructions": "You are a forecaster.",
        "input": [{"content": "weather in Lima", "role": "user"}],
        "include": [],
        "tools": [tool],
        "temperature": 0.3,
        "max_output_tokens": 321,
    }
    call, output = second["input"][1:]
    assert call["id"].startswith("fc_") and call["call_id"] == output["call_id"]
    assert second["input"][0] == first["input"][0]
    assert without_ids(call) == {
        "type": "function_call",
        "name": "get_weather",
        "arguments": '{"city": "Lima"}',
        "status": "completed",
    }
    assert without_ids(output) == {"type": "function_call_output", "output": "sunny"}
    assert {key: value for key, value in second.items() if key != "input"} == {
        key: value for key, value in first.items() if key != "input"
    }
    judge_requests = [r for r in requests if r["body"].get("model") == "judge-model"]
    assert judge_requests and {r["route"] for r in judge_requests} == {"chat"}
    assert any(r["body"].get("logprobs") for r in judge_requests)  # G-Eval's distribution
    run = superset(tmp_path)
    [result] = run.report.results
    assert result.status is Status.PASS and result.agent_response == "It is sunny in Lima."
    [invocation] = result.tool_invocations or []
    assert (invocation.name, invocation.args, invocation.result) == (
        "get_weather",
        {"city": "Lima"},
        "sunny",
    )


def test_a_multi_turn_case_replays_the_models_output_items(tmp_path: Path) -> None:
    cases = "  - name: chat\n    turns:\n      - {input: hello}\n      - {input: again please}\n"
    with run_model_server(RULES) as server:
        model = openai_model(server, name="o3-mini")  # a reasoning model: no sampling settings
        agent = write_agent(tmp_path, model, cases, "response_format: {type: object}\n")
        assert main(["test", str(agent), "-q"]) == 0
        first, second = (r["body"] for r in server.requests())
        [turn_one] = server.requests()[0]["body"]["input"]
    assert "temperature" not in first and first["max_output_tokens"] == 321
    assert first["text"] == {
        "format": {
            "type": "json_schema",
            "name": "final_output",
            "schema": {"type": "object"},
            "strict": False,  # not a closed schema: HoloDeck never makes it strict
        }
    }
    user, reply, again = second["input"]
    assert user == turn_one == {"content": "hello", "role": "user"}
    assert reply["id"].startswith("msg_")
    assert without_ids(reply) == {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Paris", "annotations": [], "logprobs": []}],
    }
    assert again == {"content": "again please", "role": "user"}
    [result] = superset(tmp_path).report.results
    assert [turn.response for turn in result.turns or []] == ["Paris", "Still sunny."]


def test_usage_is_charged_at_the_price_table_rates(tmp_path: Path) -> None:
    (tmp_path / "holodeck.yaml").write_text(
        "pricing:\n  providers:\n    openai:\n      models:\n"
        "        my-model: {input: 1000000, output: 2000000}\n"  # $1 a prompt token, $2 an answer
    )
    cases = "  - {name: lima, input: weather in Lima}\n"
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, openai_model(server, name="my-model"), cases)
        assert main(["test", str(agent), "-q"]) == 0
        stats = server.stats()
    run = superset(tmp_path)
    [result] = run.report.results
    usage = result.token_usage
    assert usage is not None and stats["by_route"] == {"responses": 2}
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    cost = run.report.summary.cost
    assert cost is not None
    agent_cost = cost.headings["agent"]
    assert agent_cost.calls == 2
    assert (agent_cost.prompt_tokens, agent_cost.completion_tokens) == (
        usage.prompt_tokens,
        usage.completion_tokens,
    )
    assert agent_cost.usd == pytest.approx(usage.prompt_tokens + 2 * usage.completion_tokens)


def test_azure_agents_use_the_v1_surface_with_a_pinned_api_version_only() -> None:
    with run_model_server(RULES) as server:
        for version in ("2024-02-15-preview", None):
            model = LLMProvider.model_validate(
                {
                    "provider": "azure_openai",
                    "name": "my-deployment",
                    "endpoint": server.azure_endpoint,
                    "api_key": "k-123",
                    "api_version": version,
                }
            )
            agent = AgentRunner(make_client(model, agent=True), scheduler(1), "sys")
            [outcome] = asyncio.run(agent.run([TurnInput("hello")]))
            assert outcome.error is None and outcome.response == "Paris"
        pinned, unpinned = server.requests()
    assert pinned["path"] == unpinned["path"] == "/openai/v1/responses"
    assert pinned["query"] == {"api-version": "2024-02-15-preview"}
    assert "query" not in unpinned
    assert pinned["body"]["model"] == "my-deployment"


def scheduler(attempts: int) -> CallScheduler:
    return CallScheduler(2, RetryPolicy(max_attempts=attempts, base_delay=0.01, timeout=5))


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("429", CallErrorKind.RATE_LIMIT),
        ("500", CallErrorKind.SERVER),
        ("503", CallErrorKind.SERVER),
        ("malformed", CallErrorKind.MALFORMED),
        ("slow", CallErrorKind.TIMEOUT),
        ("drop", CallErrorKind.CONNECTION),
    ],
)
@pytest.mark.parametrize("agent", [True, False], ids=["responses", "chat"])
def test_errors_are_classified_as_chat_completions_classifies_them(
    kind: str, expected: CallErrorKind, agent: bool
) -> None:
    """The same fault gives the same error class whichever API the call used."""
    rules = {
        "faults": {"retry_after": 0.01, "slow_seconds": 3},
        "rules": [{"fault": {"kind": kind}}],
    }
    with run_model_server(rules) as server:
        model = LLMProvider.model_validate(
            {"provider": "openai", "name": "m", "endpoint": server.openai_base_url, "api_key": "k"}
        )
        runner = AgentRunner(make_client(model, agent=agent), scheduler(2), "sys", timeout=0.3)
        [outcome] = asyncio.run(runner.run([TurnInput("hello")]))
        route = "responses" if agent else "chat"
        calls = server.stats()["by_key"][request_key(route, "hello")]
    assert isinstance(outcome.error, ModelCallError)
    assert outcome.error.kind is expected, outcome.error
    assert calls == (2 if expected.transient else 1)


@pytest.mark.parametrize("agent", [True, False], ids=["responses", "chat"])
def test_bodies_reach_the_server_as_built_without_the_sdks_transform(
    agent: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our bodies are plain JSON, so they are POSTed as they are: the SDK's walk of a body
    against its request TypedDicts (~0.4 ms of CPU a call; docs/benchmarks.md) never runs,
    and the server gets the body the backend built, key for key."""
    import openai.resources.chat.completions.completions as chat_module
    import openai.resources.responses.responses as responses_module

    from holodeck_core.providers.messages import Message, ModelCall, ToolSpec

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the SDK's transform ran")

    for module in (chat_module, responses_module):
        monkeypatch.setattr(module, "async_maybe_transform", refuse)
    tool = ToolSpec("get_weather", "Weather of a city", WEATHER_PARAMETERS)
    with run_model_server(RULES) as server:
        model = LLMProvider.model_validate(
            {
                "provider": "openai",
                "name": "gpt-4o-mini",
                "endpoint": server.openai_base_url,
                "api_key": "sk-test-key-1",
                "temperature": 0.3,
            }
        )
        client = make_client(model, agent=agent)
        messages = [Message("user", 'again, é and "quotes"')]
        reply = asyncio.run(client.complete("sys", messages, tools=[tool], timeout=5))
        [request] = server.requests()
    assert reply.text == "Still sunny."
    assert request["path"] == ("/v1/responses" if agent else "/v1/chat/completions")
    assert request["body"] == client.request(ModelCall("sys", messages, [tool]))  # type: ignore[attr-defined]
