"""A model endpoint that cannot be reached is reported as what it is, with the endpoint:
"cannot connect to <endpoint>: connection refused", not "timeout after 4 attempts: Request
timed out." (the aiohttp transport turns a refused connection into ``ConnectTimeout``). Still
transient: retried within the budget, the case ERROR, a rerun resumes it."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from holodeck_core.calls.errors import CallErrorKind, ModelCallError
from holodeck_core.calls.scheduler import CallScheduler, RetryPolicy
from holodeck_core.cli.main import main
from holodeck_core.models import EvalRun, LLMProvider, Status
from holodeck_core.providers.base import ModelClient
from holodeck_core.providers.factory import make_client
from holodeck_core.providers.messages import Message
from holodeck_core.reports.junit import render_junit
from holodeck_core.reports.markdown import markdown_text, render_markdown
from holodeck_core.testing import run_model_server
from tests.test_reliability import WEATHER_TOOL, agent_yaml


@contextmanager
def raw_server(mode: str) -> Iterator[int]:
    """A TCP port on 127.0.0.1 that misbehaves below HTTP: ``refused`` (nothing listens),
    ``reset`` (accepts, then resets), ``close`` (reads the request, closes without a word)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    if mode == "refused":
        sock.close()
        yield port
        return
    sock.listen(64)
    sock.settimeout(0.05)
    answer = b"hello\r\n\r\n" if mode == "garbage" else b""
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(5)
            if mode == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                conn.recv(65536)
                conn.sendall(answer)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        stop.set()
        thread.join(timeout=5)
        sock.close()


def client_for(provider: str, port: int) -> ModelClient:
    base = f"http://127.0.0.1:{port}" + ("/v1" if provider == "openai" else "")
    return make_client(
        LLMProvider.model_validate(
            {"provider": provider, "name": "m", "endpoint": base, "api_key": "sk-test-1"}
        )
    )


async def one_call(client: ModelClient, text: str = "hi", timeout: float = 5) -> ModelCallError:
    scheduler = CallScheduler(1, RetryPolicy(max_attempts=2, base_delay=0.01, timeout=timeout))
    try:
        await scheduler.call(lambda: client.complete("s", [Message("user", text)]))
    except ModelCallError as error:
        return error
    finally:
        await client.aclose()
    raise AssertionError("the call succeeded")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_refused_connection_is_named_in_the_console_eval_run_junit_and_markdown(
    tmp_path: Path, provider: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with raw_server("refused") as port:
        base = f"http://127.0.0.1:{port}" + ("/v1" if provider == "openai" else "")
        (tmp_path / "tools.py").write_text(WEATHER_TOOL)
        agent = tmp_path / "agent.yaml"
        agent.write_text(agent_yaml(base, provider) + "test_cases:\n  - {name: one, input: hi}\n")
        report = tmp_path / "report.xml"
        code = main(["test", str(agent), "-o", str(report)])
    [path] = tmp_path.glob("results/*/holodeck-pipelines/*.json")
    run = EvalRun.model_validate_json(path.read_text())
    expected = f"cannot connect to http://127.0.0.1:{port}/v1: connection refused"
    [result] = run.report.results
    assert code == 3 and result.status is Status.ERROR  # an execution error, retried:
    assert result.errors == [f"connection_error after 4 attempts: {expected}"]
    console = capsys.readouterr()
    assert f"ERROR one: {result.errors[0]}" in console.out + console.err
    assert expected in report.read_text()  # JUnit, from the CLI
    assert expected in render_junit(run.report)
    assert markdown_text(expected) in render_markdown(run)  # the URL there is inert text


SHAPES: dict[str, tuple[CallErrorKind, tuple[str, ...]]] = {
    "refused": (CallErrorKind.CONNECTION, ("cannot connect to {base}: connection refused",)),
    # the reset races the client's write: it lands while the request is being written or
    # while its answer is awaited, and each is reported as what the client saw
    "reset": (
        CallErrorKind.CONNECTION,
        (
            " {base}: connection reset by the server",
            "{base} closed the connection before the request was sent",
        ),
    ),
    "close": (CallErrorKind.CONNECTION, ("{base} closed the connection without answering",)),
    "garbage": (CallErrorKind.MALFORMED, ("{base} did not answer in HTTP (bad status line)",)),
}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_shape_of_unreachable_endpoint_is_transient_and_says_why(
    shape: str, provider: str
) -> None:
    with raw_server(shape) as port:
        error = asyncio.run(one_call(client_for(provider, port)))
    kind, messages = SHAPES[shape]
    assert error.kind is kind and error.transient and error.attempts == 2
    assert str(error).startswith(f"{kind.value} after 2 attempts: ")
    base = f"http://127.0.0.1:{port}/v1"
    assert any(message.format(base=base) in str(error) for message in messages), str(error)
    assert "timed out" not in str(error).lower()


def test_a_running_server_that_drops_the_connection_is_named_and_a_slow_one_times_out() -> None:
    rules = {
        "faults": {"slow_seconds": 5},
        "rules": [
            {"match": {"user": "down"}, "reply": "x", "fault": {"kind": "drop"}},
            {"match": {"user": "slow"}, "reply": "x", "fault": {"kind": "slow"}},
        ],
    }
    with run_model_server(rules) as server:
        dropped = asyncio.run(one_call(client_for("openai", server.port), "down"))
        slow = asyncio.run(one_call(client_for("openai", server.port), "slow", timeout=0.2))
    assert dropped.kind is CallErrorKind.CONNECTION
    assert f"http://127.0.0.1:{server.port}/v1 closed the connection" in str(dropped)
    assert slow.kind is CallErrorKind.TIMEOUT and "no answer within 0.2 s" in str(slow)
