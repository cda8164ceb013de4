"""One metric evaluation's use of the judge (see :mod:`holodeck_core.metrics.judge`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from holodeck_core.metrics.base import EvalContext, Score
from holodeck_core.metrics.judge import JudgeServices, judge_services, serves_logprobs
from holodeck_core.metrics.judge_answer import (
    Check,
    JudgeAnswer,
    JudgeCallError,
    JudgeMetricError,
)
from holodeck_core.metrics.judge_prompts import RenderedPrompt
from holodeck_core.models import LLMProvider

if TYPE_CHECKING:
    from holodeck_core.models.evaluation import GEvalMetric, RAGMetric, StandardMetric

    JudgedMetric = GEvalMetric | RAGMetric | StandardMetric


@dataclass
class JudgeSession:
    """One metric evaluation's use of the judge: the resolved model, the metric's
    ``retry_on_failure`` and ``timeout_ms`` applied to every question, and the retries,
    requests and prompts added up for the result."""

    services: JudgeServices
    model: LLMProvider
    retries: int
    timeout: float
    retry_count: int = 0
    requests: int = 0
    cached: int = 0
    prompts: list[str] = field(default_factory=list)
    fingerprints: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, ctx: EvalContext, metric: JudgedMetric) -> JudgeSession:
        services = judge_services(ctx)
        model = services.resolve_model(metric.model)
        retries = metric.retry_on_failure
        return cls(
            services=services,
            model=model,
            retries=services.default_retries() if retries is None else retries,
            timeout=(
                metric.timeout_ms / 1000
                if metric.timeout_ms is not None
                else services.scheduler.policy.timeout
            ),
        )

    @property
    def logprobs_available(self) -> bool:
        return serves_logprobs(self.model)

    async def ask(
        self,
        prompt: RenderedPrompt,
        *,
        logprobs: bool = False,
        check: Check | None = None,
        memo: bool = False,
    ) -> JudgeAnswer:
        try:
            answer = await self.services.ask(
                self.model,
                prompt,
                retries=self.retries,
                timeout=self.timeout,
                logprobs=logprobs,
                check=check,
                memo=memo,
            )
        except JudgeCallError as exc:
            self.retry_count += exc.retries
            raise JudgeMetricError(
                f"judge {self.model.name!r} failed: {exc}",
                retry_count=self.retry_count,
                model_used=self.model.name,
                transient=exc.transient,
            ) from exc
        self.retry_count += answer.retries
        self.requests += answer.requests
        self.cached += 1 if answer.cached else 0
        if prompt.label not in self.prompts:
            self.prompts.append(prompt.label)
        fingerprint = answer.system_fingerprint
        if fingerprint and fingerprint not in self.fingerprints:
            self.fingerprints.append(fingerprint)
        return answer

    def details(self) -> dict[str, Any]:
        """Provenance for ``MetricResult.details``."""
        out: dict[str, Any] = {
            "judge": {"provider": self.model.provider.value, "name": self.model.name},
            "judge_prompts": list(self.prompts),
            "judge_requests": self.requests,
            "judge_cache_hits": self.cached,
        }
        if self.fingerprints:
            out["system_fingerprint"] = self.fingerprints[0]
        return out

    def result(
        self,
        score: float,
        *,
        raw_score: float | None = None,
        passed: bool | None = None,
        reasoning: str | None = None,
        details: Mapping[str, Any] | None = None,
        threshold: float | None = None,
    ) -> Score:
        """The metric's :class:`Score`, with the judge, retries and provenance filled in."""
        return Score(
            score=score,
            raw_score=raw_score,
            passed=passed,
            threshold=threshold,
            reasoning=reasoning,
            details={**self.details(), **(details or {})},
            model_used=self.model.name,
            retry_count=self.retry_count,
        )
