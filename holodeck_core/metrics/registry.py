"""The one metric registry, the evaluation entry points and metric precedence.

Every metric is a :class:`MetricSpec`: a function plus what it declares (kind, inputs, unit,
bounded 0-1 or not, how a missing threshold is read). :func:`evaluate_metrics` and
:func:`aevaluate_metrics` turn specs into ``MetricResult`` objects by the same rules: disabled
metrics produce no result; a missing input, a :class:`MetricError` or any exception becomes an
error result (``passed`` ``None``, or ``False`` with ``fail_on_error``), never aborting
another metric; bounded scores are 0-1 with ``raw_score`` kept, latency and cost keep their
unit in ``raw_score`` and their thresholds are maxima.

**Plugging in a metric**: a function ``(metric, inputs, context) -> Score`` (async for
judges, which the scheduler retries with ``retry_on_failure`` as the budget), registered by
``@REGISTRY.metric(name, kind=..., requires=..., policy=..., default_threshold=...)`` (see
``judge_metrics.py``); keys are ``(kind, name)``. Thresholds are checked when the config is
built (:mod:`holodeck_core.models.evaluation`). Sync metrics run on one worker thread.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from holodeck_core.metrics import sync_worker
from holodeck_core.metrics.base import (
    EVALUATION_DATA,
    INPUT_DESCRIPTIONS,
    EvalContext,
    EvaluationDataError,
    InputField,
    MetricError,
    MetricInput,
    ResponseRejected,
    Score,
)
from holodeck_core.models.evaluation import CodeMetric, GEvalMetric, RAGMetric, StandardMetric
from holodeck_core.models.results import MetricKind, MetricResult

AnyMetric = StandardMetric | GEvalMetric | RAGMetric | CodeMetric
MetricFn = Callable[[Any, MetricInput, EvalContext], Score | Awaitable[Score]]
F = TypeVar("F", bound=Callable[..., Any])

_FLOAT_SLACK = 1e-9
NO_THRESHOLD_NOTE = "no threshold set: the score is recorded and passes when it is above 0"


class ThresholdPolicy(StrEnum):
    """How a metric passes, in particular when its ``threshold`` is not set.

    With a threshold, bounded metrics pass at ``score >= threshold``.

    * ``BINARY``: a 0/1 check (equality, numeric, exact_match, contains, regex, json_valid,
      json_schema, tool_correctness); without a threshold it passes only at score 1.0.
    * ``RECORD``: a similarity score (bleu, rouge, meteor); without a threshold the score is
      recorded and passes when above 0 (an empty or unrelated response still fails), with a
      note in ``details``. HoloDeck passes these unconditionally.
    * ``DEFAULT``: without a threshold, ``MetricSpec.default_threshold`` applies (code
      graders: 0.5, HoloDeck's grader contract).
    * ``MAXIMUM``: unbounded, lower is better (latency, cost): passes at
      ``raw_score <= threshold``; the threshold is required.
    """

    BINARY = "binary"
    RECORD = "record"
    DEFAULT = "default"
    MAXIMUM = "maximum"


@dataclass(frozen=True)
class MetricSpec:
    """A registered metric: its function and what it declares."""

    name: str
    kind: MetricKind
    fn: MetricFn
    requires: frozenset[InputField]
    policy: ThresholdPolicy = ThresholdPolicy.BINARY
    unit: str | None = None
    default_threshold: float | None = None
    response_path: bool = False
    inline: bool = False
    """Evaluated on the event loop itself: a check linear in the response with no user code
    or pattern in it (equality, contains), cheaper than the hand-off to the metrics thread."""
    description: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.name)

    @property
    def bounded(self) -> bool:
        """Bounded metrics have a 0-1 ``score``; unbounded ones only a ``raw_score``."""
        return self.policy is not ThresholdPolicy.MAXIMUM

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)


def metric_key(metric: AnyMetric) -> tuple[str, str]:
    """The registry key of a metric configuration."""
    if isinstance(metric, StandardMetric):
        return ("standard", metric.metric)
    if isinstance(metric, RAGMetric):
        return ("rag", metric.metric_type)
    return (metric.type, metric.type)


class MetricRegistry:
    """Maps ``(kind, name)`` to a :class:`MetricSpec`."""

    def __init__(self) -> None:
        self._specs: dict[tuple[str, str], MetricSpec] = {}

    def add(self, spec: MetricSpec) -> MetricSpec:
        if spec.key in self._specs:
            raise ValueError(f"metric {spec.kind}:{spec.name} is already registered")
        self._specs[spec.key] = spec
        return spec

    def metric(
        self,
        name: str,
        *,
        kind: MetricKind,
        requires: Iterable[InputField],
        policy: ThresholdPolicy = ThresholdPolicy.BINARY,
        unit: str | None = None,
        default_threshold: float | None = None,
        response_path: bool = False,
        inline: bool = False,
    ) -> Callable[[F], F]:
        """Decorator registering ``fn(metric, inputs, context) -> Score`` (sync or async)."""

        def decorate(fn: F) -> F:
            self.add(
                MetricSpec(
                    name=name,
                    kind=kind,
                    fn=fn,
                    requires=frozenset(requires),
                    policy=policy,
                    unit=unit,
                    default_threshold=default_threshold,
                    response_path=response_path,
                    inline=inline,
                    description=(inspect.getdoc(fn) or "").split("\n", 1)[0],
                )
            )
            return fn

        return decorate

    def get(self, kind: str, name: str) -> MetricSpec | None:
        return self._specs.get((kind, name))

    def resolve(self, metric: AnyMetric) -> MetricSpec | None:
        return self._specs.get(metric_key(metric))

    def specs(self) -> list[MetricSpec]:
        return list(self._specs.values())


REGISTRY = MetricRegistry()
"""The default registry; the built-in metrics register here when the package is imported."""


def select_metrics(
    agent_metrics: Sequence[AnyMetric] | None,
    case_metrics: Sequence[AnyMetric] | None,
    turn_metrics: Sequence[AnyMetric] | None = None,
) -> list[AnyMetric]:
    """Metric precedence turn > case > agent: the narrowest list that is set replaces the
    broader ones (it is not merged). ``None`` means "not set"; an empty list is set and
    means "no metrics here". Disabled metrics stay in the list; evaluation skips them."""
    for chosen in (turn_metrics, case_metrics, agent_metrics):
        if chosen is not None:
            return list(chosen)
    return []


def evaluate_metrics(
    metrics: Sequence[AnyMetric],
    inputs: MetricInput,
    *,
    context: EvalContext | None = None,
    registry: MetricRegistry | None = None,
) -> list[MetricResult]:
    """Evaluate every enabled metric, in order. Never raises for a metric's sake."""
    ctx = context or EvalContext()
    reg = registry or REGISTRY
    results = []
    for metric in metrics:
        if not metric.enabled:
            continue
        results.append(_evaluate_sync(metric, inputs, ctx, reg))
    return results


async def aevaluate_metrics(
    metrics: Sequence[AnyMetric],
    inputs: MetricInput,
    *,
    context: EvalContext | None = None,
    registry: MetricRegistry | None = None,
) -> list[MetricResult]:
    """Like :func:`evaluate_metrics`, and also runs async (judge) metrics, concurrently.
    Results keep the order of ``metrics``."""
    ctx = context or EvalContext()
    reg = registry or REGISTRY
    enabled = [m for m in metrics if m.enabled]
    return list(await asyncio.gather(*(_evaluate_async(m, inputs, ctx, reg) for m in enabled)))


def evaluate_metric(
    metric: AnyMetric,
    inputs: MetricInput,
    *,
    context: EvalContext | None = None,
    registry: MetricRegistry | None = None,
) -> MetricResult | None:
    """One metric; ``None`` when it is disabled."""
    found = evaluate_metrics([metric], inputs, context=context, registry=registry)
    return found[0] if found else None


# --- internals -------------------------------------------------------------------------


def _evaluate_sync(
    metric: AnyMetric, inputs: MetricInput, ctx: EvalContext, reg: MetricRegistry
) -> MetricResult:
    start = time.perf_counter()
    spec = reg.resolve(metric)
    try:
        spec = _check(metric, spec, inputs)
        if spec.is_async:
            raise MetricError(
                f"metric {metric.display_name!r} is evaluated by an LLM judge (async); "
                "evaluate it with aevaluate_metrics"
            )
        outcome = spec.fn(metric, _prepared(metric, spec, inputs), ctx)
        if inspect.isawaitable(outcome):
            if callable(close := getattr(outcome, "close", None)):
                close()  # a coroutine never awaited
            raise MetricError(f"metric {metric.display_name!r} returned an awaitable")
        return _result(metric, spec, inputs, outcome, start)
    except ResponseRejected as rejected:
        return _rejected_result(metric, spec, inputs, rejected, start)
    except Exception as exc:  # one metric never aborts the others
        return _error_result(metric, spec, exc, start)


async def _evaluate_async(
    metric: AnyMetric, inputs: MetricInput, ctx: EvalContext, reg: MetricRegistry
) -> MetricResult:
    start = time.perf_counter()
    spec = reg.resolve(metric)
    try:
        spec = _check(metric, spec, inputs)
        prepared = _prepared(metric, spec, inputs)
        if spec.is_async or spec.inline:
            outcome = spec.fn(metric, prepared, ctx)
        else:  # CPU-bound (BLEU, METEOR, graders): off the loop, so calls in flight go on
            outcome = await asyncio.wrap_future(sync_worker.submit(spec.fn, metric, prepared, ctx))
        if inspect.isawaitable(outcome):
            outcome = await outcome
        return _result(metric, spec, inputs, outcome, start)
    except ResponseRejected as rejected:
        return _rejected_result(metric, spec, inputs, rejected, start)
    except Exception as exc:  # one metric never aborts the others
        return _error_result(metric, spec, exc, start)


def _check(metric: AnyMetric, spec: MetricSpec | None, inputs: MetricInput) -> MetricSpec:
    if spec is None:
        kind, name = metric_key(metric)
        raise MetricError(
            f"no evaluator is registered for {kind} metric {name!r} "
            "(LLM-judge metrics need the judge module)"
        )
    missing = [field for field in sorted(spec.requires) if not inputs.has(field)]
    if missing:
        needs = ", ".join(INPUT_DESCRIPTIONS[field] for field in missing)
        raise MetricError(f"metric {metric.display_name!r} needs {needs}; this case has none")
    if isinstance(metric, StandardMetric) and metric.response_path and not spec.response_path:
        raise MetricError(f"metric {metric.display_name!r} does not support response_path")
    return spec


def _prepared(metric: AnyMetric, spec: MetricSpec, inputs: MetricInput) -> MetricInput:
    """Apply ``response_path``: the metric then grades the JSON leaf as its response."""
    if not (isinstance(metric, StandardMetric) and metric.response_path and spec.response_path):
        return inputs
    from holodeck_core.metrics.response_path import extract_leaf

    assert inputs.actual_output is not None  # checked by _check (requires actual_output)
    leaf = extract_leaf(inputs.actual_output, metric.response_path)
    return inputs.model_copy(update={"actual_output": leaf})


def _elapsed_ms(start: float) -> int:
    return max(0, round((time.perf_counter() - start) * 1000))


def _result(
    metric: AnyMetric, spec: MetricSpec, inputs: MetricInput, outcome: Score, start: float
) -> MetricResult:
    if not isinstance(outcome, Score):
        raise MetricError(f"metric function returned {type(outcome).__name__}, not a Score")
    details: dict[str, Any] = dict(outcome.details)
    score = outcome.score
    raw = outcome.raw_score if outcome.raw_score is not None else score
    threshold = outcome.threshold if outcome.threshold is not None else metric.threshold
    if spec.bounded:
        if score is not None and (-_FLOAT_SLACK <= score < 0.0 or 1.0 < score <= 1 + _FLOAT_SLACK):
            score = min(max(score, 0.0), 1.0)  # BLEU of identical texts: 1.0000000000000004
        if score is None or math.isnan(score) or not 0.0 <= score <= 1.0:
            raise MetricError(f"metric {metric.display_name!r} produced score {score!r}")
        if threshold is None and spec.policy is ThresholdPolicy.DEFAULT:
            threshold = spec.default_threshold
        if outcome.passed is not None:
            passed = outcome.passed
        elif threshold is not None:
            passed = score >= threshold
        elif spec.policy is ThresholdPolicy.RECORD:
            passed = score > 0.0
            details["note"] = NO_THRESHOLD_NOTE
        else:
            passed = score >= 1.0
    else:
        if raw is None or math.isnan(raw):
            raise MetricError(f"metric {metric.display_name!r} produced no value")
        assert threshold is not None  # checked by _check
        score = None
        passed = raw <= threshold
    if "actual_output" in spec.requires and not (inputs.actual_output or "").strip():
        details["empty_response"] = True
    return MetricResult(
        metric_name=metric.display_name,
        kind=spec.kind,
        score=score,
        raw_score=raw,
        threshold=threshold,
        direction=metric.direction,
        unit=spec.unit,
        passed=bool(passed),
        scale="0-1" if spec.bounded else None,
        error=None,
        retry_count=min(max(outcome.retry_count, 0), 3),
        evaluation_time_ms=_elapsed_ms(start),
        model_used=outcome.model_used,
        reasoning=outcome.reasoning,
        fail_on_error=metric.fail_on_error,
        details=details,
    )


def _rejected_result(
    metric: AnyMetric,
    spec: MetricSpec | None,
    inputs: MetricInput,
    rejected: ResponseRejected,
    start: float,
) -> MetricResult:
    if spec is None or not spec.bounded:
        return _error_result(metric, spec, rejected, start)
    message = str(rejected)
    failed = Score(score=0.0, passed=False, reasoning=message, details={"response_error": message})
    return _result(metric, spec, inputs, failed, start)


def _error_result(
    metric: AnyMetric, spec: MetricSpec | None, exc: Exception, start: float
) -> MetricResult:
    message = str(exc) if isinstance(exc, MetricError) else f"{type(exc).__name__}: {exc}"
    retries = exc.retry_count if isinstance(exc, MetricError) else 0
    model_used = exc.model_used if isinstance(exc, MetricError) else None
    kind: MetricKind = spec.kind if spec is not None else metric.type
    bounded = spec.bounded if spec is not None else True
    return MetricResult(
        metric_name=metric.display_name,
        kind=kind,
        score=None,
        raw_score=None,
        threshold=metric.threshold,
        direction=metric.direction,
        unit=spec.unit if spec is not None else None,
        passed=False if metric.fail_on_error else None,
        scale="0-1" if bounded else None,
        error=message or type(exc).__name__,
        retry_count=min(max(retries, 0), 3),
        evaluation_time_ms=_elapsed_ms(start),
        model_used=model_used,
        reasoning=None,
        fail_on_error=metric.fail_on_error,
        details={"error_source": EVALUATION_DATA} if isinstance(exc, EvaluationDataError) else {},
    )
