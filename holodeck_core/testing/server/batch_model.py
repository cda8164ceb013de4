"""Batches as the server keeps them in memory: one model for both providers' batch APIs.

A batch's status uses OpenAI's names (``validating`` … ``cancelled``); the Anthropic routes
show it as ``processing_status`` (:mod:`.batch_anthropic`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from holodeck_core.testing.rules import BatchControls, RouteName

BatchStatus: TypeAlias = Literal[
    "validating",
    "failed",
    "in_progress",
    "finalizing",
    "completed",
    "expired",
    "cancelling",
    "cancelled",
]
OutcomeKind: TypeAlias = Literal["succeeded", "errored", "cancelled", "expired"]
OUTCOME_KINDS: tuple[OutcomeKind, ...] = ("succeeded", "errored", "cancelled", "expired")
ENDED: frozenset[BatchStatus] = frozenset({"failed", "completed", "expired", "cancelled"})


@dataclass
class Outcome:
    """What became of one request: answered (the HTTP status and JSON body of its answer,
    an error included) or never run (cancelled, expired: no status, no body)."""

    kind: OutcomeKind
    status: int | None = None
    body: dict[str, Any] | None = None


@dataclass
class BatchRequest:
    """One request of a batch: its ``custom_id``, the route that answers it and its body."""

    custom_id: str
    route: RouteName
    path: str
    body: dict[str, Any]
    outcome: Outcome | None = None


@dataclass
class Batch:
    id: str
    items: list[BatchRequest]
    controls: BatchControls
    seed: int
    """``faults.seed`` of the rules at submission (draws ``batches.fail.rate``)."""
    key_headers: dict[str, str]
    """The submitting request's key headers, for ``{api_key}`` in an injected error message."""
    created_at: float
    status: BatchStatus = "validating"
    times: dict[str, float] = field(default_factory=dict)
    """When the batch reached a status: ``in_progress``, ``completed``, ``cancelling``, …"""
    extra: dict[str, Any] = field(default_factory=dict)
    """The provider's own fields (OpenAI: endpoint, input file, metadata, output files)."""
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    on_end: Callable[[Batch], None] | None = None
    """Called once every request has an outcome, before the batch shows its final status."""

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    def count(self, kind: OutcomeKind) -> int:
        return sum(1 for item in self.items if item.outcome and item.outcome.kind == kind)


@dataclass(frozen=True)
class InputLine:
    """One request line of an OpenAI batch input file."""

    line: int
    custom_id: str
    url: str
    body: dict[str, Any]


@dataclass
class StoredFile:
    """A file of the OpenAI Files API: an uploaded batch input or a batch's output."""

    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int
    lines: list[InputLine] = field(default_factory=list)
