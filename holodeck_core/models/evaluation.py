"""Metric configuration, discriminated by ``type`` (standard, rag, geval, code).

A superset of HoloDeck 0.7.1: every HoloDeck option parses, and options HoloDeck accepted but
ignored (``enabled``, ``retry_on_failure``, ``timeout_ms``, ``custom_prompt``, ``scale``,
``fail_on_error``) are honoured by our metrics."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from holodeck_core import defaults
from holodeck_core.models.base import StrictModel
from holodeck_core.models.llm import LLMProvider
from holodeck_core.models.unused_blocks import OptimizerConfig

LEGACY_JUDGE_METRICS = ("groundedness", "relevance", "coherence", "fluency")
"""HoloDeck's legacy AI metrics: judged on 1-5 and normalized as (s - 1) / 4."""

StandardMetricName = Literal[
    # HoloDeck 0.7.1
    "bleu",
    "rouge",
    "meteor",
    "equality",
    "numeric",
    "groundedness",
    "relevance",
    "coherence",
    "fluency",
    # ours
    "exact_match",
    "contains",
    "regex",
    "json_valid",
    "json_schema",
    "tool_correctness",
    "latency",
    "cost",
]
LOWER_IS_BETTER_METRICS = frozenset({"latency", "cost"})
HOLODECK_STANDARD_METRICS = frozenset(
    {"bleu", "rouge", "meteor", "equality", "numeric", *LEGACY_JUDGE_METRICS}
)
"""The standard metrics HoloDeck 0.7.1 knows (the others above are ours)."""

METRIC_THRESHOLDS: Mapping[str, float] = dict.fromkeys(
    ("geval", "rag", "code", *LEGACY_JUDGE_METRICS), defaults.JUDGED_METRIC_THRESHOLD
)
"""The one table of default thresholds: metric type (or standard metric name) -> the threshold
applied when a metric sets none. Standard metrics absent from it pass only at 1.0 (exact
checks) or record their score (bleu, rouge, meteor); ``latency`` and ``cost`` need one (a
maximum). Every threshold is checked once, when the config is loaded
(:meth:`_MetricBase._threshold_fits`)."""


class Direction(StrEnum):
    """Which way a threshold points: a minimum (higher is better) or a maximum."""

    HIGHER_IS_BETTER = "higher_is_better"
    LOWER_IS_BETTER = "lower_is_better"


class _MetricBase(StrictModel):
    threshold: float | None = None
    enabled: bool = True
    fail_on_error: bool = False
    model: LLMProvider | None = None
    retry_on_failure: int | None = Field(None, ge=1, le=3)
    timeout_ms: int | None = Field(None, gt=0)

    @property
    def display_name(self) -> str:
        raise NotImplementedError

    @property
    def direction(self) -> Direction:
        return Direction.HIGHER_IS_BETTER

    @model_validator(mode="after")
    def _threshold_fits(self) -> _MetricBase:
        """Scores are 0-1, so a threshold is too; a maximum (latency ms, cost USD) is any
        number >= 0 and required."""
        value = self.threshold
        if self.direction is Direction.LOWER_IS_BETTER:
            if value is None:
                raise ValueError(f"metric {self.display_name!r} needs 'threshold' (a maximum)")
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"threshold {value:g} must be a number >= 0 (a maximum)")
        elif value is not None and not (math.isfinite(value) and 0.0 <= value <= 1.0):
            percent = value.is_integer() and 1 < value <= 100
            hint = f" (write {value / 100:g} for {value:g} %)" if percent else ""
            raise ValueError(
                f"threshold {value:g} is outside 0-1: scores are normalized to 0-1{hint}"
            )
        return self


class StandardMetric(_MetricBase):
    """HoloDeck's ``EvaluationMetric`` (``type: standard``)."""

    type: Literal["standard"] = "standard"
    metric: StandardMetricName
    name: str | None = Field(None, description="Display name; defaults to the metric.")
    scale: int | None = Field(None, gt=0)
    custom_prompt: str | None = None
    # equality / exact_match
    case_insensitive: bool = False
    strip_whitespace: bool = False
    strip_punctuation: bool = False
    # numeric
    absolute_tolerance: float = Field(1e-6, ge=0.0)
    relative_tolerance: float = Field(0.0, ge=0.0)
    accept_percent: bool = False
    accept_thousands_separators: bool = False
    response_path: str | None = Field(
        None, description="Grade a JSON leaf of the response: answer, result.value, items[0]."
    )
    # rouge
    variant: Literal["rouge1", "rouge2", "rougeL", "rougeLsum"] | None = None
    # regex / contains
    pattern: str | None = None
    # json_schema
    json_schema: dict[str, Any] | None = None

    @property
    def display_name(self) -> str:
        return self.name or self.metric

    @property
    def direction(self) -> Direction:
        if self.metric in LOWER_IS_BETTER_METRICS:
            return Direction.LOWER_IS_BETTER
        return Direction.HIGHER_IS_BETTER

    @model_validator(mode="after")
    def _options_fit_metric(self) -> StandardMetric:
        if self.variant is not None and self.metric != "rouge":
            raise ValueError("'variant' applies only to metric: rouge")
        if self.metric in ("regex", "contains") and not self.pattern:
            raise ValueError(f"metric {self.metric} needs 'pattern'")
        if self.metric == "regex" and self.pattern:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"'pattern' is not a valid regular expression: {exc}") from exc
        if self.metric == "json_schema" and self.json_schema is None:
            raise ValueError("metric json_schema needs 'json_schema' (a JSON Schema object)")
        return self


EvaluationParam = Literal[
    "input", "actual_output", "expected_output", "context", "retrieval_context"
]


class GEvalMetric(_MetricBase):
    type: Literal["geval"] = "geval"
    name: str = Field(min_length=1)
    criteria: str = Field(min_length=1)
    evaluation_steps: list[str] | None = None
    evaluation_params: list[EvaluationParam] = Field(
        default_factory=lambda: list[EvaluationParam](["actual_output"])
    )
    strict_mode: bool = False
    scale: int = Field(10, gt=0, description="The judge scores 0..scale; normalized by /scale.")
    custom_prompt: str | None = None

    @property
    def display_name(self) -> str:
        return self.name

    @field_validator("evaluation_params")
    @classmethod
    def _non_empty(cls, value: list[EvaluationParam]) -> list[EvaluationParam]:
        if not value:
            raise ValueError("list at least one of the evaluation params")
        return value


RAGMetricType = Literal[
    "faithfulness",
    "answer_relevancy",
    "contextual_relevancy",
    "contextual_precision",
    "contextual_recall",
]


class RAGMetric(_MetricBase):
    type: Literal["rag"] = "rag"
    metric_type: RAGMetricType
    threshold: float | None = METRIC_THRESHOLDS["rag"]
    include_reason: bool = True
    name: str | None = None

    @property
    def display_name(self) -> str:
        return self.name or self.metric_type


class CodeMetric(_MetricBase):
    type: Literal["code"] = "code"
    grader: str = Field(
        pattern=r"^[\w.]+:[\w_]+$", description="module:callable, importable from the agent dir"
    )
    name: str | None = None

    @property
    def display_name(self) -> str:
        return self.name or self.grader.rsplit(":", 1)[-1]


Metric = Annotated[
    StandardMetric | GEvalMetric | RAGMetric | CodeMetric, Field(discriminator="type")
]


class Gate(StrictModel):
    """A run-level gate, in fractions (docs/history.md)."""

    min_pass_rate: float | None = Field(None, ge=0.0, le=1.0)
    max_errors: int | None = Field(None, ge=0)


class EvaluationConfig(StrictModel):
    model: LLMProvider | None = Field(None, description="Default judge for every metric.")
    metrics: list[Metric] = Field(min_length=1)
    optimizer: OptimizerConfig | None = Field(
        None, description="HoloDeck's prompt optimizer: validated as HoloDeck does, not used."
    )
    gate: Gate | None = None
    regression: Literal["significant", "strict"] | None = Field(
        None,
        description="What a regression is: a significant drop (default, docs/architecture.md) or, "
        "strict, any case that passed before and does not now.",
    )
    alpha: float | None = Field(
        None,
        gt=0.0,
        lt=1.0,
        description=f"Significance level of comparisons (default {defaults.ALPHA}).",
    )
    baseline: str | None = Field(
        None,
        min_length=1,
        description="A prompt version whose latest run the no_regression check compares "
        "against (default: the partition's previous run).",
    )
    judge_control: str | None = Field(
        None,
        min_length=1,
        description="A YAML/JSON file of fixed (input, output, expected) rows the judges "
        "re-score on every run, uncached, to measure judge drift.",
    )
    judge_drift_max: float | None = Field(
        None, gt=0.0, le=1.0, description="Mean score change that makes the drift check warn."
    )
    min_judge_kappa: float | None = Field(
        None,
        ge=-1.0,
        le=1.0,
        description="The judge_agreement check warns when a judge's Cohen's kappa against "
        "the human labels (holodeck labels import) is below this.",
    )
    max_error_share: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        description="A run with more than this share of its cases ERROR is an infrastructure "
        "failure, kept out of trends, baselines and comparisons (default 0.5).",
    )
    max_cost_increase: float | None = Field(
        None,
        gt=0.0,
        description="Turns on the cost_regression check: it fails when the cost per passing "
        "case rose by more than this fraction (0.2 = 20 %) against the run no_regression "
        "compares with.",
    )

    @model_validator(mode="after")
    def _unique_names(self) -> EvaluationConfig:
        check_unique_metric_names(self.metrics)
        return self


def check_unique_metric_names(metrics: list[Any]) -> None:
    seen: set[str] = set()
    for metric in metrics:
        name = metric.display_name
        if name in seen:
            raise ValueError(
                f"two metrics are named {name!r}; give one a distinct 'name' so results "
                "can tell them apart"
            )
        seen.add(name)
