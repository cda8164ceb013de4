"""State: the rules, the counters of ``/_stats`` and the stored Responses conversations."""

from __future__ import annotations

import asyncio
from collections import Counter, OrderedDict
from typing import Any, TypedDict

from aiohttp import web

from holodeck_core.testing.rules import Rules
from holodeck_core.testing.server.batch_model import Batch, StoredFile

_MAX_STORED_RESPONSES = 10_000


class BatchCounters(TypedDict):
    """The ``batches`` of ``GET /_stats``: batches and the requests in them, both providers
    (never counted in the synchronous calls' counters)."""

    submitted: int
    completed: int
    failed: int
    cancelled: int
    expired: int
    requests: dict[str, int]
    """submitted, succeeded, errored, cancelled, expired."""
    by_route: dict[str, int]
    """Requests submitted per route (chat, responses, embeddings, messages)."""


class Stats(TypedDict):
    """The shape of ``GET /_stats`` and :meth:`ModelServer.stats`."""

    total_calls: int
    streamed: int
    by_route: dict[str, int]
    by_path: dict[str, int]
    by_rule: dict[str, int]
    by_key: dict[str, int]
    faults: dict[str, int]
    peak_concurrency: int
    in_flight: int
    bad_requests: int
    batches: BatchCounters


class ServerState:
    """Rules, counters and stored Responses conversations; touched only on the server loop."""

    def __init__(self, rules: Rules, latency: float = 0.0) -> None:
        if latency < 0:
            raise ValueError("latency must be >= 0")
        self.rules = rules
        self.latency = latency
        self.in_flight = 0
        self.responses: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self.batches: dict[str, Batch] = {}
        """Both providers' batches by id, in submission order (kept over ``/_reset``)."""
        self.files: dict[str, StoredFile] = {}
        self.batch_tasks: set[asyncio.Task[None]] = set()
        self.reset()

    def reset(self) -> None:
        self.total_calls = 0
        self.streamed = 0
        self.bad_requests = 0
        self.by_route: Counter[str] = Counter()
        self.by_path: Counter[str] = Counter()
        self.by_rule: Counter[str] = Counter()
        self.by_key: Counter[str] = Counter()
        self.call_numbers: Counter[str] = Counter()
        """Calls per request key, synchronous and in batches: numbers each call (``nth``,
        ``fault.first``, the random draws), where ``by_key`` counts synchronous calls only."""
        self.faults: Counter[str] = Counter()
        self.peak_concurrency = self.in_flight
        self.batch_counts: Counter[str] = Counter()
        self.batch_requests: Counter[str] = Counter()
        self.batch_by_route: Counter[str] = Counter()
        self.requests: list[dict[str, Any]] = []
        """Every model request received, in order: route, path and JSON body (``GET
        /_requests``), for comparing what two clients send (bench/holodeck_fidelity.py)."""

    def snapshot(self) -> Stats:
        return Stats(
            total_calls=self.total_calls,
            streamed=self.streamed,
            by_route=dict(self.by_route),
            by_path=dict(self.by_path),
            by_rule=dict(self.by_rule),
            by_key=dict(self.by_key),
            faults=dict(self.faults),
            peak_concurrency=self.peak_concurrency,
            in_flight=self.in_flight,
            bad_requests=self.bad_requests,
            batches=BatchCounters(
                submitted=self.batch_counts["submitted"],
                completed=self.batch_counts["completed"],
                failed=self.batch_counts["failed"],
                cancelled=self.batch_counts["cancelled"],
                expired=self.batch_counts["expired"],
                requests={
                    kind: self.batch_requests[kind]
                    for kind in ("submitted", "succeeded", "errored", "cancelled", "expired")
                },
                by_route=dict(self.batch_by_route),
            ),
        )

    def count_call(self, route: str, path: str, streamed: bool) -> None:
        """A model call on ``route`` at ``path``, answered as a stream or not."""
        self.total_calls += 1
        self.streamed += streamed
        self.by_route[route] += 1
        self.by_path[path] += 1

    def store_response(self, response_id: str, items: list[dict[str, Any]]) -> None:
        self.responses[response_id] = items
        self.responses.move_to_end(response_id)
        while len(self.responses) > _MAX_STORED_RESPONSES:
            self.responses.popitem(last=False)


STATE_KEY = web.AppKey("holodeck_model_server_state", ServerState)
