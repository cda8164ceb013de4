"""What the loopback model server does besides answering: scripted faults (per protocol, first k
per request key, global sequences, seeded rates that reproduce), stats and peak concurrency,
latency, rules loaded from YAML with validation errors naming the field, and the command line
(bad rules exit 2 without a traceback, usage errors, serving until SIGTERM)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from holodeck_core.cli.model_server import main
from holodeck_core.testing import (
    ModelServer,
    Rules,
    RulesError,
    load_rules,
    parse_rules,
    request_key,
    run_model_server,
)
from tests.model_server_helpers import ant, chat_text, oai, user


def http_json(url: str, method: str = "GET") -> Any:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


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
            "streamed": 0,
            "by_route": {},
            "by_path": {},
            "by_rule": {},
            "by_key": {},
            "faults": {},
            "peak_concurrency": 0,
            "in_flight": 0,
            "bad_requests": 0,
            "batches": {
                "submitted": 0,
                "completed": 0,
                "failed": 0,
                "cancelled": 0,
                "expired": 0,
                "requests": dict.fromkeys(
                    ("submitted", "succeeded", "errored", "cancelled", "expired"), 0
                ),
                "by_route": {},
            },
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
    """The server's latency applies to every reply and a rule's latency adds to it; the rule's
    is long enough that a loaded machine's jitter cannot make a quick reply look slow."""
    rules = {"rules": [{"match": {"user": "slowish"}, "reply": "late", "latency": 0.8}]}
    with run_model_server(rules, latency=0.1) as server, oai(server) as client:
        start = time.monotonic()
        assert chat_text(client, "quick") == "I don't know."
        quick = time.monotonic() - start
        start = time.monotonic()
        assert chat_text(client, "slowish") == "late"
        slow = time.monotonic() - start
    assert 0.1 <= quick < 0.8
    assert slow >= 0.9


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
    code = (
        "import sys; from holodeck_core.cli.model_server import main; sys.exit(main(sys.argv[1:]))"
    )
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
