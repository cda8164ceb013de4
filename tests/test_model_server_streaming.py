"""``stream: true`` on the loopback model server, through the official SDKs' streaming clients:
Chat Completions (also Azure's route), the Responses API and Anthropic Messages (also
``?beta=true``) accumulate to the very message a non-streamed call answers (text, tool calls and
their arguments, JSON replies, thinking, usage); the ``cut`` fault ends a stream mid-way as a
dropped connection does; 429/500/latency apply before a stream starts; ``/_stats`` and
``/_requests`` mark streamed calls; and the SSE framing itself, read with plain httpx."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from holodeck_core.defaults import MODEL_SERVER_STREAM_PIECE_CHARS
from holodeck_core.testing import ModelServer, run_model_server
from holodeck_core.testing.rules import RulesError
from holodeck_core.testing.rules_loading import parse_rules
from holodeck_core.testing.server.streaming import pieces
from tests.model_server_helpers import WEATHER_RULE, ant, oai, user

HOSTILE_REPLY = 'line one\n\ndata: [DONE]\n\nevent: message_stop\r\n"quoted" \\ é 🌍 \x1b[31m'
RULES: dict[str, Any] = {
    "default": {
        "reply": "Hello there, this is a reply long enough for several deltas: "
        "supercalifragilisticexpialidocious."
    },
    "rules": [
        WEATHER_RULE
        | {
            "tool_calls": WEATHER_RULE["tool_calls"]
            + [{"name": "get_time", "arguments": {"zone": "Europe/$1", "n": [1, 2]}}]
        },
        {"match": {"user": r"extract (\w+) (\d+)"}, "json": {"name": "$1", "age": "$2"}},
        {"match": {"user": "hostile"}, "reply": HOSTILE_REPLY},
        {"match": {"user": "empty"}, "reply": ""},
        {
            "match": {"user": "think"},
            "thinking": "First, $0 think it over step by step.",
            "reply": "The answer is 42.",
        },
        {
            "match": {"user": "cut here"},
            "reply": "one two three four five six seven eight",
            "fault": {"kind": "cut", "after_events": 3},
        },
        {
            "match": {"user": "cut tool"},
            "tool_calls": [{"name": "lookup", "arguments": {"q": "a b c d e"}}],
            "fault": {"kind": "cut", "after_events": 5},
        },
        {"match": {"user": "cut default"}, "reply": "a b c d e f g", "fault": {"kind": "cut"}},
        {"match": {"user": "limited"}, "fault": {"kind": "429", "first": 1}},
        {"match": {"user": "broken"}, "fault": {"kind": "500"}},
        {"match": {"user": "slowly"}, "latency": 0.4},
    ],
}
PROMPTS = ["hi", "weather in Paris", "extract Ada 36", "hostile", "empty"]


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with run_model_server(RULES) as s:
        yield s


@pytest.fixture(autouse=True)
def _fresh(server: ModelServer) -> None:
    server.reset()


def _calls(message: Any) -> list[tuple[str, str, Any]]:
    return [
        (c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []
    ]


# --------------------------------------------------------------------- Chat Completions


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("azure", [False, True])
def test_chat_stream_accumulates_to_the_non_streamed_completion(
    server: ModelServer, prompt: str, azure: bool
) -> None:
    client: openai.OpenAI = (
        openai.AzureOpenAI(
            azure_endpoint=server.azure_endpoint,
            api_key="t",
            api_version="2024-10-21",
            max_retries=0,
        )
        if azure
        else oai(server)
    )
    kw: Any = {"model": "gpt-test", "messages": user(prompt)}
    with client.chat.completions.stream(**kw, stream_options={"include_usage": True}) as stream:
        chunks = list(stream)
        streamed = stream.get_final_completion()
    server.reset()  # the same call number, hence the same ids
    plain = client.chat.completions.create(**kw)
    got, want = streamed.choices[0], plain.choices[0]
    assert got.message.content == want.message.content
    assert _calls(got.message) == _calls(want.message)
    assert got.finish_reason == want.finish_reason
    assert streamed.usage == plain.usage and plain.usage is not None
    assert streamed.id == plain.id and streamed.model == plain.model
    deltas = [c for c in chunks if c.type == "chunk" and c.chunk.choices]
    if len(want.message.content or "") > 20 or want.message.tool_calls:
        assert len(deltas) > 4  # the answer came in pieces


def test_chat_stream_usage_only_when_asked(server: ModelServer) -> None:
    with oai(server) as client:
        chunks = list(client.chat.completions.create(model="m", messages=user("hi"), stream=True))
        assert all(c.usage is None and c.choices for c in chunks)
        with_usage = list(
            client.chat.completions.create(
                model="m",
                messages=user("hi"),
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    last = with_usage[-1]
    assert last.choices == [] and last.usage is not None and last.usage.total_tokens > 0
    assert [c.choices[0].finish_reason for c in with_usage[:-1]][-1] == "stop"


def test_chat_stream_tool_call_deltas_have_the_openai_shape(server: ModelServer) -> None:
    with oai(server) as client:
        chunks = list(
            client.chat.completions.create(model="m", messages=user("weather in Oslo"), stream=True)
        )
    pieces: dict[int, list[Any]] = {}
    for chunk in chunks:
        for call in chunk.choices[0].delta.tool_calls or []:
            pieces.setdefault(call.index, []).append(call)
    assert sorted(pieces) == [0, 1]
    for calls in pieces.values():
        head, rest = calls[0], calls[1:]
        assert head.id and head.function.name and head.function.arguments == ""
        assert len(rest) > 1 and all(c.id is None and c.function.name is None for c in rest)
    args = ["".join(c.function.arguments for c in pieces[i][1:]) for i in (0, 1)]
    assert [json.loads(a) for a in args] == [{"city": "Oslo"}, {"zone": "Europe/Oslo", "n": [1, 2]}]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_logprobs_ride_on_the_stream(server: ModelServer) -> None:
    server.set_rules({"rules": [{"reply": "I give it 8 out of 10", "logprobs": True}]})
    try:
        with oai(server) as client:
            kw: Any = {"model": "m", "messages": user("score"), "logprobs": True, "top_logprobs": 3}
            with client.chat.completions.stream(**kw) as stream:
                streamed = stream.get_final_completion().choices[0].logprobs
            plain = client.chat.completions.create(**kw).choices[0].logprobs
            include: Any = ["message.output_text.logprobs"]
            events = list(
                client.responses.create(model="m", input="s", include=include, stream=True)
            )
    finally:
        server.set_rules(RULES)
    assert streamed is not None and plain is not None and streamed.content == plain.content
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    done = next(e for e in events if e.type == "response.output_text.done")
    pieces = [lp.model_dump() for d in deltas for lp in d.logprobs]
    assert pieces == [lp.model_dump() for lp in done.logprobs] and pieces


# --------------------------------------------------------------------- the Responses API


@pytest.mark.parametrize("prompt", PROMPTS)
def test_responses_stream_accumulates_to_the_non_streamed_response(
    server: ModelServer, prompt: str
) -> None:
    with oai(server) as client:
        with client.responses.stream(model="m", input=prompt) as stream:
            streamed = stream.get_final_response()
        server.reset()
        events = list(client.responses.create(model="m", input=prompt, stream=True))
        server.reset()
        plain = client.responses.create(model="m", input=prompt)
    assert streamed.output_text == plain.output_text
    assert streamed.usage == plain.usage and streamed.id == plain.id
    assert [
        o.model_dump(exclude={"parsed_arguments"})
        for o in streamed.output
        if o.type == "function_call"
    ] == [o.model_dump() for o in plain.output if o.type == "function_call"]
    # The deltas alone rebuild every output item.
    assert [e.sequence_number for e in events] == list(range(len(events)))
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    for index, item in enumerate(plain.output):
        if item.type == "function_call":
            deltas = [
                e.delta
                for e in events
                if e.type == "response.function_call_arguments.delta" and e.output_index == index
            ]
            assert json.loads("".join(deltas)) == json.loads(item.arguments)
        else:
            text = "".join(
                e.delta
                for e in events
                if e.type == "response.output_text.delta" and e.output_index == index
            )
            assert text == item.content[0].text  # type: ignore[union-attr]
    for kind in ("response.output_item.added", "response.output_item.done"):
        assert types.count(kind) == len(plain.output)


def test_responses_stream_continues_a_stored_conversation(server: ModelServer) -> None:
    with oai(server) as client:
        with client.responses.stream(model="m", input="weather in Rome") as stream:
            first = stream.get_final_response()
        outputs = [
            {"type": "function_call_output", "call_id": o.call_id, "output": "sunny"}
            for o in first.output
            if o.type == "function_call"
        ]
        with client.responses.stream(
            model="m", input=outputs, previous_response_id=first.id
        ) as stream:
            second = stream.get_final_response()
    assert second.output_text == "It is sunny in Rome."


# --------------------------------------------------------------------- Anthropic Messages


@pytest.mark.parametrize("prompt", [*PROMPTS, "think"])
@pytest.mark.parametrize("beta", [False, True])
def test_messages_stream_accumulates_to_the_non_streamed_message(
    server: ModelServer, prompt: str, beta: bool
) -> None:
    with ant(server) as client:
        messages: Any = client.beta.messages if beta else client.messages
        kw: Any = {"model": "claude-test", "max_tokens": 200, "messages": user(prompt)}
        if beta:  # as the Claude CLI sends it
            kw["extra_query"] = {"beta": "true"}
        with messages.stream(**kw) as stream:
            events = list(stream)
            streamed = stream.get_final_message()
        server.reset()
        plain = messages.create(**kw)
    assert streamed.model_dump(exclude={"content"}) == plain.model_dump(exclude={"content"})
    assert [_block(b) for b in streamed.content] == [_block(b) for b in plain.content]
    assert streamed.usage.input_tokens > 0
    assert (streamed.usage.output_tokens > 0) is (prompt != "empty")  # from message_delta
    if prompt == "think":
        assert [b.type for b in plain.content] == ["thinking", "text"]
        assert sum(e.type == "thinking" for e in events) > 1
    queries = [(r["path"], r.get("query")) for r in server.requests()]
    assert queries == [("/v1/messages", {"beta": "true"} if beta else None)]


def _block(block: Any) -> dict[str, Any]:
    return block.model_dump(exclude={"parsed_output", "citations"})


# --------------------------------------------------------------------- faults


@pytest.mark.parametrize("prompt", ["cut here", "cut tool", "cut default"])
def test_a_cut_stream_makes_each_sdk_raise(server: ModelServer, prompt: str) -> None:
    with oai(server) as client, ant(server) as aclient:
        with pytest.raises(openai.APIConnectionError):
            list(client.chat.completions.create(model="m", messages=user(prompt), stream=True))
        with (
            pytest.raises(openai.APIConnectionError),
            client.responses.stream(model="m", input=prompt) as stream,
        ):
            stream.get_final_response()
        with (
            pytest.raises(Exception, match="incomplete chunked read") as cut,
            aclient.messages.stream(model="c", max_tokens=9, messages=user(prompt)) as s,
        ):
            s.get_final_message()
        assert type(cut.value).__name__ == "RemoteProtocolError"  # its transport's, unwrapped
        # Not streamed: the body stops short of its Content-Length.
        with pytest.raises(openai.APIConnectionError):
            client.chat.completions.create(model="m", messages=user(prompt))
    stats = server.stats()
    assert stats["faults"] == {"cut": 4} and stats["streamed"] == 3


def _raw(
    server: ModelServer, path: str, body: dict[str, Any]
) -> tuple[httpx.Response, str, BaseException | None]:
    """POST and read the body as far as it goes: (response, text read, the error that ended it)."""
    got: list[str] = []
    with (
        httpx.Client(timeout=10) as client,
        client.stream("POST", server.url + path, json=body) as r,
    ):
        try:
            for text in r.iter_text():
                got.append(text)
        except httpx.RemoteProtocolError as exc:
            return r, "".join(got), exc
    return r, "".join(got), None


def _frames(text: str) -> list[list[str]]:
    assert text.endswith("\n\n")
    return [frame.split("\n") for frame in text[:-2].split("\n\n")]


@pytest.mark.parametrize("after", [0, 1, 4])
def test_cut_after_n_events_sends_exactly_n(after: int) -> None:
    rules = {
        "rules": [{"reply": "a b c d e f g h", "fault": {"kind": "cut", "after_events": after}}]
    }
    with run_model_server(rules) as server:
        for path, body in (
            ("/v1/chat/completions", {"messages": user("x")}),
            ("/v1/responses", {"input": "x"}),
            ("/v1/messages", {"messages": user("x"), "max_tokens": 5}),
        ):
            r, text, error = _raw(server, path, {**body, "model": "m", "stream": True})
            assert r.status_code == 200 and isinstance(error, httpx.RemoteProtocolError)
            assert len(_frames(text) if text else []) == after


def test_global_cut_faults_and_their_default_event_count() -> None:
    rules = {"faults": {"first": {"cut": 1}, "cut_after_events": 2}}
    with run_model_server(rules) as server:
        body = {"model": "m", "messages": user("x"), "stream": True}
        _, text, error = _raw(server, "/v1/chat/completions", body)
        assert error is not None and len(_frames(text)) == 2
        _, text, error = _raw(server, "/v1/chat/completions", body)  # call 2: whole
        assert error is None and _frames(text)[-1] == ["data: [DONE]"]


def test_errors_and_latency_come_before_a_stream_starts(server: ModelServer) -> None:
    with oai(server) as client, ant(server) as aclient:
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="m", messages=user("limited"), stream=True)
        with pytest.raises(openai.InternalServerError):
            client.responses.create(model="m", input="broken", stream=True)
        with (
            pytest.raises(anthropic.InternalServerError),
            aclient.messages.stream(model="c", max_tokens=5, messages=user("broken")) as s,
        ):
            s.get_final_message()
        started = time.monotonic()
        stream = client.chat.completions.create(model="m", messages=user("slowly"), stream=True)
        first_chunk_after = time.monotonic() - started
        assert "".join(c.choices[0].delta.content or "" for c in stream)
    assert first_chunk_after >= 0.4


# --------------------------------------------------------------------- framing, stats, bad input


def test_sse_framing_read_raw(server: ModelServer) -> None:
    r, text, error = _raw(
        server, "/v1/chat/completions", {"model": "m", "messages": user("hostile"), "stream": True}
    )
    assert error is None and r.headers["content-type"].startswith("text/event-stream")
    frames = _frames(text)
    assert all(len(f) == 1 and f[0].startswith("data: ") for f in frames)
    assert frames[-1] == ["data: [DONE]"] and frames.count(["data: [DONE]"]) == 1
    chunks = [json.loads(f[0][6:]) for f in frames[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == HOSTILE_REPLY

    for path, body in (
        ("/v1/messages", {"messages": user("hostile"), "max_tokens": 5}),
        ("/v1/responses", {"input": "hostile"}),
    ):
        r, text, error = _raw(server, path, {**body, "model": "m", "stream": True})
        assert error is None and r.headers["content-type"].startswith("text/event-stream")
        frames = _frames(text)
        for name, data in frames:
            assert name.startswith("event: ") and data.startswith("data: ")
            assert json.loads(data[6:])["type"] == name[7:]
    names = [f[0][7:] for f in frames]  # the Responses API's, from the last loop
    assert names[-1] == "response.completed"


def test_stats_and_requests_mark_streamed_calls(server: ModelServer) -> None:
    with oai(server) as client:
        list(client.chat.completions.create(model="m", messages=user("hi"), stream=True))
        client.chat.completions.create(model="m", messages=user("hi"))
        client.chat.completions.create(model="m", messages=user("hi"), stream=False)
    stats = server.stats()
    assert stats["total_calls"] == 3 and stats["streamed"] == 1
    assert [r.get("streamed", False) for r in server.requests()] == [True, False, False]
    with httpx.Client() as raw:
        assert raw.get(server.url + "/_stats").json()["streamed"] == 1


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        (
            "/v1/chat/completions",
            {"messages": user("x"), "stream": "yes"},
            "'stream' must be a boolean",
        ),
        (
            "/v1/messages",
            {"messages": user("x"), "max_tokens": 5, "stream": 1},
            "'stream' must be a boolean",
        ),
        (
            "/v1/chat/completions",
            {"messages": user("x"), "stream_options": {"include_usage": True}},
            "only allowed when 'stream' is enabled",
        ),
        ("/v1/embeddings", {"input": "x", "stream": True}, "not supported by the embeddings"),
    ],
)
def test_bad_stream_parameters_are_a_clear_400(
    server: ModelServer, path: str, body: dict[str, Any], message: str
) -> None:
    with httpx.Client() as raw:
        r = raw.post(server.url + path, json={"model": "m", **body})
    assert r.status_code == 400 and message in r.text
    assert server.stats()["bad_requests"] == 1 and server.stats()["total_calls"] == 0


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (
            {"kind": "cut", "after_events": -1},
            "after_events: Input should be greater than or equal to 0",
        ),
        ({"kind": "cut", "after_events": "three"}, "after_events: Input should be a valid integer"),
        ({"kind": "cutt"}, "'cut'"),
        ({"kind": "500", "after_events": 2}, "'after_events' is for kind 'cut' only, not '500'"),
    ],
)
def test_bad_cut_faults_are_named(fault: dict[str, Any], message: str) -> None:
    with pytest.raises(RulesError) as err:
        parse_rules({"rules": [{"reply": "x", "fault": fault}]}, "rules.yaml")
    assert "rules.yaml" in str(err.value) and message in str(err.value)


@pytest.mark.parametrize(
    "text",
    ["", "   ", "word", "two words ", "  lead and trail  ", "x" * 40, HOSTILE_REPLY, '{"a":[1,2]}'],
)
def test_pieces_rebuild_the_text_in_bounded_deterministic_deltas(text: str) -> None:
    got = pieces(text)
    assert "".join(got) == text and got == pieces(text)
    assert all(
        len(p.split()) <= 1 and len(p.strip()) <= MODEL_SERVER_STREAM_PIECE_CHARS for p in got
    )
    assert all(p for p in got)
