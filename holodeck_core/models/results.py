"""What a run produces: processed files, tool invocations, metric and test results and the
run's summary (the report that holds them is :mod:`.report`).

Shapes follow HoloDeck 0.7.1's models and extend them (counts and scores: docs/history.md).
Where HoloDeck 0.7.1's own files differ from its schema, the files win
(docs/holodeck-fidelity.md): ``scale`` may be the string ``"0-1"``, results carry
``reasoning`` and per-turn ``turns``."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from holodeck_core.defaults import MAX_TOKEN_COUNT
from holodeck_core.models.base import StrictModel, json_bytes, omit_if_none
from holodeck_core.models.cost import Heading, HeadingCost, RunCost, cost_per_pass
from holodeck_core.models.evaluation import Direction
from holodeck_core.models.test_case import ExpectedToolSpec, FileInput
from holodeck_core.stats import CaseOutcome, Reducer, RunStatistics, run_statistics


def iso8601(value: str) -> str:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"not an ISO 8601 timestamp: {value!r}") from exc
    return value


class Status(StrEnum):
    """PASS: ran and met every threshold. FAIL: ran and missed one. ERROR: could not be
    evaluated (model, tool, file, infrastructure or a ``fail_on_error`` metric)."""

    PASS = "PASS"
    FAIL = "FAIL"
    ERROR = "ERROR"


class ProcessedFileInput(StrictModel):
    original: FileInput
    markdown_content: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    cached_path: str | None = None
    processing_time_ms: int = Field(ge=0)
    error: str | None = None

    @model_validator(mode="after")
    def _content_or_error(self) -> ProcessedFileInput:
        if self.error is None and not self.markdown_content and self.original.type != "image":
            raise ValueError("markdown_content must be non-empty when there is no error")
        return self


MetricKind = Literal["standard", "rag", "geval", "code"]


class MetricResult(StrictModel):
    metric_name: str = Field(min_length=1)
    kind: MetricKind = "standard"
    score: float | None = Field(None, description="Normalized 0-1 where the metric is bounded.")
    raw_score: float | None = Field(None, description="The score in the metric's own unit.")
    threshold: float | None = None
    direction: Direction = Direction.HIGHER_IS_BETTER
    unit: str | None = Field(None, description="e.g. ms, USD; None for 0-1 scores.")
    passed: bool | None = Field(description="None: errored and not fail_on_error.")
    scale: int | str | None = None
    error: str | None = None
    retry_count: int = Field(0, ge=0, le=3)
    evaluation_time_ms: int = Field(0, ge=0)
    model_used: str | None = None
    reasoning: str | None = None
    fail_on_error: bool = False
    details: dict[str, Any] = Field(
        default_factory=dict, description="Metric-specific provenance (e.g. BLEU signature)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> MetricResult:
        if self.error is None and self.passed is None:
            raise ValueError("a metric without an error must say whether it passed")
        return self


class RetrievedChunk(StrictModel):
    """One chunk a retrieval tool returned for a call: what it said, where from, how close."""

    text: str
    source: str | None = None
    chunk_id: str | None = None
    score: float | None = None


class ToolInvocation(StrictModel):
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    bytes: int = Field(0, ge=0)
    duration_ms: int | None = Field(None, ge=0)
    error: str | None = None
    call_id: str | None = None
    # Set by retrieval tools (vectorstore, hierarchical_document, MCP with is_retrieval): the
    # texts RAG metrics read as the case's retrieval_context, and the chunks with their scores.
    retrieval_context: list[str] | None = None
    chunks: list[RetrievedChunk] | None = None
    usage: TokenUsage | None = Field(None, description="Model tokens the tool itself spent.")
    notes: list[str] | None = Field(
        None, description="What was made valid in the call (lone surrogates replaced)."
    )

    @model_serializer(mode="wrap")
    def _without_notes(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return omit_if_none(self, handler, "notes")

    @classmethod
    def of(
        cls,
        name: str,
        args: dict[str, Any],
        result: Any,
        *,
        duration_ms: int | None = None,
        error: str | None = None,
        call_id: str | None = None,
    ) -> ToolInvocation:
        return cls(
            name=name,
            args=args,
            result=result,
            bytes=json_bytes(result),
            duration_ms=duration_ms,
            error=error,
            call_id=call_id,
        )


class TokenUsage(StrictModel):
    """Tokens of a call, a case or a run; each count at most ``MAX_TOKEN_COUNT`` (an EvalRun
    past it is refused, a reply past ``MAX_CALL_TOKENS`` is the call's error)."""

    prompt_tokens: int = Field(0, ge=0, le=MAX_TOKEN_COUNT)
    completion_tokens: int = Field(0, ge=0, le=MAX_TOKEN_COUNT)
    total_tokens: int = Field(0, ge=0, le=MAX_TOKEN_COUNT)
    cache_creation_tokens: int = Field(0, ge=0, le=MAX_TOKEN_COUNT)
    cache_read_tokens: int = Field(0, ge=0, le=MAX_TOKEN_COUNT)

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            **{name: getattr(self, name) + getattr(other, name) for name in TokenUsage.model_fields}
        )


class TurnResult(StrictModel):
    """One turn of a multi-turn case (HoloDeck 0.7.1 writes these under ``turns``)."""

    turn_index: int = Field(ge=0)
    input: str
    response: str | None = None
    ground_truth: str | None = None
    expected_tools: list[ExpectedToolSpec] | None = None
    tool_calls: list[str] = Field(default_factory=list)
    tool_invocations: list[ToolInvocation] = Field(default_factory=list)
    tools_matched: bool | None = None
    arg_match_details: list[dict[str, Any]] | None = None
    metric_results: list[MetricResult] = Field(default_factory=list)
    passed: bool
    execution_time_ms: int = Field(0, ge=0)
    token_usage: TokenUsage | None = None
    errors: list[str] = Field(default_factory=list)
    skipped: bool = False
    grader_details: dict[str, Any] | None = None


class TestResult(StrictModel):
    __test__ = False

    test_id: str | None = None
    test_name: str | None = None
    test_input: str = Field(min_length=1)
    processed_files: list[ProcessedFileInput] = Field(default_factory=list)
    agent_response: str | None = None
    tool_calls: list[str] = Field(default_factory=list)
    tool_invocations: list[ToolInvocation] = Field(default_factory=list)
    expected_tools: list[ExpectedToolSpec] | None = None
    tools_matched: bool | None = None
    metric_results: list[MetricResult] = Field(default_factory=list)
    ground_truth: str | None = None
    passed: bool
    status: Status
    execution_time_ms: int = Field(ge=0)
    errors: list[str] = Field(default_factory=list)
    timestamp: str
    token_usage: TokenUsage | None = None
    turns: list[TurnResult] | None = None
    error_source: Literal["execution", "evaluation", "budget"] | None = Field(
        None,
        description="Why an ERROR case could not be evaluated: the agent, a tool, a file or "
        "the infrastructure (execution), only a fail_on_error metric (evaluation), or the "
        "run's budget, which stopped a call it needed (budget).",
    )
    model_time_ms: int | None = Field(
        None, ge=0, description="The agent's model time: queueing and backoff excluded."
    )
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    weight: float = Field(1.0, gt=0.0)
    trials: list[TestResult] | None = Field(
        None,
        description="With execution.trials K > 1: each trial's own result. The case's status "
        "is the reducer's verdict over them and its scores are their means (docs/cli.md).",
    )
    cost: dict[Heading, HeadingCost] | None = Field(
        None, description="What this run paid for the case, per heading (all its trials)."
    )
    notes: list[str] | None = Field(
        None,
        description="What was made valid in text from outside (a model reply, a tool result, "
        "a target's output): lone surrogates replaced with U+FFFD.",
    )

    _ts = field_validator("timestamp")(iso8601)

    @model_serializer(mode="wrap")
    def _without_trials(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """One trial per case writes exactly the shape it always had (no ``trials`` key);
        so does a run that booked no costs."""
        return omit_if_none(self, handler, "trials", "cost", "notes")

    @model_validator(mode="before")
    @classmethod
    def _infer_status(cls, data: Any) -> Any:
        """HoloDeck 0.7.1 files have no status: a case that never got a response but has
        errors was not evaluated (ERROR); otherwise passed decides PASS or FAIL."""
        if isinstance(data, dict) and "status" not in data:
            data = dict(data)
            if data.get("passed"):
                data["status"] = Status.PASS
            elif data.get("agent_response") is None and data.get("errors"):
                data["status"] = Status.ERROR
            else:
                data["status"] = Status.FAIL
        return data

    @model_validator(mode="after")
    def _consistent(self) -> TestResult:
        if self.passed != (self.status is Status.PASS):
            raise ValueError(f"passed={self.passed} contradicts status={self.status.value}")
        if self.expected_tools is not None and self.tools_matched is None and self.turns is None:
            raise ValueError("tools_matched must be set when expected_tools is")
        if self.passed and (self.errors or self.tools_matched is False):
            raise ValueError("a case with errors or unmatched tools cannot pass")
        if self.passed and any(m.passed is False for m in self.metric_results):
            raise ValueError("a case with a failed metric cannot pass")
        if self.error_source is not None and self.status is not Status.ERROR:
            raise ValueError("error_source is set only on ERROR cases")
        return self

    @property
    def trial_count(self) -> int:
        return len(self.trials) if self.trials else 1

    @property
    def trial_passes(self) -> int:
        """How many of the case's trials passed."""
        if not self.trials:
            return 1 if self.status is Status.PASS else 0
        return sum(1 for t in self.trials if t.status is Status.PASS)

    def outcome(self) -> CaseOutcome:
        """The case as the run statistics see it: passes of K, mean score per metric."""
        scores: dict[str, list[float]] = {}
        units: set[str] = set()
        for metric in all_metric_results(self):
            value = metric.score if metric.score is not None else metric.raw_score
            if metric.error is None and value is not None:
                scores.setdefault(metric.metric_name, []).append(value)
                if metric.unit is not None:
                    units.add(metric.metric_name)
        return CaseOutcome(
            case_id=self.test_id or self.test_name or self.test_input,
            passes=self.trial_passes,
            trials=self.trial_count,
            scores={name: sum(v) / len(v) for name, v in scores.items()},
            units=frozenset(units),
            errors=sum(1 for t in self.trials or () if t.status is Status.ERROR)
            if self.trials
            else int(self.status is Status.ERROR),
        )


class ReportSummary(StrictModel):
    total_tests: int = Field(ge=0)
    passed: int = Field(ge=0)
    failed: int = Field(ge=0)
    errored: int = Field(0, ge=0)
    pass_rate: float = Field(ge=0.0, le=100.0, description="Percent, 0-100 (HoloDeck's).")
    weighted_pass_rate: float | None = Field(None, ge=0.0, le=100.0)
    total_duration_ms: int = Field(ge=0, description="Sum of the cases' times.")
    wall_time_ms: int | None = Field(None, ge=0, description="Elapsed time of the whole run.")
    metrics_evaluated: dict[str, int] = Field(default_factory=dict)
    metrics_errored: dict[str, int] = Field(default_factory=dict)
    metrics_passed: dict[str, int] = Field(default_factory=dict)
    average_scores: dict[str, float] = Field(default_factory=dict)
    metric_pass_rates: dict[str, float] = Field(default_factory=dict)
    token_usage: TokenUsage | None = None
    cost_usd: float | None = Field(
        None,
        ge=0.0,
        description="The run's cost (docs/cost.md): what it paid under every heading, its "
        "earlier attempts' journaled calls included (a rescore: its judge calls); None when "
        "a price is unknown.",
    )
    cost: RunCost | None = Field(
        None, description="Spend per heading, the price table and the budget verdict."
    )
    statistics: RunStatistics | None = Field(
        None, description="Intervals, pass@k and flaky cases (docs/cli.md)."
    )

    @property
    def cost_per_pass(self) -> float | None:
        return cost_per_pass(self.cost_usd, self.passed)

    @model_validator(mode="after")
    def _counts(self) -> ReportSummary:
        if self.passed + self.failed + self.errored != self.total_tests:
            raise ValueError(
                f"passed ({self.passed}) + failed ({self.failed}) + errored ({self.errored}) "
                f"must equal total_tests ({self.total_tests})"
            )
        return self

    @classmethod
    def from_results(
        cls,
        results: list[TestResult],
        *,
        wall_time_ms: int | None = None,
        reducer: Reducer = Reducer.ALL,
        max_error_share: float | None = None,
    ) -> ReportSummary:
        """Aggregate (docs/history.md, "Conventions"): ERROR counts in the denominator, averages
        include zero scores, errored metrics are counted apart and excluded from averages."""
        total = len(results)
        by_status = {s: sum(1 for r in results if r.status is s) for s in Status}
        weight_total = sum(r.weight for r in results)
        weight_passed = sum(r.weight for r in results if r.status is Status.PASS)
        evaluated: dict[str, int] = {}
        errored: dict[str, int] = {}
        passed: dict[str, int] = {}
        scores: dict[str, list[float]] = {}
        usage: TokenUsage | None = None
        for result in results:
            if result.token_usage is not None:
                usage = result.token_usage if usage is None else usage + result.token_usage
            for metric in all_metric_results(result):
                name = metric.metric_name
                if metric.error is not None:
                    errored[name] = errored.get(name, 0) + 1
                    continue
                evaluated[name] = evaluated.get(name, 0) + 1
                passed[name] = passed.get(name, 0) + (1 if metric.passed else 0)
                value = metric.score if metric.score is not None else metric.raw_score
                if value is not None:
                    scores.setdefault(name, []).append(value)
        return cls(
            total_tests=total,
            passed=by_status[Status.PASS],
            failed=by_status[Status.FAIL],
            errored=by_status[Status.ERROR],
            pass_rate=100.0 * by_status[Status.PASS] / total if total else 0.0,
            weighted_pass_rate=100.0 * weight_passed / weight_total if weight_total else 0.0,
            total_duration_ms=sum(r.execution_time_ms for r in results),
            wall_time_ms=wall_time_ms,
            metrics_evaluated=evaluated,
            metrics_errored=errored,
            metrics_passed=passed,
            average_scores={name: sum(v) / len(v) for name, v in scores.items()},
            metric_pass_rates={
                name: passed[name] / count for name, count in evaluated.items() if count
            },
            token_usage=usage,
            statistics=run_statistics(
                [r.outcome() for r in results],
                trials=max((r.trial_count for r in results), default=1),
                reducer=reducer,
                errored=by_status[Status.ERROR],
                max_error_share=max_error_share,
            ),
        )


def all_metric_results(result: TestResult) -> list[MetricResult]:
    """A case's metric results, including those recorded per turn."""
    found = list(result.metric_results)
    for turn in result.turns or []:
        found.extend(turn.metric_results)
    return found
