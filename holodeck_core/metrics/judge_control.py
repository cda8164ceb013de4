"""Judge drift (``evaluations.judge_control: FILE``): fixed (input, output, expected) rows
that the agent's judge metrics score again on every run, never from the judge cache, so a
change in the judge itself (a new model snapshot, a changed provider) shows as a change of
these scores (``v_judge_drift``, the ``judge_drift`` check).

A row may carry people's verdicts per judge metric (``human``: ``passed`` and/or a 0-1
``score``), so the judge is measured against people on every run, not only against its own first
scores: ``v_judge_control_agreement`` (Cohen's κ, false pass/fail rates, Spearman rho, mean bias
per run, metric and judge, as ``v_judge_agreement`` computes them) and the ``judge_drift``
check's description.

The file::

    rows:
      - {id: refund-ok, input: "Can I get a refund?", output: "Yes, within 30 days.",
         expected: "Refunds within 30 days.", retrieval_context: ["Refunds: 30 days."],
         human: {faithfulness: {passed: true, score: 0.9}}}
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from pydantic import Field, model_validator

from holodeck_core.calls.scheduler import CallScheduler
from holodeck_core.config.yaml_source import load_yaml_model
from holodeck_core.errors import ConfigError
from holodeck_core.metrics import MetricInput, aevaluate_metrics
from holodeck_core.metrics.judge import JudgeServices
from holodeck_core.metrics.judge_cache import JudgeCache
from holodeck_core.metrics.legacy import LEGACY_REQUIRES
from holodeck_core.models import Agent, JudgeControlScore, LLMProvider
from holodeck_core.models.base import StrictModel
from holodeck_core.models.evaluation import Metric
from holodeck_core.providers.base import ModelClient


class HumanVerdict(StrictModel):
    """A person's verdict on a control row for one metric."""

    passed: bool | None = None
    score: float | None = Field(None, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _something(self) -> HumanVerdict:
        if self.passed is None and self.score is None:
            raise ValueError("give passed (true/false), a 0-1 score, or both")
        return self


class ControlRow(StrictModel):
    id: str = Field(min_length=1)
    input: str
    output: str
    expected: str | None = None
    retrieval_context: list[str] | None = None
    human: dict[str, HumanVerdict] = Field(
        default_factory=dict, description="Metric name → a person's verdict on this row."
    )


class ControlFile(StrictModel):
    rows: list[ControlRow] = Field(min_length=1)


def is_judge_metric(metric: Metric) -> bool:
    return metric.type in ("geval", "rag") or (
        metric.type == "standard" and metric.metric in LEGACY_REQUIRES
    )


def load_control(agent: Agent, resolve: Callable[[str], Path]) -> list[ControlRow]:
    """The rows of ``evaluations.judge_control`` (none when it is not set). Config errors
    (a missing file, a bad row, no judge metric to score them) surface before any call."""
    evaluations = agent.evaluations
    if evaluations is None or evaluations.judge_control is None:
        return []
    path = resolve(evaluations.judge_control)
    if not path.is_file():
        raise ConfigError(
            f"evaluations.judge_control: {path} does not exist; give a YAML file with "
            "rows: [{id, input, output, expected}]"
        )
    rows = load_yaml_model(path, ControlFile).rows
    duplicates = sorted({r.id for r in rows if sum(1 for o in rows if o.id == r.id) > 1})
    if duplicates:
        raise ConfigError(f"duplicate row ids {', '.join(duplicates)}", file=str(path))
    judged = {m.display_name for m in evaluations.metrics if is_judge_metric(m)}
    if not judged:
        raise ConfigError(
            "evaluations.judge_control needs at least one LLM-judge metric (geval, rag or a "
            "legacy judged metric) to re-score its rows"
        )
    for row in rows:
        unknown = sorted(set(row.human) - judged)
        if unknown:
            raise ConfigError(
                f"row {row.id}: human: {', '.join(unknown)} is not a judge metric of the "
                f"agent; use one of {', '.join(sorted(judged))}",
                file=str(path),
            )
    return rows


async def score_control(
    rows: list[ControlRow],
    agent: Agent,
    scheduler: CallScheduler,
    default_model: LLMProvider | None,
    client_factory: Callable[[LLMProvider], ModelClient],
    base_dir: Path,
) -> list[JudgeControlScore]:
    """Every judge metric on every row, with a judge that has no cache."""
    metrics = [
        m for m in (agent.evaluations.metrics if agent.evaluations else []) if is_judge_metric(m)
    ]
    judges = JudgeServices(
        scheduler,
        default_model=default_model,
        cache=JudgeCache(None),
        client_factory=client_factory,
    )
    try:
        context = judges.context(base_dir=base_dir)

        async def one(row: ControlRow) -> list[JudgeControlScore]:
            inputs = MetricInput(
                input=row.input,
                actual_output=row.output,
                expected_output=row.expected,
                retrieval_context=tuple(row.retrieval_context)
                if row.retrieval_context is not None
                else None,
            )
            results = await aevaluate_metrics(metrics, inputs, context=context)
            scores = []
            for r in results:
                human = row.human.get(r.metric_name)
                scores.append(
                    JudgeControlScore(
                        control_id=row.id,
                        metric_name=r.metric_name,
                        judge_model=r.model_used,
                        score=r.score if r.error is None else None,
                        passed=r.passed if r.error is None else None,
                        human_passed=human.passed if human else None,
                        human_score=human.score if human else None,
                        error=r.error,
                    )
                )
            return scores

        scored = await asyncio.gather(*map(one, rows))
    finally:
        await judges.aclose()
    return [score for row in scored for score in row]
