"""Agent backends and the tool loop through the real openai and anthropic SDK clients."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.agents.loop import AgentRunner, TurnInput
from holodeck_core.calls.scheduler import CallScheduler, RetryPolicy
from holodeck_core.errors import ConfigError
from holodeck_core.models import LLMProvider, Tool
from holodeck_core.providers.factory import make_client
from holodeck_core.providers.messages import Image
from holodeck_core.tools.toolbox import ToolBox
from tests.reference_server import TOOL_CALL_ID, TOOL_USE_ID, reference_server

WEATHER_TOOL = """
def get_current_weather(location: str) -> str:
    return f"22C and sunny in {location}"

def broken(location: str) -> str:
    raise RuntimeError("weather service is down")
"""


def toolbox(tmp_path: Path, tools: list[dict[str, Any]]) -> ToolBox:
    (tmp_path / "weather.py").write_text(WEATHER_TOOL)
    from pydantic import TypeAdapter

    parsed = TypeAdapter(list[Tool]).validate_python(tools)
    return ToolBox(parsed, lambda p: tmp_path / p, timeout=5)


WEATHER = {
    "type": "function",
    "name": "get_current_weather",
    "description": "Current weather",
    "file": "weather.py",
    "function": "get_current_weather",
}


def runner(provider: str, base_url: str, box: ToolBox | None, **kw: Any) -> AgentRunner:
    model = LLMProvider.model_validate(
        {"provider": provider, "name": "test-model", "endpoint": base_url, "api_key": "sk-test-1"}
    )
    scheduler = CallScheduler(4, RetryPolicy(max_attempts=3, base_delay=0.01, timeout=5))
    return AgentRunner(make_client(model), scheduler, "You are a weather bot.", box, **kw)


@pytest.mark.parametrize(
    ("provider", "path", "call_id"),
    [("openai", "/v1", TOOL_CALL_ID), ("anthropic", "", TOOL_USE_ID)],
)
def test_function_tool_round_trip_against_a_reference_server(
    tmp_path: Path, provider: str, path: str, call_id: str
) -> None:
    box = toolbox(tmp_path, [WEATHER])
    with reference_server() as server:
        agent = runner(provider, server.url + path, box)
        image = Image("image/png", base64.b64encode(b"\x89PNG fake").decode())
        [outcome] = asyncio.run(agent.run([TurnInput("Weather in Boston?", [image])]))
    assert outcome.error is None
    assert outcome.response == "Weather report: 22C and sunny in Boston, MA"
    [invocation] = outcome.invocations
    assert (invocation.name, invocation.call_id) == ("get_current_weather", call_id)
    assert invocation.args == {"location": "Boston, MA"}
    assert invocation.result == "22C and sunny in Boston, MA"
    assert invocation.bytes == len('"22C and sunny in Boston, MA"')
    assert outcome.usage.total_tokens in (99 + 130, 472 + 91 + 600 + 20)
    first_path, first = server.requests[0]
    if provider == "openai":
        assert first_path == "/v1/chat/completions"
        assert first["tools"][0]["function"]["parameters"]["required"] == ["location"]
        user = first["messages"][1]["content"]
        assert user[1]["image_url"]["url"].startswith("data:image/png;base64,")
        assert outcome.system_fingerprint == "fp_44709d6fcb"
    else:
        assert first_path == "/v1/messages"
        assert first["system"] == "You are a weather bot."
        assert first["messages"][0]["content"][0]["type"] == "image"
        assert first["tools"][0]["input_schema"]["properties"] == {"location": {"type": "string"}}


def test_opaque_tool_without_mock_is_refused_before_any_call(tmp_path: Path) -> None:
    opaque = {"type": "vectorstore", "name": "kb", "description": "d", "source": "kb.md"}
    with pytest.raises(ConfigError, match=r"(?s)cannot run in this engine.*mock: \{result"):
        toolbox(tmp_path, [opaque])
    box = toolbox(tmp_path, [{**opaque, "mock": {"result": "From the KB."}}])
    assert [spec.name for spec in box.specs] == ["kb"]


def test_missing_function_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has no function 'nope'"):
        toolbox(tmp_path, [{**WEATHER, "function": "nope"}])


def test_missing_api_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="export ANTHROPIC_API_KEY"):
        make_client(LLMProvider(provider="anthropic", name="claude"))  # type: ignore[call-arg]


@pytest.mark.parametrize("provider", ["azure_openai", "ollama"])
def test_azure_and_ollama_routes_through_the_loopback_server(provider: str) -> None:
    from holodeck_core.testing import run_model_server

    rules = {"rules": [{"match": {"user": "hello"}, "reply": "hi from $0"}]}
    with run_model_server({"default": {"reply": "hi"}, **rules}) as server:
        endpoint = server.azure_endpoint if provider == "azure_openai" else server.url
        model = LLMProvider.model_validate(
            {
                "provider": provider,
                "name": "my-deployment",
                "endpoint": endpoint,
                "api_key": "k-123",
                "api_version": "2024-10-21",
            }
        )
        scheduler = CallScheduler(2, RetryPolicy(max_attempts=1, timeout=5))
        agent = AgentRunner(make_client(model), scheduler, "sys")
        [outcome] = asyncio.run(agent.run([TurnInput("hello")]))
        paths = server.stats()["by_path"]
    assert outcome.error is None and outcome.response
    expected = (
        "/openai/deployments/my-deployment/chat/completions"
        if provider == "azure_openai"
        else "/v1/chat/completions"
    )
    assert paths == {expected: 1}
