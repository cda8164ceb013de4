"""Builders shared by the ``test_metrics_*`` modules: run one metric on inputs, a standard metric
from options, a tool call, and the ticket schema the JSON and empty-response tests validate."""

from __future__ import annotations

from typing import Any

from holodeck_core.metrics import MetricInput, evaluate_metric
from holodeck_core.models.evaluation import StandardMetric
from holodeck_core.models.results import MetricResult, ToolInvocation


def run(metric: Any, **inputs: Any) -> MetricResult:
    result = evaluate_metric(metric, MetricInput(**inputs))
    assert result is not None
    return result


def std(metric: str, **options: Any) -> StandardMetric:
    return StandardMetric.model_validate({"metric": metric, **options})


def call(name: str, **args: Any) -> ToolInvocation:
    return ToolInvocation(name=name, args=args)


TICKET_SCHEMA = {
    "type": "object",
    "required": ["category", "urgency"],
    "additionalProperties": False,
    "properties": {
        "category": {"enum": ["billing", "technical"]},
        "urgency": {"enum": ["low", "high"]},
    },
}
