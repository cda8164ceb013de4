"""Clients and rules shared by the ``test_model_server_*`` modules: real openai / anthropic SDK
clients pointed at a loopback model server (no retries, so every fault is seen), a user message,
a chat round trip, and the scripted weather tool rule with its server fixture."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from holodeck_core.testing import ModelServer, run_model_server

WEATHER_RULE = {
    "name": "weather",
    "match": {"user": r"weather in (\w+)"},
    "tool_calls": [{"name": "get_weather", "arguments": {"city": "$1"}}],
    "reply": "It is {tool_result} in $1.",
}


def oai(server: ModelServer, **kw: Any) -> openai.OpenAI:
    kw.setdefault("base_url", server.openai_base_url)
    return openai.OpenAI(api_key="test", max_retries=0, **kw)


def ant(server: ModelServer, **kw: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=server.anthropic_base_url, api_key="test", max_retries=0, **kw
    )


def user(text: str) -> Any:
    return [{"role": "user", "content": text}]


def chat_text(client: openai.OpenAI, text: str, **kw: Any) -> str:
    r = client.chat.completions.create(model="gpt-test", messages=user(text), **kw)
    return r.choices[0].message.content or ""


@pytest.fixture
def weather_server() -> Iterator[ModelServer]:
    with run_model_server({"rules": [WEATHER_RULE]}) as server:
        yield server
