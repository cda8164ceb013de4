"""Both providers' batch APIs on the loopback model server, through the official SDKs: OpenAI's
Files + Batch API (``client.files.create``, ``client.batches.create/retrieve/cancel/list``,
``client.files.content``) and Anthropic's Message Batches (``client.messages.batches.create/
retrieve/results/cancel/list``). Each request is answered as the synchronous route answers it
(a tool call included); the rules' ``batches`` section sets the completion delay, per-request
failures and expiry; cancellation is honoured; ``/_stats`` counts batches apart from the
synchronous calls; bad input gets the provider's 4xx error body, never a 500."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from holodeck_core.testing import ModelServer, run_model_server
from tests.model_server_helpers import WEATHER_RULE, ant, oai, user

RULES: dict[str, Any] = {
    "default": {"reply": "I don't know."},
    "rules": [
        WEATHER_RULE,
        {"match": {"user": "capital of (\\w+)"}, "reply": "The capital of $1 is its capital."},
        {"match": {"user": "overloaded"}, "fault": {"kind": "503"}},
    ],
}
QUESTIONS = ["capital of France", "weather in Paris", "what now?"]
TOOL_TURN: list[dict[str, Any]] = [
    {"role": "user", "content": "weather in Lyon"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Lyon"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
]


def _wait_for(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the batch did not reach the expected state in time")
        time.sleep(0.05)


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _chat_line(custom_id: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    body = {"model": "gpt-test", "messages": messages}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def _submit(
    client: openai.OpenAI, lines: list[dict[str, Any]], endpoint: str = "/v1/chat/completions"
) -> str:
    uploaded = client.files.create(file=("in.jsonl", io.BytesIO(_jsonl(lines))), purpose="batch")
    batch = client.batches.create(
        input_file_id=uploaded.id,
        endpoint=endpoint,  # type: ignore[arg-type]
        completion_window="24h",
    )
    assert batch.status == "validating" and batch.request_counts is not None
    return batch.id


def _ended(client: openai.OpenAI, batch_id: str) -> Any:
    ended = ("completed", "failed", "expired", "cancelled")
    _wait_for(lambda: client.batches.retrieve(batch_id).status in ended)
    return client.batches.retrieve(batch_id)


def _lines(client: openai.OpenAI, file_id: str | None) -> dict[str, dict[str, Any]]:
    if file_id is None:
        return {}
    text = client.files.content(file_id).text
    return {line["custom_id"]: line for line in map(json.loads, text.splitlines())}


def _comparable(answer: ChatCompletion | dict[str, Any]) -> dict[str, Any]:
    """An answer, read as the SDK reads it, without what differs between two calls of one
    request (ids, times)."""
    if isinstance(answer, dict):
        answer = ChatCompletion.model_validate(answer)
    body = answer.model_dump()
    choice = body["choices"][0]
    calls = [
        (c["function"]["name"], c["function"]["arguments"])
        for c in choice["message"].get("tool_calls") or []
    ]
    return {
        "content": choice["message"]["content"],
        "finish_reason": choice["finish_reason"],
        "tool_calls": calls,
        "usage": body["usage"],
        "model": body["model"],
    }


def test_openai_batch_answers_as_the_synchronous_route() -> None:
    """Each output line's body is the answer the synchronous route gives the same request:
    a reply, a tool call, the reply after the tool result, and the default."""
    requests = {f"q{i}": user(q) for i, q in enumerate(QUESTIONS)} | {"tool": TOOL_TURN}
    with run_model_server(RULES) as server:
        client = oai(server)
        sync = {
            cid: client.chat.completions.create(model="gpt-test", messages=m)
            for cid, m in requests.items()
        }
        batch_id = _submit(client, [_chat_line(cid, m) for cid, m in requests.items()])
        batch = _ended(client, batch_id)
        assert batch.status == "completed" and batch.error_file_id is None
        assert batch.request_counts is not None
        assert (batch.request_counts.total, batch.request_counts.completed) == (4, 4)
        assert batch.completed_at is not None and batch.in_progress_at is not None
        out = _lines(client, batch.output_file_id)
    assert set(out) == set(requests)
    for cid, line in out.items():
        assert line["error"] is None and line["id"].startswith("batch_req_")
        response = line["response"]
        assert response["status_code"] == 200 and response["request_id"]
        assert _comparable(response["body"]) == _comparable(sync[cid])
    tool_call = _comparable(out["q1"]["response"]["body"])["tool_calls"]
    assert tool_call == [("get_weather", '{"city": "Paris"}')]
    assert _comparable(out["tool"]["response"]["body"])["content"] == "It is sunny in Lyon."


def test_openai_batch_on_the_responses_endpoint() -> None:
    with run_model_server(RULES) as server:
        client = oai(server)
        sync = client.responses.create(model="gpt-test", input="weather in Rome")
        line = {
            "custom_id": "r1",
            "method": "POST",
            "url": "/v1/responses",
            "body": {"model": "gpt-test", "input": "weather in Rome"},
        }
        batch = _ended(client, _submit(client, [line], "/v1/responses"))
        body = _lines(client, batch.output_file_id)["r1"]["response"]["body"]
    assert [(o["name"], o["arguments"]) for o in body["output"]] == [
        (o.name, o.arguments) for o in sync.output if o.type == "function_call"
    ]
    assert sync.usage is not None
    assert Response.model_validate(body).usage == sync.usage


def test_openai_batch_delay_is_respected() -> None:
    rules = RULES | {"batches": {"complete_after": 1.5}}
    with run_model_server(rules) as server:
        client = oai(server)
        started = time.monotonic()
        batch_id = _submit(client, [_chat_line("a", user("hi")), _chat_line("b", user("ho"))])
        time.sleep(0.3)
        early = client.batches.retrieve(batch_id)
        assert early.status == "in_progress" and early.output_file_id is None
        batch = _ended(client, batch_id)
        assert batch.status == "completed"
        assert time.monotonic() - started >= 1.5


def test_openai_partial_failures_land_in_the_error_file() -> None:
    rules = RULES | {"batches": {"fail": {"custom_ids": ["b"], "status": 429, "message": "slow"}}}
    with run_model_server(rules) as server:
        client = oai(server)
        lines = [
            _chat_line("a", user("capital of Peru")),
            _chat_line("b", user("capital of Chile")),
            _chat_line("c", user("overloaded now")),
            {"custom_id": "d", "method": "POST", "url": "/v1/chat/completions", "body": {}},
            _chat_line("e", [{"role": "user", "content": "x", "tool_calls": 5}]),
        ]
        batch = _ended(client, _submit(client, lines))
        assert batch.status == "completed" and batch.request_counts is not None
        assert (batch.request_counts.completed, batch.request_counts.failed) == (1, 4)
        out, errors = _lines(client, batch.output_file_id), _lines(client, batch.error_file_id)
    assert set(out) == {"a"} and set(errors) == {"b", "c", "d", "e"}
    statuses = {cid: line["response"]["status_code"] for cid, line in errors.items()}
    assert statuses == {"b": 429, "c": 503, "d": 400, "e": 400}
    assert errors["b"]["response"]["body"]["error"]["message"] == "slow"
    assert "messages" in errors["d"]["response"]["body"]["error"]["message"]


def test_openai_batch_expiry_expires_the_unfinished_requests() -> None:
    rules = RULES | {"batches": {"complete_after": 2.0, "expire_after": 1.2}}
    with run_model_server(rules) as server:
        client = oai(server)
        batch_id = _submit(client, [_chat_line(f"r{i}", user(f"n {i}")) for i in range(4)])
        batch = _ended(client, batch_id)
        assert batch.status == "expired" and batch.expired_at is not None
        out, errors = _lines(client, batch.output_file_id), _lines(client, batch.error_file_id)
    assert set(out) == {"r0", "r1"} and set(errors) == {"r2", "r3"}
    assert errors["r2"]["response"] is None
    assert errors["r2"]["error"]["code"] == "batch_expired"


def test_openai_batch_cancel_is_honoured() -> None:
    rules = RULES | {"batches": {"complete_after": 30}}
    with run_model_server(rules) as server:
        client = oai(server)
        batch_id = _submit(client, [_chat_line("a", user("hi")), _chat_line("b", user("ho"))])
        cancelling = client.batches.cancel(batch_id)
        assert cancelling.status in ("cancelling", "cancelled")
        batch = _ended(client, batch_id)
        assert batch.status == "cancelled" and batch.cancelled_at is not None
        assert batch.output_file_id is None
        errors = _lines(client, batch.error_file_id)
        assert {e["error"]["code"] for e in errors.values()} == {"batch_cancelled"}
        with pytest.raises(openai.ConflictError):
            client.batches.cancel(batch_id)
        assert [b.id for b in client.batches.list()] == [batch_id]


def test_openai_batch_stats_apart_from_synchronous_calls() -> None:
    rules = RULES | {"batches": {"fail": {"custom_ids": ["b"]}}}
    with run_model_server(rules) as server:
        client = oai(server)
        client.chat.completions.create(model="gpt-test", messages=user("hello"))
        lines = [_chat_line("a", user("hi")), _chat_line("b", user("ho"))]
        _ended(client, _submit(client, lines))
        stats = server.stats()
    assert stats["total_calls"] == 1 and stats["by_route"] == {"chat": 1}
    batches = stats["batches"]
    assert (batches["submitted"], batches["completed"]) == (1, 1)
    assert batches["requests"] == {
        "submitted": 2,
        "succeeded": 1,
        "errored": 1,
        "cancelled": 0,
        "expired": 0,
    }
    assert batches["by_route"] == {"chat": 2}


def _upload(server: ModelServer, data: bytes) -> httpx.Response:
    files: dict[str, tuple[str | None, bytes]] = {
        "file": ("in.jsonl", data),
        "purpose": (None, b"batch"),
    }
    return httpx.post(f"{server.openai_base_url}/files", files=files)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (
            b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {}}\n{',
            "line 2: not valid JSON",
        ),
        (
            _jsonl([{"custom_id": "a", "method": "POST", "url": "/v1/images", "body": {}}]),
            "line 1: 'url'",
        ),
        (_jsonl([_chat_line("a", user("x")), _chat_line("a", user("y"))]), "duplicate"),
        (b"\xff\xfe", "UTF-8"),
        (b"\n\n", "no request lines"),
    ],
)
def test_openai_bad_input_file_is_a_400(data: bytes, needle: str) -> None:
    with run_model_server(RULES) as server:
        response = _upload(server, data)
        assert server.stats()["batches"]["submitted"] == 0
    assert response.status_code == 400
    error = response.json()["error"]
    assert needle in error["message"] and error["type"] == "invalid_request_error"


def test_openai_bad_batch_requests_get_openai_errors() -> None:
    with run_model_server(RULES) as server:
        client = oai(server)
        with pytest.raises(openai.NotFoundError, match="No such File object"):
            client.batches.create(
                input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h"
            )
        uploaded = client.files.create(
            file=("in.jsonl", io.BytesIO(_jsonl([_chat_line("a", user("x"))]))), purpose="batch"
        )
        with pytest.raises(openai.BadRequestError, match="'endpoint'"):
            client.batches.create(
                input_file_id=uploaded.id,
                endpoint="/v1/moderations",
                completion_window="24h",
            )
        with pytest.raises(openai.NotFoundError):
            client.batches.retrieve("batch_nope")
        with pytest.raises(openai.NotFoundError):
            client.files.content("file-nope")
        with pytest.raises(openai.BadRequestError, match="purpose"):
            client.files.create(file=("x.jsonl", io.BytesIO(b"{}")), purpose="assistants")
        mismatched = client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/responses", completion_window="24h"
        )
        assert mismatched.status == "failed" and mismatched.errors is not None
        assert mismatched.errors.data and mismatched.errors.data[0].line == 1
        raw = httpx.post(f"{server.openai_base_url}/batches", content=b"[")
        assert raw.status_code == 400 and "error" in raw.json()
        broken = httpx.post(
            f"{server.openai_base_url}/files",
            content=b"--x\r\nbroken",
            headers={"Content-Type": "multipart/form-data; boundary=x"},
        )
        assert broken.status_code == 400 and "multipart" in broken.json()["error"]["message"]


def _params(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "claude-test", "max_tokens": 100, "messages": messages}


ANT_TOOL_TURN: list[dict[str, Any]] = [
    {"role": "user", "content": "weather in Oslo"},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}
        ],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "snowy"}],
    },
]


def _ant_submit(client: anthropic.Anthropic, requests: dict[str, dict[str, Any]]) -> str:
    batch = client.messages.batches.create(
        requests=[{"custom_id": cid, "params": p} for cid, p in requests.items()]  # type: ignore[typeddict-item]
    )
    assert batch.processing_status == "in_progress" and batch.results_url is None
    assert batch.request_counts.processing == len(requests)
    return batch.id


def _ant_ended(client: anthropic.Anthropic, batch_id: str) -> Any:
    _wait_for(lambda: client.messages.batches.retrieve(batch_id).processing_status == "ended")
    return client.messages.batches.retrieve(batch_id)


def _ant_results(client: anthropic.Anthropic, batch_id: str) -> dict[str, Any]:
    return {r.custom_id: r.result for r in client.messages.batches.results(batch_id)}


def _message(message: Any) -> tuple[Any, ...]:
    """A message without what differs between two calls of one request (ids)."""
    blocks = [
        (b.type, getattr(b, "text", None), getattr(b, "name", None), getattr(b, "input", None))
        for b in message.content
    ]
    return (blocks, message.stop_reason, message.usage, message.model)


def test_anthropic_batch_answers_as_the_synchronous_route() -> None:
    requests = {f"q{i}": _params(user(q)) for i, q in enumerate(QUESTIONS)}
    requests["tool"] = _params(ANT_TOOL_TURN)
    with run_model_server(RULES) as server:
        client = ant(server)
        sync = {cid: client.messages.create(**p) for cid, p in requests.items()}
        batch = _ant_ended(client, _ant_submit(client, requests))
        assert batch.ended_at is not None and batch.results_url
        assert batch.request_counts.succeeded == 4 and batch.request_counts.processing == 0
        results = _ant_results(client, batch.id)
        beta = client.beta.messages.batches.retrieve(batch.id)
        assert beta.processing_status == "ended"
    assert set(results) == set(requests)
    for cid, result in results.items():
        assert result.type == "succeeded"
        assert _message(result.message) == _message(sync[cid])
    assert results["q1"].message.content[0].input == {"city": "Paris"}
    assert results["tool"].message.content[0].text == "It is snowy in Oslo."


def test_anthropic_batch_delay_failures_and_stats() -> None:
    rules = RULES | {"batches": {"complete_after": 1.0, "fail": {"custom_ids": ["b"]}}}
    requests = {
        "a": _params(user("capital of Peru")),
        "b": _params(user("capital of Chile")),
        "c": _params(user("overloaded now")),
        "d": {"model": "claude-test", "max_tokens": 10},
    }
    with run_model_server(rules) as server:
        client = ant(server)
        started = time.monotonic()
        batch_id = _ant_submit(client, requests)
        time.sleep(0.2)
        assert client.messages.batches.retrieve(batch_id).processing_status == "in_progress"
        with pytest.raises(anthropic.AnthropicError, match="results_url"):
            client.messages.batches.results(batch_id)
        batch = _ant_ended(client, batch_id)
        assert time.monotonic() - started >= 1.0
        results = _ant_results(client, batch_id)
        stats = server.stats()
    counts = batch.request_counts
    assert (counts.succeeded, counts.errored, counts.processing) == (1, 3, 0)
    assert {cid: r.type for cid, r in results.items()} == {
        "a": "succeeded",
        "b": "errored",
        "c": "errored",
        "d": "errored",
    }
    assert results["b"].error.error.type == "api_error"
    assert results["c"].error.error.type == "overloaded_error"
    assert results["d"].error.error.type == "invalid_request_error"
    assert stats["total_calls"] == 0
    assert stats["batches"]["by_route"] == {"messages": 4}
    assert stats["batches"]["requests"]["errored"] == 3


def test_anthropic_batch_expiry_and_cancel() -> None:
    rules = RULES | {"batches": {"complete_after": 2.0, "expire_after": 1.2}}
    requests = {f"r{i}": _params(user(f"n {i}")) for i in range(4)}
    with run_model_server(rules) as server:
        client = ant(server)
        expiring = _ant_submit(client, requests)
        server.set_rules(RULES | {"batches": {"complete_after": 30}})
        cancelled = _ant_submit(client, requests)
        assert client.messages.batches.cancel(cancelled).processing_status == "canceling"
        expired = _ant_ended(client, expiring)
        ended = _ant_ended(client, cancelled)
        expired_results = _ant_results(client, expiring)
        cancelled_results = _ant_results(client, cancelled)
        listed = [b.id for b in client.messages.batches.list(limit=1)]
        assert [b.id for b in client.messages.batches.list()] == [cancelled, expiring]
        stats = server.stats()["batches"]
    assert (expired.request_counts.succeeded, expired.request_counts.expired) == (2, 2)
    assert {r.type for r in expired_results.values()} == {"succeeded", "expired"}
    assert ended.request_counts.canceled == 4 and ended.cancel_initiated_at is not None
    assert {r.type for r in cancelled_results.values()} == {"canceled"}
    assert listed == [cancelled, expiring]  # the SDK pages on with after_id
    assert (stats["submitted"], stats["expired"], stats["cancelled"]) == (2, 1, 1)


def test_anthropic_bad_batch_requests_get_anthropic_errors() -> None:
    with run_model_server(RULES) as server:
        client = ant(server)
        with pytest.raises(anthropic.NotFoundError, match="No such Message Batch"):
            client.messages.batches.retrieve("msgbatch_nope")
        with pytest.raises(anthropic.BadRequestError, match="custom_id"):
            client.messages.batches.create(
                requests=[{"custom_id": "bad id!", "params": _params(user("x"))}]  # type: ignore[typeddict-item]
            )
        twice = [{"custom_id": "a", "params": _params(user("x"))}] * 2
        with pytest.raises(anthropic.BadRequestError, match="duplicate"):
            client.messages.batches.create(requests=twice)  # type: ignore[arg-type]
        with pytest.raises(anthropic.BadRequestError, match=r"requests\[0\]\.params"):
            client.messages.batches.create(requests=[{"custom_id": "a", "params": 3}])  # type: ignore[typeddict-item]
        raw = httpx.post(f"{server.url}/v1/messages/batches", json={"requests": []})
        assert raw.status_code == 400
        assert raw.json()["error"]["type"] == "invalid_request_error"
        nope = httpx.get(f"{server.url}/v1/messages/batches/msgbatch_nope/results")
        assert nope.status_code == 404 and nope.json()["type"] == "error"
        assert server.stats()["batches"]["submitted"] == 0
