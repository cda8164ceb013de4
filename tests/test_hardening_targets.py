"""Targets that speak HTTP against a hostile agent (docs/agent-yaml.md), end to end
through ``holodeck test`` for each kind (``http``, ``openai_chat``, ``holodeck_serve``): a
redirect off the target's origin is never followed (its secret headers and the conversation
stay home), one within it is, boundedly; a reply body past ``MAX_TARGET_REPLY_BYTES`` is cut
there (or refused on its Content-Length) and is the case's ERROR naming the limit."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.defaults import MAX_TARGET_REDIRECTS, MAX_TARGET_REPLY_BYTES
from holodeck_core.models import Status
from tests.hostile import no_traceback, run_cli
from tests.target_hostile import HostileState, create_hostile_app
from tests.target_servers import serve_app
from tests.test_targets import CANARY, assert_no_canary, eval_run, project

PATHS = {
    "http": "/chat",
    "openai_chat": "/v1/chat/completions",
    "holodeck_serve": "/agent/served/chat",
}


@pytest.fixture(autouse=True)
def agent_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_KEY", CANARY)


def target(kind: str, base: str) -> dict[str, Any]:
    """``kind`` at ``base``, with a secret header where the kind takes headers; one attempt."""
    secret = {"X-Api-Key": "${AGENT_KEY}"}
    specs: dict[str, dict[str, Any]] = {
        "http": {"url": f"{base}/chat", "headers": secret, "response": {"text": "output.text"}},
        "openai_chat": {"url": f"{base}/v1", "model": "m", "api_key": "${AGENT_KEY}"},
        "holodeck_serve": {"url": base},
    }
    if kind == "openai_chat":
        specs[kind]["headers"] = secret
    return {kind: {**specs[kind], "attempts": 1, "timeout": 60}}


def cases(pairs: dict[str, str | None]) -> str:
    """A case per ``name: message``; a message with ``=> answer`` passes with that answer."""
    out = []
    for name, message in pairs.items():
        assert message is not None
        text, _, answer = message.partition(" => ")
        truth = f", ground_truth: '{answer}'" if answer else ""
        out.append(f"- {{name: {name}, input: '{text}'{truth}}}\n")
    return "".join(out)


def run(tmp_path: Path, kind: str, base: str, pairs: dict[str, str | None]) -> dict[str, Any]:
    agent = project(tmp_path, target(kind, base), cases(pairs))
    proc = run_cli(["test", str(agent), "-q"])
    no_traceback(proc)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert CANARY not in proc.stdout + proc.stderr
    assert_no_canary(tmp_path)
    evalrun, _ = eval_run(tmp_path)
    return {r.test_name: r for r in evalrun.report.results}


@pytest.mark.parametrize("kind", list(PATHS))
def test_a_redirect_off_the_targets_origin_is_an_error_and_sends_nothing_there(
    tmp_path: Path, kind: str
) -> None:
    home, away = HostileState(), HostileState()
    path = PATHS[kind]
    with serve_app(create_hostile_app(home)) as base, serve_app(create_hostile_app(away)) as other:
        port = base.rsplit(":", 1)[1]
        elsewhere = {
            "port": f"redirect 307 {other}/landed{path}",
            "host": f"redirect 308 http://localhost:{port}/landed{path}",
            "scheme": f"redirect 307 https://127.0.0.1:{port}/landed{path}",
            "relative": f"redirect 302 //{other.split('//')[1]}/landed{path}",
        }
        within = {
            "kept": f"redirect 307 /landed{path} => landed POST: redirect 307 /landed{path}",
            "absolute": f"redirect 308 {base}/landed{path} => landed POST: redirect 308 "
            f"{base}/landed{path}",
            "see other": f"redirect 303 /landed{path} => landed GET: ",
            "loop": "loop",
        }
        results = run(tmp_path, kind, base, {**elsewhere, **within})
    assert away.requests == []  # nothing reached the other port
    assert all(seen.host == f"127.0.0.1:{port}" for seen in home.requests)  # nor the other host
    label = f"target {kind} "
    for name, message in elsewhere.items():
        status, location = message.split()[1:]
        origin = location.split("/landed")[0]
        origin = f"http:{origin}" if origin.startswith("//") else origin
        assert results[name].status is Status.ERROR
        [error] = results[name].errors
        assert error.startswith(f"rejected_response {status}: {label}") and error.endswith(
            f": HTTP {status} redirects to another origin, {origin}: not followed (the target's "
            f"headers and body go only to {base}); set url to the address it moves to"
        ), error
    for name in ("kept", "absolute", "see other"):
        assert results[name].status is Status.PASS, (name, results[name].errors)
    [error] = results["loop"].errors
    assert error.startswith(f"rejected_response: {label}") and error.endswith(
        f": more than {MAX_TARGET_REDIRECTS} redirects (MAX_TARGET_REDIRECTS); set url to the "
        "address that answers"
    ), error
    landed = [seen for seen in home.requests if seen.path.startswith("/landed")]
    assert sorted((seen.method, seen.body is None) for seen in landed) == [
        ("GET", True),  # 303: no body
        ("POST", False),
        ("POST", False),
    ]
    if kind != "holodeck_serve":  # same origin: the headers go along
        assert all(seen.headers.get("X-Api-Key") == CANARY for seen in landed)
    loops = Counter(seen.path for seen in home.requests if seen.body and "loop" in str(seen.body))
    assert loops == {path: MAX_TARGET_REDIRECTS + 1}


@pytest.mark.parametrize("kind", list(PATHS))
def test_a_reply_past_the_bound_is_cut_there_and_is_an_error_naming_it(
    tmp_path: Path, kind: str
) -> None:
    state = HostileState()
    with serve_app(create_hostile_app(state)) as base:
        results = run(
            tmp_path,
            kind,
            base,
            {
                "declared": "huge-length",
                "endless": "endless",
                "one byte over": "over-by-one",
                "failing": "endless 500",
                "fine": "hello => plain: hello",
            },
        )
    limit = f"the reply is larger than the limit of {MAX_TARGET_REPLY_BYTES:,} bytes"
    assert results["fine"].status is Status.PASS
    expected = {
        "declared": f"{limit} (MAX_TARGET_REPLY_BYTES): its Content-Length is 1,500,000,000 bytes",
        "endless": f"{limit} (MAX_TARGET_REPLY_BYTES): the body ran past it",
        "one byte over": f"{limit} (MAX_TARGET_REPLY_BYTES): the body ran past it",
    }
    for name, reason in expected.items():
        assert results[name].status is Status.ERROR
        [error] = results[name].errors
        assert error.startswith("rejected_response: target ") and error.endswith(reason), error
    [error] = results["failing"].errors  # an error status's body: only its start is read
    assert error.startswith("server_error 500: target ") and error.endswith(
        f"HTTP 500: {'a' * 200}"
    )
    # the endless body was cut at the bound (what the sockets buffer aside), not at the timeout
    assert state.streamed < 4 * MAX_TARGET_REPLY_BYTES
