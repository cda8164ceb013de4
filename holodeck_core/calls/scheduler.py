"""The one place that schedules model calls (docs/architecture.md): agent turns, judges, and
whatever else asks a model (embeddings, prompt tools, rerankers).

* **Limits per provider endpoint** (:func:`endpoint_key`): an agent on one provider and its
  judge on another never share a limit, a pause or a 429 wave.
* **Adaptive concurrency**: each endpoint's limit starts at ``max_concurrency`` (default
  :data:`PARALLEL_TEST_CASES`), halves on a wave of 429s and grows back by one after a run of
  successes as long as the limit itself.
* **Retry-After** is honoured for every caller of the endpoint, not just the one that got the
  429: no call starts on that endpoint before the pause is over. One pause lasts at most
  :data:`MAX_RETRY_AFTER` seconds, whatever the provider asks.
* **One retry loop with a per-call budget** (:class:`RetryPolicy`, or ``attempts=`` per call):
  429, 5xx, timeouts, dropped connections and malformed bodies are retried with jittered
  exponential back-off; other errors fail at once. Every wait between attempts (back-off and
  Retry-After) counts against the call's ``max_wait``; a provider that asks for more than what
  is left fails the call at once, as a transient :class:`~holodeck_core.calls.errors.ModelCallError`
  (the case is ERROR and a rerun resumes it).
* A hard per-attempt timeout.
* **Costs and budgets**: a call that carries a :class:`~holodeck_core.calls.ledger.Charge`
  reserves its worst case in the scheduler's :class:`~holodeck_core.calls.ledger.Ledger`
  before it is sent (or is refused, a ``budget`` error, when that would pass the budget) and
  books its actual usage after.

* **Batches** (``execution.batch``): a call marked ``batchable`` (agent turns, judges) goes
  into the run's next batch (:mod:`holodeck_core.calls.batch`) instead of an endpoint slot,
  still held and settled by the ledger (at the batch price); one no batch answers is sent as
  an ordinary call.

Using it from a new kind of model call (a small API on purpose)::

    scheduler = CallScheduler()                       # one per suite run, shared by everything
    reply = await scheduler.call(lambda: client.embed(texts), endpoint=endpoint_key(model))
    outcome = await scheduler.run(fn, endpoint=..., attempts=2)  # value and attempts made

``fn`` makes one attempt and must not retry; it may raise any SDK exception (it is classified
by :func:`~holodeck_core.calls.classify.classify`) or a ``ModelCallError``. Nothing else in
the code base retries model calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from holodeck_core.calls.batch import Batches, SendAlone, batching, not_batching
from holodeck_core.calls.classify import classify
from holodeck_core.calls.errors import CallErrorKind, ModelCallError
from holodeck_core.calls.ledger import Charge, Ledger
from holodeck_core.defaults import CALL_ENDPOINT, PARALLEL_TEST_CASES
from holodeck_core.models import LLMProvider

T = TypeVar("T")

MAX_RETRY_AFTER = 60.0
"""The longest one ``Retry-After`` pause may last (seconds), whatever the provider asks."""


def endpoint_key(model: LLMProvider) -> str:
    """The key a model's calls share a limit under: provider and endpoint (``default`` for a
    provider's own public endpoint)."""
    return f"{model.provider.value}:{(model.endpoint or 'default').rstrip('/')}"


@dataclass(frozen=True)
class RetryPolicy:
    """The retry budget of every call (a call may ask for fewer ``attempts``)."""

    max_attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0
    timeout: float = 60.0
    """Seconds one attempt may take."""
    max_wait: float = 120.0
    """Seconds a call may wait in all between its attempts (back-off and Retry-After)."""
    max_retry_after: float = MAX_RETRY_AFTER


@dataclass
class SchedulerStats:
    calls: int = 0
    answered: int = 0
    """Calls that got a reply (``calls`` counts those that failed too)."""
    attempts: int = 0
    retries: int = 0
    rate_limited: int = 0
    transient_failures: int = 0
    lowest_limit: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Called(Generic[T]):
    """A call's value and how many attempts it took."""

    value: T
    attempts: int


class _Lane:
    """One endpoint's limit, in-flight count and Retry-After pause (touched on one loop)."""

    def __init__(self, limit: int) -> None:
        self.ceiling = limit
        self.limit = limit
        self.in_flight = 0
        self.successes = 0
        self.paused_until = 0.0
        self.last_cut = 0.0
        self._waiters: list[asyncio.Future[None]] = []

    async def acquire(self) -> float:
        """Wait for a free slot outside any pause; returns when the attempt starts."""
        while True:
            wait = self.paused_until - time.monotonic()
            if wait <= 0 and self.in_flight < self.limit:
                self.in_flight += 1
                return time.monotonic()
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait if wait > 0 else None):
                    await waiter

    def wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


class EndpointLimits:
    """Endpoint lanes (limit, in-flight calls, Retry-After pause) that several schedulers of
    one process share: ``holodeck matrix``'s cells, each with its own ledger and batches, meet
    one limit per endpoint (docs/cli.md). A lane's ceiling is the first scheduler's."""

    def __init__(self) -> None:
        self.lanes: dict[str, _Lane] = {}


class CallScheduler:
    def __init__(
        self,
        max_concurrency: int = PARALLEL_TEST_CASES,
        policy: RetryPolicy | None = None,
        *,
        seed: int | None = None,
        ledger: Ledger | None = None,
        batches: Batches | None = None,
        limits: EndpointLimits | None = None,
    ) -> None:
        self.max_concurrency = max(1, max_concurrency)
        self.ledger = ledger
        self.batches = batches
        """Where ``batchable`` calls go (``execution.batch``, :mod:`holodeck_core.calls.batch`)."""
        self.policy = policy or RetryPolicy()
        self.stats = SchedulerStats(lowest_limit=self.max_concurrency)
        self._lanes = (limits or EndpointLimits()).lanes
        """Per endpoint; shared with the other schedulers given the same ``limits``."""
        self._random = random.Random(seed)

    def limit(self, endpoint: str = CALL_ENDPOINT) -> int:
        """The endpoint's current concurrency limit."""
        return self._lane(endpoint).limit

    def set_limit(self, endpoint: str, limit: int) -> None:
        """Give ``endpoint`` its own ceiling instead of ``max_concurrency`` (a target's
        ``limit``); it still halves on 429s and grows back up to it."""
        lane = self._lane(endpoint)
        lane.ceiling = lane.limit = max(1, limit)

    def _lane(self, endpoint: str) -> _Lane:
        lane = self._lanes.get(endpoint)
        if lane is None:
            lane = self._lanes[endpoint] = _Lane(self.max_concurrency)
        return lane

    async def call(
        self,
        fn: Callable[[], Awaitable[T]],
        *,
        endpoint: str = CALL_ENDPOINT,
        timeout: float | None = None,
        attempts: int | None = None,
        charge: Charge | None = None,
        batchable: bool = False,
    ) -> T:
        """Run ``fn`` under the endpoint's limit, retrying transient failures within the
        call's budget. Raises :class:`ModelCallError` (``attempts`` set). ``batchable``: ``fn``
        is one request of a backend that can batch (an agent turn, a judge): with
        :attr:`batches` it goes into the next batch instead."""
        called = await self.run(
            fn,
            endpoint=endpoint,
            timeout=timeout,
            attempts=attempts,
            charge=charge,
            batchable=batchable,
        )
        return called.value

    async def run(
        self,
        fn: Callable[[], Awaitable[T]],
        *,
        endpoint: str = CALL_ENDPOINT,
        timeout: float | None = None,
        attempts: int | None = None,
        charge: Charge | None = None,
        batchable: bool = False,
    ) -> Called[T]:
        """:meth:`call`, also telling how many attempts it took."""
        batched = [batchable and self.batches is not None]
        if charge is None or self.ledger is None:
            return await self._sent(fn, endpoint, timeout, attempts, batched)
        hold = await self.ledger.hold(charge)  # raises BudgetStop: the call is not sent
        usage, understated = None, False
        try:
            called = await self._sent(fn, endpoint, timeout, attempts, batched)
            usage, understated = charge.billed(called.value)
            return called
        finally:
            self.ledger.settle(hold, charge, usage, understated, batch=batched[0])

    async def _sent(
        self,
        fn: Callable[[], Awaitable[T]],
        endpoint: str,
        timeout: float | None,
        attempts: int | None,
        batched: list[bool],
    ) -> Called[T]:
        """``fn`` in the next batch when ``batched[0]`` (no endpoint slot, no per-attempt
        timeout: the batch's wait is bounded by its own limit), else ordinary attempts; a
        request no batch answered is sent alone, and ``batched[0]`` says which it was."""
        if batched[0] and self.batches is not None:
            try:
                with batching(self.batches):
                    value = await fn()
            except SendAlone:
                batched[0] = False
            else:
                self.stats.calls += 1
                self.stats.attempts += 1
                self.stats.answered += 1
                return Called(value, 1)
        with not_batching():
            return await self._attempts(fn, endpoint, timeout, attempts)

    async def _attempts(
        self,
        fn: Callable[[], Awaitable[T]],
        endpoint: str,
        timeout: float | None,
        attempts: int | None,
    ) -> Called[T]:
        timeout = timeout or self.policy.timeout
        budget = self.policy.max_attempts if attempts is None else max(1, attempts)
        lane = self._lane(endpoint)
        self.stats.calls += 1
        waited = 0.0
        attempt = 0
        while True:
            attempt += 1
            self.stats.attempts += 1
            started = await lane.acquire()
            try:
                # not asyncio.wait_for: on Python 3.11 it drops a cancellation (Ctrl-C) that
                # arrives as the call completes, and the run would go on
                async with asyncio.timeout(timeout):
                    result = await fn()
            except Exception as exc:
                error = classify(exc)
                if error.kind is CallErrorKind.TIMEOUT and isinstance(exc, TimeoutError):
                    error = ModelCallError(CallErrorKind.TIMEOUT, f"no answer within {timeout:g} s")
                delay, final = self._next(attempt, budget, waited, error)
                self._release(lane, error, started)
                kind = error.kind.value
                self.stats.by_kind[kind] = self.stats.by_kind.get(kind, 0) + 1
                if final is not None:
                    final.attempts = attempt
                    if final.transient:
                        self.stats.transient_failures += 1
                    raise final from exc
                self.stats.retries += 1
                waited += delay
                await asyncio.sleep(delay)
                continue
            except BaseException:  # cancelled: give the slot back
                lane.in_flight -= 1
                lane.wake()
                raise
            self._release(lane, None, started)
            self.stats.answered += 1
            return Called(result, attempt)

    def _next(
        self, attempt: int, budget: int, waited: float, error: ModelCallError
    ) -> tuple[float, ModelCallError | None]:
        """(how long to wait before the next attempt, or the error to raise now)."""
        if not error.transient or attempt >= budget:
            return 0.0, error
        left = self.policy.max_wait - waited
        asked = error.retry_after
        if asked is not None:
            if asked > left:
                return 0.0, _gave_up(error, f"the provider asked to wait {_seconds(asked)}", left)
            delay = min(asked * self._random.uniform(1.0, 1.1), self.policy.max_retry_after)
        else:
            backoff = min(self.policy.max_delay, self.policy.base_delay * 2.0 ** (attempt - 1))
            delay = backoff * self._random.uniform(0.5, 1.5)
        if delay > left:
            return 0.0, _gave_up(error, f"the next back-off is {_seconds(delay)}", left)
        return delay, None

    def _release(self, lane: _Lane, error: ModelCallError | None, started: float) -> None:
        lane.in_flight -= 1
        if error is None:
            lane.successes += 1
            if lane.successes >= lane.limit and lane.limit < lane.ceiling:
                lane.limit += 1
                lane.successes = 0
        elif error.kind is CallErrorKind.RATE_LIMIT:
            self.stats.rate_limited += 1
            lane.successes = 0
            if started >= lane.last_cut:  # one cut per wave of 429s
                lane.limit = max(1, lane.limit // 2)
                lane.last_cut = time.monotonic()
                self.stats.lowest_limit = min(self.stats.lowest_limit, lane.limit)
            asked = error.retry_after
            if asked and asked <= self.policy.max_wait:  # else every call gives up at once
                wait = min(asked, self.policy.max_retry_after)
                lane.paused_until = max(lane.paused_until, time.monotonic() + wait)
        lane.wake()


def _seconds(value: float) -> str:
    return "forever" if math.isinf(value) else f"{value:.3g} s"


def _gave_up(error: ModelCallError, why: str, left: float) -> ModelCallError:
    """The error a call ends with when its wait budget is spent; still transient."""
    return ModelCallError(
        error.kind,
        f"{error.args[0] if error.args else ''} ({why}, more than the {max(left, 0.0):.3g} s "
        "left of this call's retry budget; a rerun resumes the case)",
        status=error.status,
        retry_after=error.retry_after,
    )
