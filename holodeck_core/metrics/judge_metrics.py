"""Plugging the LLM-judge metrics into a registry.

:mod:`holodeck_core.metrics` registers them in ``REGISTRY`` on import (with the built-in
metrics); :func:`register_judge_metrics` adds them to another registry. Keys:
G-Eval ``("geval", "geval")``; RAG ``("rag", metric_type)``; legacy 1-5 metrics
``("standard", "groundedness" | "relevance" | "coherence" | "fluency")``. Judge metrics
without a threshold pass at 0.5 (docs/holodeck-fidelity.md: the RAG default).
"""

from __future__ import annotations

from collections.abc import Sequence

from holodeck_core.metrics.base import InputField
from holodeck_core.metrics.geval import geval
from holodeck_core.metrics.legacy import LEGACY_REQUIRES, legacy_judge
from holodeck_core.metrics.rag import RAG_METRICS
from holodeck_core.metrics.registry import (
    REGISTRY,
    MetricFn,
    MetricRegistry,
    MetricSpec,
    ThresholdPolicy,
)
from holodeck_core.models.evaluation import METRIC_THRESHOLDS
from holodeck_core.models.results import MetricKind


def _spec(
    name: str, kind: MetricKind, fn: MetricFn, requires: Sequence[InputField], doc: str
) -> MetricSpec:
    return MetricSpec(
        name=name,
        kind=kind,
        fn=fn,
        requires=frozenset(requires),
        policy=ThresholdPolicy.DEFAULT,
        default_threshold=METRIC_THRESHOLDS[kind if kind != "standard" else name],
        description=doc,
    )


def judge_specs() -> list[MetricSpec]:
    """Every LLM-judge metric as a :class:`MetricSpec`."""
    specs = [_spec("geval", "geval", geval, (), "G-Eval: a form-filling LLM judge")]
    for name, (fn, requires) in RAG_METRICS.items():
        specs.append(_spec(name, "rag", fn, requires, (fn.__doc__ or "").split("\n")[0]))
    for name, requires in LEGACY_REQUIRES.items():
        specs.append(_spec(name, "standard", legacy_judge, requires, f"legacy {name}, judged 1-5"))
    return specs


def register_judge_metrics(registry: MetricRegistry | None = None) -> MetricRegistry:
    """Add the judge metrics to ``registry`` (default: the global ``REGISTRY``).
    Idempotent; refuses to replace a different metric registered under the same key."""
    target = registry if registry is not None else REGISTRY
    for spec in judge_specs():
        existing = target.get(spec.kind, spec.name)
        if existing is None:
            target.add(spec)
        elif existing.fn is not spec.fn:
            raise ValueError(f"{spec.kind} metric {spec.name!r} is already registered")
    return target
