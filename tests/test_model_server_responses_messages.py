"""The loopback model server's other wire protocols through the real SDKs: the OpenAI Responses API
(tool round trip, full input and ``previous_response_id``), Anthropic Messages (tool round
trip), the Azure deployment route and the models list for both SDKs (streaming:
tests/test_model_server_streaming.py)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from holodeck_core.testing import ModelServer, count_tokens, request_key, run_model_server
from tests import model_server_helpers
from tests.model_server_helpers import WEATHER_RULE, ant, chat_text, oai, user

# Shared fixtures: pytest finds a fixture by its name in the test module.
weather_server = model_server_helpers.weather_server


WEATHER_TOOL_RESPONSES: Any = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


WEATHER_TOOL_ANTHROPIC: Any = {
    "name": "get_weather",
    "description": "weather by city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


# --------------------------------------------------------------------------- responses API


def test_responses_tool_round_trip_full_input_and_previous_response_id(
    weather_server: ModelServer,
) -> None:
    with oai(weather_server) as client:
        first = client.responses.create(
            model="gpt-test",
            instructions="Use tools.",
            input=[{"role": "user", "content": "weather in Rome please"}],
            tools=[WEATHER_TOOL_RESPONSES],
        )
        assert first.status == "completed"
        call = first.output[0]
        assert call.type == "function_call"
        assert call.name == "get_weather"
        assert json.loads(call.arguments) == {"city": "Rome"}
        assert call.call_id
        assert first.usage is not None
        assert first.usage.input_tokens == count_tokens("Use tools. weather in Rome please")
        assert first.usage.total_tokens == first.usage.input_tokens + first.usage.output_tokens

        # an agent that resends the whole conversation
        second = client.responses.create(
            model="gpt-test",
            instructions="Use tools.",
            input=[
                {"role": "user", "content": "weather in Rome please"},
                {
                    "type": "function_call",
                    "call_id": call.call_id,
                    "name": call.name,
                    "arguments": call.arguments,
                },
                {"type": "function_call_output", "call_id": call.call_id, "output": "rainy"},
            ],
            tools=[WEATHER_TOOL_RESPONSES],
        )
        assert second.output_text == "It is rainy in Rome."
        assert second.output[0].type == "message"

        # an agent that chains with previous_response_id
        third = client.responses.create(
            model="gpt-test",
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "foggy"}],
        )
        assert third.output_text == "It is foggy in Rome."

        with pytest.raises(openai.BadRequestError, match="not found"):
            client.responses.create(model="m", previous_response_id="resp_nope", input="x")
    stats = weather_server.stats()
    assert stats["by_route"] == {"responses": 3}
    assert stats["by_key"] == {request_key("responses", "weather in Rome please"): 3}


# --------------------------------------------------------------------------- anthropic messages


def test_messages_tool_round_trip() -> None:
    rules = {
        "rules": [
            {**WEATHER_RULE, "match": {"user": r"weather in (\w+)", "system": "forecaster"}},
        ]
    }
    with run_model_server(rules) as server, ant(server) as client:
        messages: list[Any] = user("weather in Oslo?")
        first = client.messages.create(
            model="claude-test",
            max_tokens=100,
            system="You are a forecaster.",
            messages=messages,
            tools=[WEATHER_TOOL_ANTHROPIC],
        )
        assert first.stop_reason == "tool_use"
        block = first.content[0]
        assert block.type == "tool_use"
        assert block.name == "get_weather"
        assert block.input == {"city": "Oslo"}
        assert first.usage.input_tokens == count_tokens("You are a forecaster. weather in Oslo?")
        assert first.usage.output_tokens > 0
        messages.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": block.id,
                        "content": [{"type": "text", "text": "snowy"}],
                    }
                ],
            }
        )
        second = client.messages.create(
            model="claude-test",
            max_tokens=100,
            system="You are a forecaster.",
            messages=messages,
            tools=[WEATHER_TOOL_ANTHROPIC],
        )
        assert second.stop_reason == "end_turn"
        assert second.content[0].type == "text"
        assert second.content[0].text == "It is snowy in Oslo."
    assert server.stats()["by_key"] == {request_key("messages", "weather in Oslo?"): 2}


# --------------------------------------------------------------------------- azure, models


def test_azure_deployment_route() -> None:
    with (
        run_model_server(
            {"rules": [{"match": {"user": "azure"}, "reply": "from azure"}]}
        ) as server,
        openai.AzureOpenAI(
            azure_endpoint=server.azure_endpoint,
            api_key="test",
            api_version="2024-10-21",
            max_retries=0,
        ) as client,
    ):
        r = client.chat.completions.create(model="my-deploy", messages=user("hello azure"))
        assert r.choices[0].message.content == "from azure"
        assert r.model == "my-deploy"
        stats = server.stats()
        assert stats["by_path"] == {"/openai/deployments/my-deploy/chat/completions": 1}
        assert stats["by_route"] == {"chat": 1}
        # the api-version query parameter is required, as on Azure
        bare_url = f"{server.url}/openai/deployments/my-deploy"
        with (
            oai(server, base_url=bare_url) as bare,
            pytest.raises(openai.BadRequestError, match="api-version"),
        ):
            bare.chat.completions.create(model="x", messages=user("hello azure"))


@pytest.mark.parametrize("given", ["refund policy", ["refund policy", "shipping times", "x"]])
def test_ollama_native_embed_route_answers_the_same_vectors(given: str | list[str]) -> None:
    """Ollama's ``POST /api/embed`` (LiteLLM's ``ollama/`` models; HoloDeck's embeddings of an
    ``ollama`` agent) in Ollama's shape, the vectors of ``/v1/embeddings``; recorded and
    counted as embeddings."""
    texts = [given] if isinstance(given, str) else given
    with run_model_server() as server, httpx.Client(base_url=server.url) as http:
        body = {"model": "nomic-embed-text:latest", "input": given}
        native = http.post("/api/embed", json=body).json()
        openai_shape = http.post("/v1/embeddings", json=body).json()
        assert set(native) == {"model", "embeddings", "prompt_eval_count"}
        assert native["model"] == "nomic-embed-text:latest"
        assert native["embeddings"] == [d["embedding"] for d in openai_shape["data"]]
        assert len(native["embeddings"]) == len(texts)
        assert native["prompt_eval_count"] == openai_shape["usage"]["prompt_tokens"]
        assert http.post("/api/embed", json={"model": "m", "input": []}).status_code == 400
        assert server.stats()["by_path"]["/api/embed"] == 1  # the refused one is not
        assert [r["route"] for r in server.requests()][:1] == ["embeddings"]


def test_models_list_for_both_sdks_and_unknown_route() -> None:
    with run_model_server() as server, oai(server) as client, ant(server) as aclient:
        ids = [m.id for m in client.models.list()]
        assert "loopback-gpt" in ids
        assert client.models.retrieve("gpt-4o").id == "gpt-4o"
        page = aclient.models.list()
        assert [m.id for m in page.data] == ids
        with pytest.raises(openai.NotFoundError):
            client.moderations.create(input="x")
        assert chat_text(client, "anything") == "I don't know."
