"""The loopback model server's OpenAI Chat Completions endpoint through the real openai SDK: plain
replies with usage and fingerprint, regex captures and JSON replies, tool-call round trips
(single, parallel, never-stopping), matching on tool results, nth turn, system prompt and
route, raw arguments passed verbatim, and logprobs for score tokens."""

from __future__ import annotations

import json
import math
from typing import Any, cast

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall

from holodeck_core.testing import ModelServer, count_tokens, request_key, run_model_server
from tests import model_server_helpers
from tests.model_server_helpers import ant, chat_text, oai, user

# Shared fixtures: pytest finds a fixture by its name in the test module.
weather_server = model_server_helpers.weather_server


WEATHER_TOOL_CHAT: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def function_calls(r: ChatCompletion) -> list[ChatCompletionMessageFunctionToolCall]:
    calls = r.choices[0].message.tool_calls or []
    assert all(isinstance(c, ChatCompletionMessageFunctionToolCall) for c in calls)
    return [c for c in calls if isinstance(c, ChatCompletionMessageFunctionToolCall)]


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


def test_every_request_is_recorded_for_comparison() -> None:
    """``GET /_requests`` (and ``ModelServer.requests()``): each model request's route, path
    and JSON body in arrival order, what bench/holodeck_fidelity.py compares; reset clears."""
    import httpx

    with run_model_server({"default": {"reply": "ok"}}) as server, oai(server) as client:
        client.chat.completions.create(
            model="m1", messages=[{"role": "user", "content": "one"}], max_tokens=7
        )
        with ant(server) as aclient:
            aclient.messages.create(
                model="m2", max_tokens=9, messages=[{"role": "user", "content": "two"}]
            )
        served = httpx.get(f"{server.url}/_requests").json()
        assert served == server.requests()
        assert [(r["route"], r["path"], r["body"]["model"]) for r in served] == [
            ("chat", "/v1/chat/completions", "m1"),
            ("messages", "/v1/messages", "m2"),
        ]
        assert served[0]["body"]["max_tokens"] == 7 and served[1]["body"]["max_tokens"] == 9
        server.reset()
        assert server.requests() == []
