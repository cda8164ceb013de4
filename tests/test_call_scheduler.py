"""The one call layer (docs/architecture.md): adaptive limits per provider endpoint, Retry-After
pauses shared by every caller and capped, per-call retry budgets. Through the loopback
server and the real ``openai`` SDK (docs/architecture.md; docs/agent-yaml.md;
docs/holodeck-fidelity.md)."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import openai
import pytest

from holodeck_core.calls.classify import classify
from holodeck_core.calls.errors import CallErrorKind, ModelCallError
from holodeck_core.calls.scheduler import (
    MAX_RETRY_AFTER,
    CallScheduler,
    RetryPolicy,
    endpoint_key,
)
from holodeck_core.defaults import PARALLEL_TEST_CASES
from holodeck_core.models import EvalRun, LLMProvider, ProviderEnum, Status
from holodeck_core.providers.factory import make_client
from holodeck_core.providers.messages import Message
from holodeck_core.testing import ModelServer, run_model_server
from tests.test_reliability import run_suite

FAST = RetryPolicy(max_attempts=6, base_delay=0.01, timeout=5)


def model_of(server: ModelServer) -> LLMProvider:
    return LLMProvider(
        provider=ProviderEnum.OPENAI, name="m", endpoint=server.openai_base_url, api_key="sk-x"
    )


@dataclass
class Timeline:
    """What the client saw: when each attempt started, how many were in flight then, and
    when each 429 came back."""

    in_flight: int = 0
    starts: list[tuple[float, int]] = field(default_factory=list)
    rate_limited: list[float] = field(default_factory=list)


async def ask(
    scheduler: CallScheduler, model: LLMProvider, texts: list[str], seen: Timeline | None = None
) -> Timeline:
    """Each text is a concurrent case asking the model once; ``seen`` lets a caller watch the
    timeline while the cases run."""
    client = make_client(model)
    seen = seen or Timeline()

    async def attempt(text: str) -> str:
        seen.in_flight += 1
        seen.starts.append((time.monotonic(), seen.in_flight))
        try:
            return (await client.complete("", [Message(role="user", text=text)])).text
        except Exception as exc:
            if classify(exc).kind is CallErrorKind.RATE_LIMIT:
                seen.rate_limited.append(time.monotonic())
            raise
        finally:
            seen.in_flight -= 1

    async def case(text: str) -> str:
        return await scheduler.call(lambda: attempt(text), endpoint=endpoint_key(model))

    try:
        assert await asyncio.gather(*map(case, texts)) == ["ok"] * len(texts)
    finally:
        await client.aclose()
    return seen


def test_peak_concurrency_falls_after_a_429_wave_recovers_and_pauses_for_retry_after() -> None:
    rules = {
        "default": {"reply": "ok"},
        "rules": [
            {"match": {"user": "^wave"}, "reply": "ok", "fault": {"kind": "429", "first": 1}},
        ],
        "faults": {"retry_after": 1.0},
    }
    texts = [f"wave {i}" for i in range(16)] + [f"after {i}" for i in range(150)]
    with run_model_server(rules, latency=0.02) as server:
        scheduler = CallScheduler(16, FAST)
        seen = asyncio.run(ask(scheduler, model_of(server), texts))
        stats = server.stats()
    assert stats["faults"] == {"429": 16} and stats["total_calls"] == 182
    first_429 = min(seen.rate_limited)
    before = [n for t, n in seen.starts if t < first_429]
    after = [(t, n) for t, n in seen.starts if t > first_429]
    assert max(before) == 16  # the start limit was used
    # no call starts while the Retry-After pause lasts (a little slack for the 429 in flight)
    assert not [t for t, _ in after if first_429 + 0.1 < t < first_429 + 0.9]
    resumed = [n for t, n in after if t >= first_429 + 0.9]
    assert max(resumed[:16]) <= 8  # halved once for the whole wave (16 would start at once)
    assert max(resumed[-20:]) > 8  # and growing back with successes
    assert scheduler.stats.lowest_limit == 8 and scheduler.limit(endpoint_key(model_of(server))) > 8


def test_limits_and_pauses_are_per_endpoint() -> None:
    """An agent on one provider endpoint and its judge on another share no limit, no pause."""
    limited = {"default": {"reply": "ok", "fault": {"kind": "429", "first": 1}}}
    limited |= {"faults": {"retry_after": 3.0}}
    with run_model_server(limited) as a, run_model_server({"default": "ok"}) as b:
        scheduler = CallScheduler(4, FAST)
        model_a, model_b = model_of(a), model_of(b)
        assert endpoint_key(model_a) != endpoint_key(model_b)

        async def both() -> tuple[Timeline, Timeline]:
            timeline_a = Timeline()
            seen_a = asyncio.create_task(ask(scheduler, model_a, ["x"], timeline_a))
            while not timeline_a.rate_limited:  # until A is paused for its Retry-After
                await asyncio.sleep(0.01)
            seen_b = await ask(scheduler, model_b, [f"y{i}" for i in range(8)])
            return await seen_a, seen_b

        seen_a, seen_b = asyncio.run(both())
    (first_429,) = seen_a.rate_limited
    retried_at = max(t for t, _ in seen_a.starts)
    assert all(first_429 < t < retried_at for t, _ in seen_b.starts)  # B ran during A's pause
    assert max(n for _, n in seen_b.starts) == 4  # at B's full limit
    assert scheduler.limit(endpoint_key(model_a)) == 2
    assert scheduler.limit(endpoint_key(model_b)) == 4


def rate_limit_error(retry_after: str) -> openai.RateLimitError:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx.Response(429, headers={"retry-after": retry_after}, request=request)
    return openai.RateLimitError("Rate limit reached", response=response, body=None)


def attempts_until_done(retry_after: str, policy: RetryPolicy, failures: int) -> int:
    """Attempts a call makes when its first ``failures`` attempts get a 429 with this header;
    raises the ModelCallError it ends with."""
    made = 0

    async def fn() -> str:
        nonlocal made
        made += 1
        if made <= failures:
            raise rate_limit_error(retry_after)
        return "ok"

    done = asyncio.run(CallScheduler(2, policy).run(fn))
    assert done.value == "ok" and done.attempts == made
    return made


@pytest.mark.parametrize(
    "header",
    ["100000", "inf", "1e308", "1e400", "Fri, 31 Dec 9999 23:59:59 GMT", "999999999999"],
)
def test_a_retry_after_longer_than_the_budget_is_a_transient_error_at_once(header: str) -> None:
    with pytest.raises(ModelCallError) as caught:
        attempts_until_done(header, FAST, failures=10)
    error = caught.value
    assert error.kind is CallErrorKind.RATE_LIMIT and error.transient and error.attempts == 1
    assert "retry budget" in str(error) and "a rerun resumes the case" in str(error)


@pytest.mark.parametrize(
    "header", ["-5", "-inf", "0", "nan", "soon", "Wed, 21 Oct 2015 07:28:00 GMT"]
)
def test_negative_past_or_garbage_retry_after_falls_back_to_back_off(header: str) -> None:
    assert attempts_until_done(header, FAST, failures=3) == 4


def test_a_capped_retry_after_is_counted_against_the_calls_budget() -> None:
    """Each wait is capped at ``max_retry_after`` and adds up against ``max_wait``: with a
    0.05 s cap, a 0.1 s Retry-After and 0.12 s of budget, the second 429 ends the call."""
    policy = RetryPolicy(max_attempts=10, timeout=5, max_wait=0.12, max_retry_after=0.05)
    with pytest.raises(ModelCallError) as caught:
        attempts_until_done("0.1", policy, failures=10)
    assert caught.value.attempts == 2 and caught.value.transient
    # within the budget, a long ask is waited only as long as the cap
    roomy = RetryPolicy(max_attempts=4, timeout=5, max_wait=1000, max_retry_after=0.01)
    assert attempts_until_done("500", roomy, failures=3) == 4
    assert MAX_RETRY_AFTER == 60.0 == RetryPolicy().max_retry_after


@pytest.mark.parametrize("retry_after", [100000, math.inf, 1e308])
def test_a_provider_asking_to_wait_forever_ends_the_run_with_transient_errors(
    tmp_path: Path, retry_after: float
) -> None:
    """`holodeck test` against a provider whose every 429 asks for a day (or forever): each
    case is a transient ERROR after one request, the EvalRun is written, exit 3."""
    rules = {"default": {"reply": "Paris", "fault": {"kind": "429"}}}
    rules |= {"faults": {"retry_after": retry_after}}
    cases = "  - {name: one, input: a}\n  - {name: two, input: b}\n"
    with run_model_server(rules) as server:
        code, run, _ = run_suite(tmp_path, server.openai_base_url, cases)
        calls = server.stats()["total_calls"]
    assert code == 3 and calls == 2
    for result in run.report.results:
        assert result.status is Status.ERROR and result.error_source == "execution"
        assert "retry budget" in result.errors[0]
    assert isinstance(run, EvalRun)


def test_the_default_start_runs_many_cases_at_once(tmp_path: Path) -> None:
    """Without --parallel, the suite starts at PARALLEL_TEST_CASES calls in flight."""
    cases = "".join(f"  - {{name: c{i}, input: q{i}}}\n" for i in range(PARALLEL_TEST_CASES + 8))
    with run_model_server({"default": "Paris"}, latency=0.3) as server:
        code, run, _ = run_suite(tmp_path, server.openai_base_url, cases)
        peak = server.stats()["peak_concurrency"]
    assert code == 0 and PARALLEL_TEST_CASES >= 32 and peak == PARALLEL_TEST_CASES
    assert run.report.environment["parallel"] == PARALLEL_TEST_CASES


def test_a_cancellation_as_the_call_completes_stops_the_caller() -> None:
    """Ctrl-C that lands in the loop iteration where the answer arrives must still stop the
    run (``asyncio.wait_for`` on Python 3.11 returned the answer and dropped it)."""

    async def scenario() -> str:
        scheduler = CallScheduler(policy=FAST)
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        async def call() -> str:
            return await answer

        caller = asyncio.ensure_future(scheduler.call(call))
        await asyncio.sleep(0.01)  # the call is in flight
        answer.set_result("done")
        caller.cancel()  # in the same iteration as the answer
        try:
            await caller
        except asyncio.CancelledError:
            return "cancelled"
        return "the cancellation was lost"

    assert asyncio.run(scenario()) == "cancelled"
