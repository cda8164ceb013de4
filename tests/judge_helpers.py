"""Judges, scripted judge replies and runners shared by the ``test_judge_*`` modules: a judge model
on the loopback server, the rules that script its G-Eval steps, scores and RAG verdicts, metric
builders, and ``judge_run`` / ``one`` that score cases through the real SDK clients."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from holodeck_core.calls.scheduler import CallScheduler, RetryPolicy
from holodeck_core.metrics import MetricInput, aevaluate_metrics
from holodeck_core.metrics.judge import JudgeServices
from holodeck_core.metrics.judge_cache import JudgeCache
from holodeck_core.metrics.judge_metrics import register_judge_metrics
from holodeck_core.metrics.registry import REGISTRY, AnyMetric, MetricRegistry
from holodeck_core.models import LLMProvider
from holodeck_core.models.evaluation import GEvalMetric, RAGMetric
from holodeck_core.models.results import MetricResult
from holodeck_core.testing import ModelServer


def with_judge_metrics() -> MetricRegistry:
    """A new registry: the built-in metrics plus the judge metrics (``REGISTRY`` untouched)."""
    registry = MetricRegistry()
    for spec in REGISTRY.specs():
        registry.add(spec)
    return register_judge_metrics(registry)


def cache_entries(directory: Path) -> int:
    """How many answers a judge cache folder holds (one JSON file per entry)."""
    return sum(1 for _ in directory.glob("??/*.json")) if directory.is_dir() else 0


JUDGED = with_judge_metrics()
STEPS = ["Check that the answer is polite", "Check that the answer is correct"]


def openai_judge(server: ModelServer, name: str = "judge", **extra: Any) -> LLMProvider:
    return LLMProvider.model_validate(
        {
            "provider": "openai",
            "name": name,
            "endpoint": server.openai_base_url,
            "api_key": "sk-test",
            **extra,
        }
    )


def scheduler() -> CallScheduler:
    # Four attempts per call at the scheduler level: the judge must not let it retry.
    return CallScheduler(8, RetryPolicy(max_attempts=4, base_delay=0.01, timeout=5))


def rule(name: str, task: str, **action: Any) -> dict[str, Any]:
    return {"name": name, "match": {"user": task}, **action}


STEPS_RULE = rule("steps", "Task: write G-Eval evaluation steps", json={"steps": STEPS})


def score_rule(score: int, name: str = "score", pattern: str = "", **extra: Any) -> dict[str, Any]:
    task = "Task: score a test case" + (f"[\\s\\S]*{pattern}" if pattern else "")
    return rule(name, task, json={"score": score, "reason": f"scored {score}"}, **extra)


def geval(**options: Any) -> GEvalMetric:
    return GEvalMetric.model_validate({"name": "Politeness", "criteria": "polite", **options})


def rag(metric_type: str, **options: Any) -> RAGMetric:
    return RAGMetric.model_validate({"metric_type": metric_type, **options})


def case(output: str = "Thanks, it is Paris.", **fields: Any) -> MetricInput:
    return MetricInput(input="What is the capital of France?", actual_output=output, **fields)


async def evaluate_all(
    services: JudgeServices,
    metrics: Sequence[AnyMetric],
    cases: Sequence[MetricInput],
    registry: MetricRegistry = JUDGED,
) -> list[list[MetricResult]]:
    ctx = services.context()
    return list(
        await asyncio.gather(
            *(aevaluate_metrics(metrics, c, context=ctx, registry=registry) for c in cases)
        )
    )


def judge_run(
    server: ModelServer,
    metrics: Sequence[AnyMetric],
    cases: Sequence[MetricInput],
    *,
    cache: JudgeCache | None = None,
    model: LLMProvider | None = None,
) -> tuple[list[list[MetricResult]], JudgeServices]:
    async def go() -> tuple[list[list[MetricResult]], JudgeServices]:
        services = JudgeServices(
            scheduler(), default_model=model or openai_judge(server), cache=cache
        )
        async with services:
            return await evaluate_all(services, metrics, cases), services

    return asyncio.run(go())


def one(server: ModelServer, metric: AnyMetric, inputs: MetricInput, **kw: Any) -> MetricResult:
    results, _ = judge_run(server, [metric], [inputs], **kw)
    assert len(results[0]) == 1
    return results[0][0]


def by_rule(server: ModelServer) -> dict[str, int]:
    return dict(server.stats()["by_rule"])


NODE = "Task: judge the relevance of a retrieved context node"
CONTEXT = ("Paris is the capital of France. It has two million people.", "Bananas are yellow.")


def verdicts(*values: str, key: str | None = None) -> dict[str, Any]:
    items = [
        {**({key: f"{key} {i}"} if key else {}), "verdict": v, "reason": f"because {i}"}
        for i, v in enumerate(values, 1)
    ]
    return {"verdicts": items}


RAG_RULES = {
    "rules": [
        rule("claims", "Task: extract the claims", json={"claims": ["c1", "c2", "c3"]}),
        rule("faith", "Task: check claims", json=verdicts("yes", "no", "idk")),
        rule("stmts", "Task: split a response", json={"statements": ["s1", "s2", "s3", "s4"]}),
        rule(
            "relevant",
            "Task: judge the relevance of statements",
            json=verdicts("yes", "yes", "no", "idk"),
        ),
        rule(
            "node_paris",
            f"{NODE}[\\s\\S]*Paris is the capital",
            json=verdicts("yes", "no", key="statement"),
        ),
        rule("node_banana", f"{NODE}[\\s\\S]*Bananas", json=verdicts("no", key="statement")),
        rule("precision", "Task: judge ranked context nodes", json=verdicts("yes", "no", "yes")),
        rule(
            "recall",
            "Task: attribute the expected output",
            json=verdicts("yes", "no", "yes", "yes", key="sentence"),
        ),
    ]
}
