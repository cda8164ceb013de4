"""What a metric sees and what it returns.

A metric is a small function ``fn(metric_config, inputs, context) -> Score`` (or an ``async``
function returning a ``Score``). It reads only :class:`MetricInput`, may raise
:class:`MetricError` when it cannot run, and never decides the bookkeeping (threshold,
direction, timing, ``fail_on_error``): the registry does that once for every metric.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from holodeck_core.models.results import TokenUsage, ToolInvocation
from holodeck_core.models.test_case import ExpectedToolSpec

InputField = Literal[
    "input",
    "actual_output",
    "expected_output",
    "context",
    "retrieval_context",
    "tool_invocations",
    "expected_tools",
    "latency_ms",
    "token_usage",
    "model",
]
"""The inputs a metric may declare it needs (``MetricSpec.requires``)."""

INPUT_DESCRIPTIONS: dict[str, str] = {
    "input": "the case input",
    "actual_output": "an agent response",
    "expected_output": "a ground_truth",
    "context": "a context",
    "retrieval_context": "a retrieval_context",
    "tool_invocations": "tool invocations",
    "expected_tools": "expected_tools",
    "latency_ms": "a measured latency",
    "token_usage": "token usage",
    "model": "the agent's model name",
}


class MetricInput(BaseModel):
    """Everything a metric may look at for one case (or one turn of a multi-turn case).

    ``actual_output`` is the agent's response: ``""`` is an empty response (evaluated, and
    it fails), ``None`` means there is no response at all (the metric errors).
    ``expected_output`` is the case's ``ground_truth`` (G-Eval's name for it).
    ``latency_ms`` is the agent's model time for the case (queueing and backoff excluded,
    docs/history.md); ``model`` is the agent's model name, used by ``cost``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: str | None = None
    actual_output: str | None = None
    expected_output: str | None = None
    context: tuple[str, ...] | None = None
    retrieval_context: tuple[str, ...] | None = None
    tool_invocations: tuple[ToolInvocation, ...] = ()
    expected_tools: tuple[ExpectedToolSpec, ...] | None = None
    latency_ms: float | None = Field(None, ge=0.0)
    token_usage: TokenUsage | None = None
    model: str | None = None
    test_case_name: str | None = None
    turn_index: int = Field(0, ge=0)
    turn_config: dict[str, Any] = Field(default_factory=dict)

    @property
    def ground_truth(self) -> str | None:
        """HoloDeck's name for ``expected_output``."""
        return self.expected_output

    def has(self, name: InputField) -> bool:
        """Whether the input ``name`` is present (``tool_invocations`` always is)."""
        if name == "tool_invocations":
            return True
        return getattr(self, name) is not None


@dataclass(frozen=True)
class EvalContext:
    """What a metric may need besides its inputs.

    ``base_dir`` is the agent's directory (code graders are resolved relative to it).
    LLM-judge metrics get their judge client, judge cache and default judge model from
    here: subclass this dataclass (``@dataclass(frozen=True) class JudgeContext(EvalContext)``)
    or put typed services in ``services`` under a documented key.
    """

    base_dir: Path | None = None
    services: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Score:
    """What a metric function returns.

    ``score`` is normalized to 0-1 for bounded metrics and ``None`` for unbounded ones
    (latency, cost); ``raw_score`` is the value in the metric's own unit and defaults to
    ``score``. ``passed`` is set only by metrics that decide it themselves (a code grader
    returning ``passed``); otherwise the registry applies the threshold. ``threshold`` is set
    only by a metric whose rule replaces the configured one (G-Eval's ``strict_mode``: 1.0).
    """

    score: float | None
    raw_score: float | None = None
    passed: bool | None = None
    threshold: float | None = None
    reasoning: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    model_used: str | None = None
    retry_count: int = 0


class MetricError(Exception):
    """A metric cannot run (missing input, bad configuration, judge error after retries).

    The registry turns it into an error result with this message; any other exception is
    recorded the same way with its type name prepended.
    """

    def __init__(
        self, message: str, *, retry_count: int = 0, model_used: str | None = None
    ) -> None:
        super().__init__(message)
        self.retry_count = retry_count
        self.model_used = model_used


class EvaluationDataError(MetricError):
    """The evaluation's own data cannot be read by the metric (a numeric metric's ground
    truth that is not a number): the case ran, its evaluation could not. The metric's error,
    recorded with ``details.error_source: evaluation``, so a case that no metric could
    judge for this reason is an evaluation ERROR (exit 4, docs/cli.md), not an execution
    one."""


EVALUATION_DATA = "evaluation"
"""``MetricResult.details["error_source"]`` of an :class:`EvaluationDataError`."""


class ResponseRejected(Exception):
    """The agent's response cannot be graded as configured: it is not JSON, the
    ``response_path`` is missing, it is not a number...

    That is the agent's failure, not the metric's: the registry records a FAIL (score 0,
    ``passed: false``) with this message as ``reasoning`` and in ``details.response_error``,
    so an empty or malformed response fails instead of being excluded as an error.
    """
