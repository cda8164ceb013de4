"""End-to-end tests of the loopback model server through the real openai/anthropic SDK clients."""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import anthropic
import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall

from holodeck_core.testing import (
    ModelServer,
    Rules,
    RulesError,
    count_tokens,
    load_rules,
    main,
    parse_rules,
    request_key,
    run_model_server,
)

WEATHER_TOOL_CHAT: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
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


def function_calls(r: ChatCompletion) -> list[ChatCompletionMessageFunctionToolCall]:
    calls = r.choices[0].message.tool_calls or []
    assert all(isinstance(c, ChatCompletionMessageFunctionToolCall) for c in calls)
    return [c for c in calls if isinstance(c, ChatCompletionMessageFunctionToolCall)]


def http_json(url: str, method: str = "GET") -> Any:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


@pytest.fixture
def weather_server() -> Iterator[ModelServer]:
    with run_model_server({"rules": [WEATHER_RULE]}) as server:
        yield server


# --------------------------------------------------------------------------- chat completions


def test_chat_plain_reply_usage_fingerprint_and_default() -> None:
    rules = {
        "default": {"reply": "I don't know."},
        "rules": [{"match": {"user": "hello"}, "reply": "Hi there, friend"}],
    }
    with run_model_server(rules) as server, oai(server) as client:
        r = client.chat.completions.create(
            model="gpt-test",
            messages=[
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "hello world"},
            ],
        )
        choice = r.choices[0]
        assert choice.message.content == "Hi there, friend"
        assert choice.finish_reason == "stop"
        assert choice.message.tool_calls is None
        assert r.model == "gpt-test"
        assert r.system_fingerprint
        assert r.usage is not None
        assert r.usage.prompt_tokens == count_tokens("You are terse. hello world") == 5
        assert r.usage.completion_tokens == 3
        assert r.usage.total_tokens == 8
        assert chat_text(client, "something else") == "I don't know."


def test_chat_regex_capture_and_json_reply_with_response_format() -> None:
    rules = {
        "rules": [
            {"match": {"user": r"capital of (\w+)"}, "reply": "The capital of $1 is unknown."},
            {"match": {"user": r"extract (\w+) (\d+)"}, "json": {"name": "$1", "age": "$2"}},
        ]
    }
    with run_model_server(rules) as server, oai(server) as client:
        assert chat_text(client, "What is the capital of France?") == (
            "The capital of France is unknown."
        )
        content = chat_text(
            client,
            "please extract Ada 36",
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "person", "schema": {"type": "object"}},
            },
        )
        assert json.loads(content) == {"name": "Ada", "age": "36"}


def test_chat_tool_call_round_trip(weather_server: ModelServer) -> None:
    with oai(weather_server) as client:
        messages: list[Any] = user("What is the weather in Paris?")
        first = client.chat.completions.create(
            model="gpt-test", messages=messages, tools=[WEATHER_TOOL_CHAT]
        )
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert choice.message.content is None
        calls = choice.message.tool_calls
        assert calls is not None and len(calls) == 1
        call = calls[0]
        assert call.type == "function"
        assert call.function.name == "get_weather"
        assert json.loads(call.function.arguments) == {"city": "Paris"}
        assert call.id
        messages.append(choice.message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"})
        second = client.chat.completions.create(
            model="gpt-test", messages=messages, tools=[WEATHER_TOOL_CHAT]
        )
        assert second.choices[0].finish_reason == "stop"
        assert second.choices[0].message.content == "It is sunny, 21 C in Paris."
    stats = weather_server.stats()
    key = request_key("chat", "What is the weather in Paris?")
    assert stats["by_key"] == {key: 2}
    assert stats["by_rule"] == {"weather": 2}


def test_chat_parallel_tool_calls_and_tool_results_batch() -> None:
    rules = {
        "rules": [
            {
                "match": {"user": "compare"},
                "tool_calls": [
                    {"name": "get_weather", "arguments": {"city": "Oslo"}},
                    {"name": "get_weather", "arguments": {"city": "Rome"}},
                ],
                "reply": "last={tool_result} all={tool_results}",
            }
        ]
    }
    with run_model_server(rules) as server, oai(server) as client:
        messages: list[Any] = user("compare Oslo and Rome")
        first = client.chat.completions.create(model="m", messages=messages)
        calls = function_calls(first)
        assert [json.loads(c.function.arguments)["city"] for c in calls] == ["Oslo", "Rome"]
        assert len({c.id for c in calls}) == 2
        messages.append(first.choices[0].message.model_dump(exclude_none=True))
        for c, result in zip(calls, ["cold", "warm"], strict=True):
            messages.append({"role": "tool", "tool_call_id": c.id, "content": result})
        second = client.chat.completions.create(model="m", messages=messages)
        assert second.choices[0].message.content == "last=warm all=cold\nwarm"


def test_tool_calls_without_reply_never_stop() -> None:
    rules = {"rules": [{"match": {"user": "loop"}, "tool_calls": [{"name": "again"}]}]}
    with run_model_server(rules) as server, oai(server) as client:
        messages: list[Any] = user("loop forever")
        for _ in range(3):
            r = client.chat.completions.create(model="m", messages=messages)
            assert r.choices[0].finish_reason == "tool_calls"
            call = function_calls(r)[0]
            assert call.function.arguments == "{}"
            messages.append(r.choices[0].message.model_dump(exclude_none=True))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "ok"})


def test_match_tool_result_nth_system_and_route() -> None:
    rules = {
        "rules": [
            {"match": {"user": "nth", "nth": 2}, "reply": "second call"},
            {"match": {"system": "(?i)pirate"}, "reply": "Arr"},
            {"match": {"route": "messages"}, "reply": "via messages"},
            {"match": {"tool_result": True}, "reply": "got {tool_result}"},
        ]
    }
    with run_model_server(rules) as server, oai(server) as client, ant(server) as aclient:
        assert [chat_text(client, "nth test") for _ in range(3)] == [
            "I don't know.",
            "second call",
            "I don't know.",
        ]
        r = client.chat.completions.create(
            model="m",
            messages=[
                {"role": "system", "content": "You are a PIRATE."},
                {"role": "user", "content": "hi"},
            ],
        )
        assert r.choices[0].message.content == "Arr"
        m = aclient.messages.create(model="claude-test", max_tokens=50, messages=user("hi"))
        assert m.content[0].type == "text" and m.content[0].text == "via messages"
        r = client.chat.completions.create(
            model="m",
            messages=[
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "42"},
            ],
        )
        assert r.choices[0].message.content == "got 42"
    assert server.stats()["by_rule"] == {"default": 2, "0": 1, "1": 1, "2": 1, "3": 1}


def test_arguments_raw_passes_invalid_json_verbatim() -> None:
    rules = {
        "rules": [
            {
                "match": {"user": "broken"},
                "tool_calls": [{"name": "f", "arguments_raw": '{"city": "Par'}],
            }
        ]
    }
    with run_model_server(rules) as server:
        with oai(server) as client:
            r = client.chat.completions.create(model="m", messages=user("broken args"))
            assert function_calls(r)[0].function.arguments == '{"city": "Par'
            rr = client.responses.create(model="m", input="broken args")
            assert rr.output[0].type == "function_call"
            assert rr.output[0].arguments == '{"city": "Par'
        with ant(server) as aclient:
            m = aclient.messages.create(model="c", max_tokens=10, messages=user("broken args"))
            assert m.content[0].type == "tool_use"
            # a raw string that is not a JSON object arrives as the tool_use input string
            assert cast(Any, m.content[0]).input == '{"city": "Par'


def test_logprobs_for_score_tokens() -> None:
    rules = {
        "rules": [
            {"match": {"user": "grade"}, "reply": "8", "logprobs": True},
            {
                "match": {"user": "weighted"},
                "reply": "Score: 7",
                "logprobs": {"8": 0.6, "7": 0.3, "9": 0.1},
            },
            {"match": {"user": "plain"}, "reply": "8"},
        ]
    }
    with run_model_server(rules) as server, oai(server) as client:
        r = client.chat.completions.create(
            model="judge", messages=user("grade it"), logprobs=True, top_logprobs=5
        )
        lp = r.choices[0].logprobs
        assert lp is not None and lp.content is not None
        assert [t.token for t in lp.content] == ["8"]
        top = {t.token: math.exp(t.logprob) for t in lp.content[0].top_logprobs}
        assert len(top) == 5
        assert {"7", "8", "9"} <= set(top)
        assert top["8"] == max(top.values())
        assert top["7"] == pytest.approx(top["9"])
        assert lp.content[0].bytes == [ord("8")]

        r = client.chat.completions.create(
            model="judge", messages=user("weighted"), logprobs=True, top_logprobs=3
        )
        lp = r.choices[0].logprobs
        assert lp is not None and lp.content is not None
        assert "".join(t.token for t in lp.content) == "Score: 7"
        score = next(t for t in lp.content if t.token.strip() == "7")
        dist = {t.token.strip(): math.exp(t.logprob) for t in score.top_logprobs}
        assert dist == pytest.approx({"8": 0.6, "7": 0.3, "9": 0.1})

        # not requested, or the rule does not say logprobs: none given
        r = client.chat.completions.create(model="judge", messages=user("grade it"))
        assert r.choices[0].logprobs is None
        r = client.chat.completions.create(
            model="judge", messages=user("plain"), logprobs=True, top_logprobs=2
        )
        assert r.choices[0].logprobs is None

        rr = client.responses.create(
            model="judge",
            input="grade it",
            include=["message.output_text.logprobs"],
            top_logprobs=3,
        )
        item = rr.output[0]
        assert item.type == "message"
        part = item.content[0]
        assert part.type == "output_text" and part.text == "8"
        assert part.logprobs is not None
        assert {t.token for t in part.logprobs[0].top_logprobs} == {"7", "8", "9"}


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


def test_streaming_is_refused_with_a_clear_400() -> None:
    with run_model_server() as server, oai(server) as client, ant(server) as aclient:
        with pytest.raises(openai.BadRequestError, match="stream"):
            client.chat.completions.create(model="m", messages=user("x"), stream=True)
        with pytest.raises(anthropic.BadRequestError, match="stream"):
            aclient.messages.create(model="c", max_tokens=5, messages=user("x"), stream=True)
        stats = server.stats()
        assert stats["bad_requests"] == 2
        assert stats["total_calls"] == 0


# --------------------------------------------------------------------------- faults


FAULT_RULES = {
    "faults": {"retry_after": 3},
    "rules": [
        {"match": {"user": "^rl$"}, "fault": {"kind": 429}},
        {"match": {"user": "^rl2$"}, "fault": {"kind": "429", "retry_after": 0.5}},
        {"match": {"user": "^e500$"}, "fault": {"kind": "500"}},
        {"match": {"user": "^e503$"}, "fault": {"kind": "503"}},
        {"match": {"user": "^drop$"}, "fault": {"kind": "drop"}},
        {"match": {"user": "^malformed$"}, "fault": {"kind": "malformed"}},
        {"match": {"user": "^slow$"}, "fault": {"kind": "slow", "slow_seconds": 5}},
    ],
}


def test_faults_openai() -> None:
    with run_model_server(FAULT_RULES) as server, oai(server) as client:
        with pytest.raises(openai.RateLimitError) as rl:
            chat_text(client, "rl")
        assert rl.value.response.headers["retry-after"] == "3"
        assert rl.value.code == "rate_limit_exceeded"
        with pytest.raises(openai.RateLimitError) as rl2:
            chat_text(client, "rl2")
        assert rl2.value.response.headers["retry-after"] == "0.5"

        with pytest.raises(openai.InternalServerError) as e500:
            chat_text(client, "e500")
        assert e500.value.status_code == 500
        assert isinstance(e500.value.body, dict) and e500.value.body["type"] == "server_error"
        body500 = e500.value.response.json()
        assert set(body500["error"]) >= {"message", "type", "code"}
        with pytest.raises(openai.InternalServerError) as e503:
            chat_text(client, "e503")
        assert e503.value.status_code == 503

        with pytest.raises(openai.APIConnectionError) as dropped:
            chat_text(client, "drop")
        assert not isinstance(dropped.value, openai.APITimeoutError)

        with pytest.raises(json.JSONDecodeError):
            chat_text(client, "malformed")

        start = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            client.with_options(timeout=0.3).chat.completions.create(
                model="m", messages=user("slow")
            )
        assert time.monotonic() - start < 3

        # the server stays healthy after every fault
        assert chat_text(client, "fine") == "I don't know."
    stats = server.stats()
    assert stats["faults"] == {"429": 2, "500": 1, "503": 1, "drop": 1, "malformed": 1, "slow": 1}


def test_faults_anthropic_and_responses() -> None:
    with run_model_server(FAULT_RULES) as server, ant(server) as client, oai(server) as oclient:

        def call(text: str, **kw: Any) -> Any:
            return client.messages.create(model="c", max_tokens=5, messages=user(text), **kw)

        with pytest.raises(anthropic.RateLimitError) as rl:
            call("rl")
        assert rl.value.response.headers["retry-after"] == "3"
        assert rl.value.body == {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": rl.value.body["error"]["message"]},  # type: ignore[index]
        }
        with pytest.raises(anthropic.InternalServerError) as e500:
            call("e500")
        assert e500.value.status_code == 500
        with pytest.raises(anthropic.APIStatusError) as e503:
            call("e503")
        assert e503.value.status_code == 503
        with pytest.raises(anthropic.APIConnectionError) as dropped:
            call("drop")
        assert not isinstance(dropped.value, anthropic.APITimeoutError)
        with pytest.raises(json.JSONDecodeError):
            call("malformed")
        with pytest.raises(anthropic.APITimeoutError):
            client.with_options(timeout=0.3).messages.create(
                model="c", max_tokens=5, messages=user("slow")
            )

        with pytest.raises(openai.RateLimitError):
            oclient.responses.create(model="m", input="rl")
        with pytest.raises(openai.APIConnectionError):
            oclient.responses.create(model="m", input="drop")
    # the timed-out slow handlers were cancelled when the clients went away
    deadline = time.monotonic() + 2
    while server.stats()["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.stats()["in_flight"] == 0


def test_fault_first_k_per_request_key_and_reset() -> None:
    rules = {
        "rules": [{"match": {"user": "flaky"}, "reply": "ok", "fault": {"kind": 503, "first": 2}}]
    }
    with run_model_server(rules) as server, oai(server) as client:
        for _ in range(2):
            with pytest.raises(openai.InternalServerError):
                chat_text(client, "flaky one")
        assert chat_text(client, "flaky one") == "ok"
        assert chat_text(client, "flaky one") == "ok"
        # a different request key has its own first K
        with pytest.raises(openai.InternalServerError):
            chat_text(client, "flaky two")
        stats = server.stats()
        assert stats["by_key"][request_key("chat", "flaky one")] == 4
        assert stats["by_key"][request_key("chat", "flaky two")] == 1
        assert stats["faults"] == {"503": 3}

        assert http_json(f"{server.url}/_reset", "POST") == {"ok": True}
        assert http_json(f"{server.url}/_stats") == {
            "total_calls": 0,
            "by_route": {},
            "by_path": {},
            "by_rule": {},
            "by_key": {},
            "faults": {},
            "peak_concurrency": 0,
            "in_flight": 0,
            "bad_requests": 0,
        }
        # counting starts over after a reset
        with pytest.raises(openai.InternalServerError):
            chat_text(client, "flaky one")


def test_global_first_faults_sequence_then_default() -> None:
    rules = {"default": "fine", "faults": {"first": {"429": 1, "500": 1}, "retry_after": 0}}
    with run_model_server(rules) as server, oai(server) as client:
        with pytest.raises(openai.RateLimitError) as rl:
            chat_text(client, "q")
        assert rl.value.response.headers["retry-after"] == "0"
        with pytest.raises(openai.InternalServerError):
            chat_text(client, "q")
        assert chat_text(client, "q") == "fine"
        assert server.stats()["by_rule"] == {"default": 3}


def _rate_pattern(server: ModelServer, client: openai.OpenAI) -> str:
    out = []
    for i in range(24):
        try:
            chat_text(client, f"question {i}")
            out.append(".")
        except openai.RateLimitError:
            out.append("R")
        except openai.InternalServerError:
            out.append("E")
    return "".join(out)


def test_seeded_rate_faults_are_reproducible() -> None:
    rules: dict[str, Any] = {"faults": {"rate": {"429": 0.3, "500": 0.3}, "seed": 7}}
    with run_model_server(rules) as server, oai(server) as client:
        first = _rate_pattern(server, client)
        stats = server.stats()
        server.reset()
        again = _rate_pattern(server, client)
    assert first == again
    assert {"R", "E", "."} <= set(first)
    assert stats["faults"] == {"429": first.count("R"), "500": first.count("E")}
    rules["faults"]["seed"] = 8
    with run_model_server(rules) as server, oai(server) as client:
        other = _rate_pattern(server, client)
    assert other != first


def test_rule_rate_fault_is_seeded_too() -> None:
    rules = {
        "faults": {"seed": 3},
        "rules": [{"match": {"user": "x"}, "reply": "ok", "fault": {"kind": "500", "rate": 0.5}}],
    }
    patterns = []
    for _ in range(2):
        with run_model_server(rules) as server, oai(server) as client:
            pattern = ""
            for i in range(16):
                try:
                    chat_text(client, f"x {i}")
                    pattern += "."
                except openai.InternalServerError:
                    pattern += "E"
            patterns.append(pattern)
    assert patterns[0] == patterns[1]
    assert "E" in patterns[0] and "." in patterns[0]


# --------------------------------------------------------------------------- stats, latency


def test_stats_per_key_and_peak_concurrency_async() -> None:
    prompts = ["alpha", "beta", "gamma"] * 2

    async def fire(server: ModelServer) -> list[str]:
        async with openai.AsyncOpenAI(
            base_url=server.openai_base_url, api_key="test", max_retries=0
        ) as client:
            results = await asyncio.gather(
                *(client.chat.completions.create(model="m", messages=user(p)) for p in prompts)
            )
        return [r.choices[0].message.content or "" for r in results]

    with run_model_server({"default": "pong"}, latency=0.3) as server:
        start = time.monotonic()
        replies = asyncio.run(fire(server))
        elapsed = time.monotonic() - start
        assert replies == ["pong"] * 6
        assert 0.3 <= elapsed < 1.2  # concurrent, not 6 * 0.3 s
        stats = http_json(f"{server.url}/_stats")
        assert stats["peak_concurrency"] == 6
        assert stats["in_flight"] == 0
        assert stats["total_calls"] == 6
        assert stats["by_key"] == {request_key("chat", p): 2 for p in ("alpha", "beta", "gamma")}
        assert stats["by_route"] == {"chat": 6}
        server.reset()
        assert server.stats()["peak_concurrency"] == 0


def test_latency_global_plus_rule() -> None:
    rules = {"rules": [{"match": {"user": "slowish"}, "reply": "late", "latency": 0.2}]}
    with run_model_server(rules, latency=0.1) as server, oai(server) as client:
        start = time.monotonic()
        assert chat_text(client, "quick") == "I don't know."
        quick = time.monotonic() - start
        start = time.monotonic()
        assert chat_text(client, "slowish") == "late"
        slow = time.monotonic() - start
    assert 0.1 <= quick < 0.28
    assert slow >= 0.3


def test_rule_without_reply_falls_back_to_default_and_set_rules() -> None:
    rules = {
        "default": {"reply": "default for $1"},
        "rules": [{"match": {"user": "(w+)"}, "latency": 0}],
    }
    with run_model_server(rules) as server, oai(server) as client:
        assert chat_text(client, "www") == "default for www"
        server.set_rules(Rules.model_validate({"default": "swapped"}))
        assert chat_text(client, "www") == "swapped"
        assert server.rules.default.reply == "swapped"


# --------------------------------------------------------------------------- rules and CLI


def test_rules_from_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(
        'default: {reply: "I don\'t know."}\n'
        'faults: {rate: {"429": 0.0, 500: 0.0}, retry_after: 1, seed: 7}\n'
        "rules:\n"
        '  - match: {user: "weather in (\\\\w+)", route: chat, tool_result: false, nth: 1}\n'
        '    tool_calls: [{name: get_weather, arguments: {city: "$1"}}]\n'
        '    reply: "It is {tool_result} in $1."\n'
        "    logprobs: true\n"
        "    latency: 0.01\n"
        '    fault: {kind: "429", first: 2}\n'
        "  - {reply: fallback, fault: {kind: 500, rate: 0.0}}\n",
        encoding="utf-8",
    )
    rules = load_rules(path)
    assert rules.rules[0].match.user == r"weather in (\w+)"
    assert rules.rules[0].fault is not None and rules.rules[0].fault.kind == "429"
    assert rules.rules[1].fault is not None and rules.rules[1].fault.kind == "500"
    assert set(rules.faults.rate) == {"429", "500"}
    with run_model_server(path) as server, oai(server) as client:
        with pytest.raises(openai.RateLimitError):
            chat_text(client, "weather in Paris")
        # call 2 of that key: `nth: 1` no longer matches, the catch-all rule answers
        assert chat_text(client, "weather in Paris") == "fallback"
        assert server.stats()["by_rule"] == {"0": 1, "1": 1}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"rules": [{"match": {"usr": "x"}}]},
            "rules[0].match: unknown field 'usr'; did you mean 'user'?",
        ),
        (
            {"rules": [{"fault": {"kind": "404"}}]},
            "rules[0].fault.kind: Input should be '400', '401', '429'",
        ),
        ({"rules": [{"match": {"route": "chatt"}}]}, "rules[0].match.route"),
        ({"rules": [{"match": {"user": "(["}}]}, "not a valid regular expression"),
        ({"rules": [{"reply": "a", "json": {"a": 1}}]}, "either 'reply'"),
        (
            {"rules": [{"tool_calls": [{"name": "f", "arguments": {}, "arguments_raw": "{"}]}]},
            "rules[0].tool_calls[0]: give either 'arguments'",
        ),
        ({"rules": [{"fault": {"kind": "500", "first": 1, "rate": 0.5}}]}, "not both"),
        ({"faults": {"rate": {"429": 0.8, "500": 0.5}}}, "faults.rate: the rates add up to 1.3"),
        ({"faults": {"sed": 1}}, "faults: unknown field 'sed'; did you mean 'seed'?"),
        ({"rule": []}, "(top level): unknown field 'rule'; did you mean 'rules'?"),
        ({"rules": [{"logprobs": "yes"}]}, "rules[0].logprobs: must be true/false"),
        ({"rules": [{"latency": -1}]}, "rules[0].latency"),
        (
            {"rules": [{"replies": [{"p": 0.7, "reply": "a"}, {"p": 0.5, "reply": "b"}]}]},
            "the replies' probabilities add up to 1.2",
        ),
        ({"rules": [{"replies": [{"p": 0, "reply": "a"}]}]}, "rules[0].replies[0].p"),
    ],
)
def test_rules_validation_errors_name_the_field(data: dict[str, Any], expected: str) -> None:
    with pytest.raises(RulesError) as err:
        parse_rules(data, "my-rules.yaml")
    message = str(err.value)
    assert "my-rules.yaml" in message
    assert expected in message
    assert "fix" in message


def test_run_model_server_rejects_bad_rules_and_other_hosts(tmp_path: Path) -> None:
    with pytest.raises(RulesError, match="unknown field 'usr'"):
        run_model_server({"rules": [{"match": {"usr": "x"}}]}).__enter__()
    with pytest.raises(ValueError, match=r"127\.0\.0\.1"), run_model_server(host="0.0.0.0"):
        pass
    with pytest.raises(RulesError, match="file not found"):
        load_rules(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            "rules:\n  - match: {usr: 'x'}\n    fault: {kind: 404}\n",
            ["rules[0].match: unknown field 'usr'", "rules[0].fault.kind"],
        ),
        ("rules:\n  - match: {user: 'a: b'\n", ["YAML syntax error at line 3"]),
        ("- just\n- a list\n", ["expected a mapping"]),
    ],
)
def test_main_bad_rules_file_exits_2_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: list[str]
) -> None:
    path = tmp_path / "bad-rules.yaml"
    path.write_text(content, encoding="utf-8")
    assert main(["--port", "0", "--script", str(path)]) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert str(path) in err
    for fragment in expected:
        assert fragment in err
    assert "fix" in err


def test_main_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--script", str(tmp_path / "missing.yaml")]) == 2
    assert main(["--host", "0.0.0.0"]) == 2
    assert main(["--latency", "-1"]) == 2
    assert main(["--port", "notaport"]) == 2
    out, err = capsys.readouterr()
    assert "file not found" in err
    assert "refusing host '0.0.0.0'" in err
    assert "Traceback" not in out + err


def test_main_serves_until_sigterm(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("default: {reply: served by main}\n", encoding="utf-8")
    code = "import sys; from holodeck_core.testing import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "--port", "0", "--script", str(path), "--latency", "0.01"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("holodeck model-server listening on http://127.0.0.1:"), line
        url = line.split()[-1]
        with openai.OpenAI(base_url=f"{url}/v1", api_key="t", max_retries=0) as client:
            assert chat_text(client, "hi") == "served by main"
        assert http_json(f"{url}/_stats")["total_calls"] == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
