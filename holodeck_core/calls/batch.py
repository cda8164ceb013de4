"""Model calls through the providers' batch APIs (``execution.batch``, docs/cost.md): the one
place that gathers a round of requests, submits it, waits and hands every caller its answer.

A round (:class:`BatchRounds`) is every request that arrives on one batch API (one provider
endpoint and URL, and one credential) while the previous ones are still arriving: all cases of
all cells of the run at the same step of the tool loop, and the judges of the cases that
finished together. It is submitted as one batch once no new request joined it for
:data:`~holodeck_core.defaults.BATCH_GATHER_S`. Each caller then gets its response body parsed
by its own backend, as if the ordinary call had returned it; a multi-turn case or a tool call
simply asks again in a later round. Each suite (a cell) asks through its own :class:`Batches`:
its log, its custom_ids, its stats.

Never paying twice: every request's ``custom_id`` is a digest of its suite's journal key, its
endpoint, body and how many identical requests came before it in this suite, and a batch's id
and each suite's ``custom_id``s are written to that suite's :class:`BatchLog` (its resume
journal's, docs/architecture.md) before the run waits on it. A rerun of a killed run asks the
same requests, finds them in its log and takes their answers from the batch already paid for.
A request a batch failed or expired is sent in a next batch, at most
:data:`~holodeck_core.defaults.BATCH_RESUBMITS` more times, then as an ordinary call
(:class:`SendAlone`), as is all that is pending when the run's wait limit is reached. Closing
the :class:`BatchRounds` (Ctrl-C included) cancels what is still running.

The provider's side (files, batches, result lines) is a :class:`BatchAPI`, implemented in
``holodeck_core/providers/batches.py``."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from holodeck_core.calls.classify import classify
from holodeck_core.calls.errors import CallErrorKind, ModelCallError
from holodeck_core.defaults import (
    BATCH_CANCEL_S,
    BATCH_GATHER_MAX_S,
    BATCH_GATHER_S,
    BATCH_MAX_REQUESTS,
    BATCH_MAX_WAIT_S,
    BATCH_POLL_FIRST_S,
    BATCH_POLL_MAX_S,
    BATCH_PROGRESS_EVERY_S,
    BATCH_RESUBMITS,
)

_T = TypeVar("_T")
DONE_STATES = frozenset({"completed", "ended", "failed", "expired", "cancelled", "canceled"})
"""Batch statuses after which nothing more will be answered (OpenAI's and Anthropic's)."""


class BatchGone(Exception):
    """The provider refuses to say more of a batch (it does not know it): none of its
    requests will be answered."""


class SendAlone(Exception):
    """The request gets no answer from a batch (its resubmits or the run's wait are spent):
    the scheduler sends it as an ordinary call."""


@dataclass(frozen=True)
class BatchItem:
    """One request's outcome in a finished batch: its response body, or why there is none."""

    body: Any = None
    """The SDK's response object (what the ordinary call returns), None without one."""
    error: ModelCallError | None = None


class BatchAPI(Protocol):
    """One provider's batch API for one request URL (``holodeck_core/providers/batches.py``)."""

    key: str
    """Which requests share a batch: provider endpoint and URL."""
    credential: str
    """A fingerprint of the credential it submits with (never the secret): requests sent with
    another key never share its batch."""

    async def submit(self, requests: list[tuple[str, dict[str, Any]]]) -> str:
        """Create a batch of (custom_id, body) and return its id."""
        ...

    async def status(self, batch_id: str) -> str:
        """The batch's status (done once in :data:`DONE_STATES`)."""
        ...

    async def results(self, batch_id: str) -> dict[str, BatchItem]:
        """What the finished batch answered, by custom_id (missing: not answered)."""
        ...

    async def cancel(self, batch_id: str) -> None: ...


class BatchLog(Protocol):
    """Where submitted batches are written before the run waits on them."""

    @property
    def scope(self) -> str:
        """Whose requests it logs (the suite's journal key): part of every custom_id."""
        ...

    def submitted(self) -> list[dict[str, Any]]:
        """Every batch written so far: ``{"batch_id", "key", "custom_ids"}``."""
        ...

    def record(self, entry: dict[str, Any]) -> None: ...


@dataclass
class BatchStats:
    submitted: int = 0
    done: int = 0
    requests: int = 0
    resumed: int = 0
    """Requests answered by a batch an earlier (killed) run submitted."""
    sent_alone: int = 0
    longest_wait_s: float = 0.0


@dataclass(eq=False)
class _Pending:
    custom_id: str
    body: dict[str, Any]
    future: asyncio.Future[Any]
    suite: Batches
    sends: int = 0


@dataclass
class _Round:
    api: BatchAPI
    requests: list[_Pending] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None
    opened: float = field(default_factory=time.monotonic)


_ACTIVE: ContextVar[Batches | None] = ContextVar("holodeck_batches", default=None)


@contextlib.contextmanager
def batching(batches: Batches) -> Iterator[None]:
    """Model calls made inside go through ``batches`` where their backend can batch."""
    token = _ACTIVE.set(batches)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


@contextlib.contextmanager
def not_batching() -> Iterator[None]:
    """Model calls made inside are ordinary calls (a request :class:`SendAlone` sends)."""
    token = _ACTIVE.set(None)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active_batches() -> Batches | None:
    """The :class:`Batches` a backend should send its request through, if any."""
    return _ACTIVE.get()


def round_key(api: BatchAPI) -> str:
    """Which requests may share a batch: the same batch API (endpoint and URL) and the same
    credential (its fingerprint, never the key itself)."""
    return f"{api.key} {api.credential}" if api.credential else api.key


class BatchRounds:
    """The rounds of one run, whichever suites ask: every request to one batch API (and
    credential) that arrives together goes in one batch, its wait polled once, the run's wait
    limit over all of them, the progress lines, and Ctrl-C's cancel. Each suite asks through its
    own :class:`Batches` (its log, its custom_ids, its stats): ``holodeck matrix``'s cells and
    a Dagster run's cells share one (docs/cost.md)."""

    def __init__(
        self,
        *,
        max_wait: float = BATCH_MAX_WAIT_S,
        gather: float = BATCH_GATHER_S,
        on_progress: Callable[[str], None] | None = None,
    ) -> None:
        self.max_wait = max_wait
        self.gather = gather
        self.on_progress = on_progress
        self.stats = BatchStats()
        self._rounds: dict[str, _Round] = {}
        self._waits: dict[str, asyncio.Task[tuple[dict[str, BatchItem], float]]] = {}
        self._running: dict[str, tuple[BatchAPI, float]] = {}
        self._members: dict[str, set[Batches]] = {}
        """Per batch id, the suites whose requests it holds (their stats count its wait)."""
        self._started = time.monotonic()
        self._last_line = 0.0
        self._tasks: set[asyncio.Task[None]] = set()
        self._refused: dict[str, str] = {}
        """Batch APIs that failed to take a batch, and how: their calls go alone."""

    def unusable(self, api: BatchAPI) -> str | None:
        """Why ``api``'s requests go alone now (it refused a batch, the wait is spent)."""
        if round_key(api) in self._refused:
            return self._refused[round_key(api)]
        if self.time_left() <= 0:
            return f"the run's {self.max_wait:g} s of waiting on batches are spent"
        return None

    def enqueue(self, api: BatchAPI, pending: _Pending) -> None:
        key = round_key(api)
        round_ = self._rounds.get(key)
        if round_ is None:
            round_ = self._rounds[key] = _Round(api)
        round_.requests.append(pending)
        if round_.timer is not None:
            round_.timer.cancel()
        loop = asyncio.get_running_loop()
        full = len(round_.requests) >= BATCH_MAX_REQUESTS
        if full or time.monotonic() - round_.opened >= BATCH_GATHER_MAX_S:
            self._send(key)
        else:
            round_.timer = loop.call_later(self.gather, self._send, key)

    def _send(self, key: str) -> None:
        round_ = self._rounds.pop(key, None)
        if round_ is None:
            return
        if round_.timer is not None:
            round_.timer.cancel()
        requests = [p for p in round_.requests if not p.future.done()]  # a cell that stopped
        if not requests:
            return
        task = asyncio.get_running_loop().create_task(self._run(round_.api, requests))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, api: BatchAPI, requests: list[_Pending]) -> None:
        """Submit one round, journal it, wait, and answer (or requeue) every request."""
        try:
            batch_id = await self._submit(api, requests)
            items = await self.wait_for(api, batch_id) if batch_id is not None else {}
        except asyncio.CancelledError:
            for pending in requests:
                if not pending.future.done():
                    pending.future.cancel()
            raise
        for pending in requests:
            self._answer(api, pending, items.get(pending.custom_id))

    async def _submit(self, api: BatchAPI, requests: list[_Pending]) -> str | None:
        """The new batch's id, journaled in each of its suites' logs; None when the batch API
        refused it (then this round and every later one of ``api`` go as ordinary calls)."""
        for pending in requests:
            pending.sends += 1
        try:
            batch_id = await api.submit([(p.custom_id, p.body) for p in requests])
        except Exception as exc:
            why = f"the batch API of {api.key} failed ({type(exc).__name__}: {exc})"
            if round_key(api) not in self._refused:
                self._say(f"{why}; its calls are sent one by one", force=True)
            self._refused[round_key(api)] = why
            for pending in requests:
                pending.sends = BATCH_RESUBMITS + 1
            return None
        by_suite: dict[Batches, list[str]] = {}
        for pending in requests:
            by_suite.setdefault(pending.suite, []).append(pending.custom_id)
        for suite, custom_ids in by_suite.items():
            suite.submitted(batch_id, api.key, custom_ids)
        self._members.setdefault(batch_id, set()).update(by_suite)
        self.stats.submitted += 1
        self.stats.requests += len(requests)
        self._say(f"batch {batch_id}: {_requests(len(requests))} submitted", force=True)
        return batch_id

    def _answer(self, api: BatchAPI, pending: _Pending, item: BatchItem | None) -> None:
        if pending.future.done():
            return
        if item is not None and item.body is not None:
            pending.future.set_result(item.body)
        elif item is not None and item.error is not None and not item.error.transient:
            pending.future.set_exception(item.error)
        elif pending.sends <= BATCH_RESUBMITS and self.time_left() > 0:
            self.enqueue(api, pending)  # failed or expired: the next batch
        else:
            pending.suite.stats.sent_alone += 1
            why = item.error if item is not None and item.error is not None else "no answer"
            pending.future.set_exception(SendAlone(f"{why} in {pending.sends} batches"))

    async def wait_for(
        self, api: BatchAPI, batch_id: str, suite: Batches | None = None
    ) -> dict[str, BatchItem]:
        """The results of ``batch_id``, polled once however many callers (and suites: the
        ``suite`` that resumes it) wait on it."""
        if suite is not None:
            self._members.setdefault(batch_id, set()).add(suite)
        task = self._waits.get(batch_id)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._poll(api, batch_id))
            self._waits[batch_id] = task
        items, _ = await asyncio.shield(task)
        return items

    async def _poll(self, api: BatchAPI, batch_id: str) -> tuple[dict[str, BatchItem], float]:
        started = time.monotonic()
        self._running[batch_id] = (api, started)
        try:
            pause, cancelled = BATCH_POLL_FIRST_S, False
            status = await _asked(api.status(batch_id), "")
            while status not in DONE_STATES:
                left = self.time_left()
                if cancelled and -left > BATCH_POLL_MAX_S:  # it never said it stopped
                    return self._finished(batch_id, started, status, {})
                if left <= 0 and not cancelled:
                    cancelled = True  # a cancelled batch still answers what it did
                    await _asked(api.cancel(batch_id), None)
                    self._say(
                        f"batch {batch_id}: the wait limit was reached, cancelled", force=True
                    )
                await asyncio.sleep(min(pause, max(left, BATCH_POLL_FIRST_S)))
                pause = min(pause * 1.5, BATCH_POLL_MAX_S)
                self._say(self._waiting_line())
                status = await _asked(api.status(batch_id), status)
            items = await _asked(api.results(batch_id), {})
        except BatchGone as exc:
            self._say(f"batch {batch_id}: {exc}; its requests are sent again", force=True)
            status, items = "gone", {}
        finally:
            self._running.pop(batch_id, None)
        return self._finished(batch_id, started, status, items)

    def _finished(
        self, batch_id: str, started: float, status: str, items: dict[str, BatchItem]
    ) -> tuple[dict[str, BatchItem], float]:
        waited = time.monotonic() - started
        for stats in [self.stats, *(suite.stats for suite in self._members.get(batch_id, ()))]:
            stats.done += 1
            stats.longest_wait_s = max(stats.longest_wait_s, waited)
        answered = sum(1 for item in items.values() if item.body is not None)
        self._say(
            f"batch {batch_id}: {status} after {waited:.1f} s, {answered} of its requests answered",
            force=True,
        )
        return items, waited

    def time_left(self) -> float:
        return self.max_wait - (time.monotonic() - self._started)

    def _waiting_line(self) -> str:
        longest = max((time.monotonic() - t for _, t in self._running.values()), default=0.0)
        return (
            f"batches: {self.stats.submitted} submitted, {self.stats.done} done, "
            f"{len(self._running)} waiting (the longest for {longest:.0f} s)"
        )

    def _say(self, line: str, force: bool = False) -> None:
        now = time.monotonic()
        if self.on_progress is None or (
            not force and now - self._last_line < BATCH_PROGRESS_EVERY_S
        ):
            return
        self._last_line = now
        self.on_progress(line)

    def drop(self, suite: Batches) -> None:
        """``suite`` stopped: its requests not yet sent are cancelled (the others' stay)."""
        for round_ in self._rounds.values():
            for pending in round_.requests:
                if pending.suite is suite:
                    pending.future.cancel()

    async def aclose(self) -> None:
        """Cancel every batch still running (the run stops: Ctrl-C, an error) and the
        rounds not yet sent."""
        for round_ in self._rounds.values():
            if round_.timer is not None:
                round_.timer.cancel()
            for pending in round_.requests:
                pending.future.cancel()
        self._rounds.clear()
        running = list(self._running.items())
        for batch_id, (_, started) in running:  # the waits Ctrl-C cut short count too
            waited = time.monotonic() - started
            for suite in self._members.get(batch_id, ()):
                suite.stats.longest_wait_s = max(suite.stats.longest_wait_s, waited)
        for task in [*self._tasks, *self._waits.values()]:
            task.cancel()
        for batch_id, (api, _) in running:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(BATCH_CANCEL_S):
                    await api.cancel(batch_id)
                self._say(f"batch {batch_id}: cancelled", force=True)


class Batches:
    """One suite's batches: its requests' custom_ids (scoped by its journal, so a cell's ids
    are its own yet the same on a rerun), its :class:`BatchLog`, its stats; the rounds
    (:class:`BatchRounds`) are the run's, shared with the other suites given the same
    ``rounds``, or its own."""

    def __init__(
        self,
        log: Callable[[], BatchLog | None] = lambda: None,
        *,
        rounds: BatchRounds | None = None,
        max_wait: float = BATCH_MAX_WAIT_S,
        gather: float = BATCH_GATHER_S,
        on_progress: Callable[[str], None] | None = None,
    ) -> None:
        self._own = rounds is None
        self.rounds = rounds or BatchRounds(
            max_wait=max_wait, gather=gather, on_progress=on_progress
        )
        self._log_factory = log
        self._log: BatchLog | None = None
        self._scope = ""
        self._known: dict[str, tuple[str, str]] | None = None  # custom_id -> (batch id, key)
        self.stats = BatchStats()
        self._seen: dict[str, int] = {}

    @property
    def on_progress(self) -> Callable[[str], None] | None:
        return self.rounds.on_progress

    @property
    def shared(self) -> bool:
        """Its rounds are the run's, other suites ask in them too."""
        return not self._own

    async def request(self, api: BatchAPI, body: dict[str, Any]) -> Any:
        """The SDK response to ``body``, from this run's or an earlier run's batch; raises
        :class:`SendAlone` or the :class:`ModelCallError` the batch answered with."""
        why = self.rounds.unusable(api)
        if why is not None:
            raise SendAlone(why)
        self._journal()
        custom_id = self._custom_id(api.key, body)
        item = await self._resumed(api, custom_id)
        if item is not None and item.body is not None:
            return item.body
        if item is not None and item.error is not None and not item.error.transient:
            raise item.error
        future = asyncio.get_running_loop().create_future()
        self.rounds.enqueue(api, _Pending(custom_id, body, future, self))
        return await future

    def _custom_id(self, key: str, body: dict[str, Any]) -> str:
        text = json.dumps([self._scope, key, body], sort_keys=True, ensure_ascii=False, default=str)
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]
        seen = self._seen.get(digest, 0)
        self._seen[digest] = seen + 1
        return f"{digest}-{seen}"  # Anthropic's custom_id: [a-zA-Z0-9_-]{1,64}

    def _journal(self) -> BatchLog | None:
        if self._known is None:
            self._log = self._log_factory()
            self._scope = self._log.scope if self._log is not None else ""
            self._known = {}
            for entry in self._log.submitted() if self._log is not None else []:
                for custom_id in entry.get("custom_ids", []):
                    self._known[str(custom_id)] = (str(entry["batch_id"]), str(entry["key"]))
        return self._log

    async def _resumed(self, api: BatchAPI, custom_id: str) -> BatchItem | None:
        """The answer of an earlier run's batch that holds ``custom_id``, if there is one."""
        assert self._known is not None
        found = self._known.pop(custom_id, None)
        if found is None or found[1] != api.key:
            return None
        items = await self.rounds.wait_for(api, found[0], self)
        item = items.get(custom_id)
        if item is not None and item.body is not None:
            self.stats.resumed += 1
        return item

    def submitted(self, batch_id: str, key: str, custom_ids: list[str]) -> None:
        """A batch holding ``custom_ids`` of this suite was submitted: in its log before any
        wait (a rerun finds them there), in its stats."""
        log = self._journal()
        if log is not None:
            log.record({"batch_id": batch_id, "key": key, "custom_ids": custom_ids})
        self.stats.submitted += 1
        self.stats.requests += len(custom_ids)

    def summary(self) -> str | None:
        """One line on what went through batches, or None when nothing did."""
        stats = self.stats
        if not stats.submitted and not stats.resumed:
            return None
        line = (
            f"batches: {stats.submitted} submitted with {_requests(stats.requests)}, "
            f"{stats.done} done, the longest wait {stats.longest_wait_s:.1f} s"
        )
        if stats.resumed:
            line += f"; {stats.resumed} answers from batches an earlier run submitted"
        if stats.sent_alone:
            line += f"; {_requests(stats.sent_alone)} sent as ordinary calls"
        return line

    async def aclose(self) -> None:
        """This suite stops: with rounds of its own, every batch still running is cancelled
        (Ctrl-C, an error); with the run's, only its requests not yet sent (the run closes
        the rounds once every suite is done)."""
        if self._own:
            await self.rounds.aclose()
        else:
            self.rounds.drop(self)


async def _asked(question: Awaitable[_T], otherwise: _T) -> _T:
    """A poll of the batch API: a transient failure (a dropped connection, a 5xx) is asked
    again at the next poll, never a reason to send the requests again; a permanent one (the
    provider does not know the batch) ends the wait with no answers (:class:`BatchGone`)."""
    try:
        return await question
    except Exception as exc:
        if not classify(exc).transient:
            raise BatchGone(str(exc)) from exc
        return otherwise


def _requests(count: int) -> str:
    return f"{count} request{'' if count == 1 else 's'}"


def item_error(code: str | None, message: str | None, status: int | None = None) -> ModelCallError:
    """A batch item's error as the ordinary call's would be: transient for what another batch
    may answer (expired, cancelled, rate limits, server errors), permanent otherwise."""
    text = f"{code or 'error'}: {message or 'the batch did not answer this request'}"
    if status is not None and 400 <= status < 500 and status not in (408, 409, 429):
        kind = CallErrorKind.AUTH if status in (401, 403) else CallErrorKind.BAD_REQUEST
        return ModelCallError(kind, text, status=status)
    if status == 429 or code in ("rate_limit_exceeded", "rate_limit_error"):
        return ModelCallError(CallErrorKind.RATE_LIMIT, text, status=status)
    if code in ("invalid_request", "invalid_request_error"):
        return ModelCallError(CallErrorKind.BAD_REQUEST, text, status=status)
    return ModelCallError(CallErrorKind.SERVER, text, status=status)
