"""What a judge question yields: a usable answer, an error, and the run's judge counters."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from holodeck_core.metrics.base import MetricError
from holodeck_core.metrics.judge_parse import NumberToken, first_json_object

Check = Callable[[dict[str, Any]], str | None]
"""A metric's check of a parsed reply: ``None`` if usable, else the problem (sent back to
the judge in the one repair request)."""


@dataclass
class JudgeStats:
    """What the judges did in this run (the runner reads ``transient_failures`` to decide
    whether a rerun may help, docs/dagster.md)."""

    requests: int = 0
    retries: int = 0
    invalid_replies: int = 0
    failures: int = 0
    transient_failures: int = 0
    shared: int = 0


@dataclass(frozen=True)
class JudgeAnswer:
    """A usable judge reply. ``requests``/``retries`` count what this question cost now
    (0 for answers from the cache or shared with an identical question)."""

    data: dict[str, Any]
    text: str
    numbers: tuple[NumberToken, ...] | None = None
    system_fingerprint: str | None = None
    cached: bool = False
    requests: int = 0
    retries: int = 0
    reasked: bool = False

    def to_cache(self) -> dict[str, Any]:
        return {
            "data": self.data,
            "text": self.text,
            "numbers": None if self.numbers is None else [n.to_json() for n in self.numbers],
            "system_fingerprint": self.system_fingerprint,
            "reasked": self.reasked,
        }

    @classmethod
    def from_cache(cls, value: Mapping[str, Any]) -> JudgeAnswer:
        numbers = value.get("numbers")
        return cls(
            data=dict(value["data"]),
            text=str(value["text"]),
            numbers=None if numbers is None else tuple(NumberToken.from_json(n) for n in numbers),
            system_fingerprint=value.get("system_fingerprint"),
            cached=True,
            reasked=bool(value.get("reasked", False)),
        )


class JudgeCallError(Exception):
    """A judge question that failed after its retries (or got two unusable replies)."""

    def __init__(self, message: str, *, retries: int, transient: bool) -> None:
        super().__init__(message)
        self.retries = retries
        self.transient = transient


class JudgeMetricError(MetricError):
    """A judge metric's error; ``transient`` says whether a rerun may succeed."""

    def __init__(
        self, message: str, *, retry_count: int, model_used: str | None, transient: bool
    ) -> None:
        super().__init__(message, retry_count=retry_count, model_used=model_used)
        self.transient = transient


def read_reply(text: str, check: Check | None) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object of a judge's reply and what ``check`` finds wrong with it, or why
    there is none (the start of what came instead)."""
    data = first_json_object(text)
    if data is None:
        snippet = " ".join(text.split())[:120]
        return None, f"it holds no JSON object (it began: {snippet!r})"
    problem = check(data) if check is not None else None
    return data, problem
