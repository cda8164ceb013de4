"""The one place that schedules model calls (agent and judge alike).

* a concurrency limit that halves on a 429 and grows back by one after a run of successes;
* ``Retry-After`` honoured for every caller, not just the one that got the 429;
* bounded retries with jittered exponential backoff for 429, 5xx, timeouts, dropped
  connections and malformed bodies; other errors fail at once;
* a hard per-call timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from holodeck_core.calls.classify import classify
from holodeck_core.calls.errors import CallErrorKind, ModelCallError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0
    timeout: float = 60.0


@dataclass
class SchedulerStats:
    calls: int = 0
    attempts: int = 0
    retries: int = 0
    rate_limited: int = 0
    transient_failures: int = 0
    lowest_limit: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


class CallScheduler:
    def __init__(
        self, max_concurrency: int, policy: RetryPolicy | None = None, *, seed: int | None = None
    ) -> None:
        self.max_concurrency = max(1, max_concurrency)
        self.limit = self.max_concurrency
        self.policy = policy or RetryPolicy()
        self.stats = SchedulerStats(lowest_limit=self.limit)
        self._in_flight = 0
        self._successes = 0
        self._paused_until = 0.0
        self._last_cut = 0.0
        self._cond = asyncio.Condition()
        self._random = random.Random(seed)

    async def call(self, fn: Callable[[], Awaitable[T]], *, timeout: float | None = None) -> T:
        """Run ``fn`` under the limit, retrying transient failures. Raises ModelCallError."""
        timeout = timeout or self.policy.timeout
        self.stats.calls += 1
        attempt = 0
        while True:
            attempt += 1
            self.stats.attempts += 1
            started = await self._acquire()
            try:
                result = await asyncio.wait_for(fn(), timeout)
            except Exception as exc:
                error = classify(exc)
                if error.kind is CallErrorKind.TIMEOUT and isinstance(exc, TimeoutError):
                    error = ModelCallError(CallErrorKind.TIMEOUT, f"no answer within {timeout:g} s")
                await self._release(success=False, error=error, started=started)
                kind = error.kind.value
                self.stats.by_kind[kind] = self.stats.by_kind.get(kind, 0) + 1
                if not error.transient or attempt >= self.policy.max_attempts:
                    error.attempts = attempt
                    if error.transient:
                        self.stats.transient_failures += 1
                    raise error from exc
                self.stats.retries += 1
                await asyncio.sleep(self._delay(attempt, error))
                continue
            await self._release(success=True, error=None, started=started)
            return result

    def _delay(self, attempt: int, error: ModelCallError) -> float:
        if error.retry_after is not None:
            return float(error.retry_after) * self._random.uniform(1.0, 1.1)
        backoff = min(self.policy.max_delay, self.policy.base_delay * 2.0 ** (attempt - 1))
        return backoff * self._random.uniform(0.5, 1.5)

    async def _acquire(self) -> float:
        async with self._cond:
            while True:
                wait = self._paused_until - time.monotonic()
                if wait <= 0 and self._in_flight < self.limit:
                    self._in_flight += 1
                    return time.monotonic()
                if wait > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._cond.wait(), wait)
                else:
                    await self._cond.wait()

    async def _release(
        self, *, success: bool, error: ModelCallError | None, started: float
    ) -> None:
        async with self._cond:
            self._in_flight -= 1
            if success:
                self._successes += 1
                if self._successes >= self.limit and self.limit < self.max_concurrency:
                    self.limit += 1
                    self._successes = 0
            elif error is not None and error.kind is CallErrorKind.RATE_LIMIT:
                self.stats.rate_limited += 1
                self._successes = 0
                if started >= self._last_cut:  # one cut per wave of 429s
                    self.limit = max(1, self.limit // 2)
                    self._last_cut = time.monotonic()
                    self.stats.lowest_limit = min(self.stats.lowest_limit, self.limit)
                if error.retry_after:
                    self._paused_until = max(
                        self._paused_until, time.monotonic() + error.retry_after
                    )
            self._cond.notify_all()
