"""Metrics: one registry for deterministic, code and LLM-judge metrics.

Entry points: :func:`evaluate_metrics` (sync), :func:`aevaluate_metrics` (async, also runs
judge metrics), :func:`select_metrics` (precedence turn > case > agent) and
:func:`match_expected_tools` (shared with the runner). See :mod:`.registry` for the rules
every result follows and for how a judge metric plugs in.

Built-in metrics, judges included, register on import; their libraries (sacrebleu,
rouge-score, nltk, jsonschema, rapidfuzz, the model SDKs) load on first use. Judge metrics need
:class:`~holodeck_core.metrics.judge.JudgeServices` in the evaluation context.
"""

from holodeck_core.calls.prices import PriceTable, load_price_table
from holodeck_core.metrics import code_graders, matching, operational, text, tool_matching
from holodeck_core.metrics.base import (
    EvalContext,
    InputField,
    MetricError,
    MetricInput,
    ResponseRejected,
    Score,
)
from holodeck_core.metrics.code_graders import (
    GraderContext,
    GraderResult,
    load_grader,
)
from holodeck_core.metrics.judge_metrics import register_judge_metrics
from holodeck_core.metrics.registry import (
    REGISTRY,
    AnyMetric,
    MetricRegistry,
    MetricSpec,
    ThresholdPolicy,
    aevaluate_metrics,
    evaluate_metric,
    evaluate_metrics,
    metric_key,
    select_metrics,
)
from holodeck_core.metrics.tool_matching import (
    ExpectationResult,
    ToolMatchReport,
    match_expected_tools,
)

register_judge_metrics()

__all__ = [
    "REGISTRY",
    "AnyMetric",
    "EvalContext",
    "ExpectationResult",
    "GraderContext",
    "GraderResult",
    "InputField",
    "MetricError",
    "MetricInput",
    "MetricRegistry",
    "MetricSpec",
    "PriceTable",
    "ResponseRejected",
    "Score",
    "ThresholdPolicy",
    "ToolMatchReport",
    "aevaluate_metrics",
    "code_graders",
    "evaluate_metric",
    "evaluate_metrics",
    "load_grader",
    "load_price_table",
    "match_expected_tools",
    "matching",
    "metric_key",
    "operational",
    "select_metrics",
    "text",
    "tool_matching",
]
