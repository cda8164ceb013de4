"""Re-score stored outputs with the current metric configuration (``holodeck rescore``).

Nothing is sent to the agent: each stored :class:`TestResult` (and each turn of a multi-turn
case) is scored again from what the run recorded -- ``agent_response``, ``ground_truth``,
``tool_invocations``, ``expected_tools``, ``token_usage``, ``model_time_ms`` -- with the
metrics as configured now. With the judge services' cache in the context, only the judge
questions the cache cannot answer cost a call: same outputs and judge configuration = no
call, a changed threshold = no call, a changed criteria = new calls.

``retrieval_context`` (not stored in results) and the agent's model name (for ``cost``) come
from the current :class:`Agent` when one is given, as in the runner. Stored tool matching
(``tools_matched`` and its messages in ``errors``) is kept as it was.

Status follows the runner (``holodeck_core.runner.evaluate``): a case that errored in its
execution (``error_source: execution``, or no response at all) is carried over unchanged --
a rerun, not a rescore, can fix it; otherwise ERROR (``error_source: evaluation``) when a
``fail_on_error`` metric errored, FAIL when a metric or the tool expectations failed (or an
empty response had nothing to evaluate it), else PASS.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from holodeck_core.calls.ledger import charged_to
from holodeck_core.metrics.base import EvalContext, MetricInput
from holodeck_core.metrics.registry import (
    AnyMetric,
    MetricRegistry,
    aevaluate_metrics,
    select_metrics,
)
from holodeck_core.metrics.verdict import (
    EMPTY_RESPONSE_ERROR,
    METRIC_ERROR_PREFIX,
    case_status,
    error_source,
    turns_verdict,
)
from holodeck_core.models.agent import Agent
from holodeck_core.models.results import MetricResult, Status, TestResult, TurnResult
from holodeck_core.models.test_case import TestCaseModel, Turn


async def rescore_results(
    results: Sequence[TestResult],
    metrics: Agent | Sequence[AnyMetric],
    *,
    context: EvalContext,
    registry: MetricRegistry | None = None,
    concurrency: int = 8,
) -> list[TestResult]:
    """New results with freshly computed metric results, ``passed`` and ``status``.

    ``metrics``: the current :class:`Agent` (metric precedence turn > case > agent; stored
    results are matched to its cases by ``test_id``, else name, else input), or one metric
    list applied to every case and turn (then without retrieval context or model name).
    ``context`` carries the judge services (:mod:`holodeck_core.metrics.judge`); ``registry``
    must hold the judge metrics (default: the global one). Order is kept, nothing mutated.
    """
    limit = asyncio.Semaphore(max(1, concurrency))
    cases = _CaseIndex(metrics.test_cases or []) if isinstance(metrics, Agent) else None
    scorer = _Scorer(metrics, context, registry)

    async def one(result: TestResult) -> TestResult:
        async with limit:
            with charged_to(result.test_id or ""):  # its judge calls are the case's cost
                return await scorer.rescore(result, cases.find(result) if cases else None)

    return list(await asyncio.gather(*(one(r) for r in results)))


class _CaseIndex:
    def __init__(self, cases: Sequence[TestCaseModel]) -> None:
        self.by_id = {c.id: c for c in cases if c.id}
        self.by_name = {c.name: c for c in cases if c.name}
        self.by_input = {c.input: c for c in cases if c.input}

    def find(self, result: TestResult) -> TestCaseModel | None:
        if result.test_id and result.test_id in self.by_id:
            return self.by_id[result.test_id]
        if result.test_name and result.test_name in self.by_name:
            return self.by_name[result.test_name]
        return self.by_input.get(result.test_input)


def _case_turn(case: TestCaseModel | None, index: int) -> Turn | None:
    if case is None or case.turns is None or index >= len(case.turns):
        return None
    return case.turns[index]


def _kept_errors(errors: Sequence[str]) -> list[str]:
    """Errors that scoring did not produce (tool expectations): scoring's own are redone."""
    return [
        e for e in errors if not e.startswith(METRIC_ERROR_PREFIX) and e != EMPTY_RESPONSE_ERROR
    ]


class _Scorer:
    def __init__(
        self,
        source: Agent | Sequence[AnyMetric],
        ctx: EvalContext,
        registry: MetricRegistry | None,
    ) -> None:
        self.agent = source if isinstance(source, Agent) else None
        self.metrics = None if isinstance(source, Agent) else list(source)
        self.ctx = ctx
        self.registry = registry

    def _select(self, case: TestCaseModel | None, turn: Turn | None) -> list[AnyMetric]:
        if self.metrics is not None:
            return list(self.metrics)
        assert self.agent is not None
        evaluations = self.agent.evaluations
        return select_metrics(
            evaluations.metrics if evaluations is not None else None,
            case.evaluations if case is not None else None,
            turn.evaluations if turn is not None else None,
        )

    async def _score(self, metrics: list[AnyMetric], inputs: MetricInput) -> list[MetricResult]:
        if not metrics:
            return []
        return await aevaluate_metrics(metrics, inputs, context=self.ctx, registry=self.registry)

    def _inputs(self, result: TestResult, **fields: Any) -> MetricInput:
        retrieval = fields.pop("retrieval")
        return MetricInput(
            retrieval_context=tuple(retrieval) if retrieval is not None else None,
            model=self.agent.model.name if self.agent is not None else None,
            test_case_name=result.test_name or result.test_id,
            **fields,
        )

    async def rescore(self, result: TestResult, case: TestCaseModel | None) -> TestResult:
        if result.error_source == "execution" or (
            result.turns is None and result.agent_response is None
        ):
            return result
        if result.turns is not None:
            return await self._rescore_turns(result, case)
        inputs = self._inputs(
            result,
            input=result.test_input,
            actual_output=result.agent_response,
            expected_output=result.ground_truth,
            retrieval=case.retrieval_context if case is not None else None,
            tool_invocations=tuple(result.tool_invocations),
            expected_tools=tuple(result.expected_tools) if result.expected_tools else None,
            latency_ms=float(result.model_time_ms) if result.model_time_ms is not None else None,
            token_usage=result.token_usage,
        )
        scored = await self._score(self._select(case, None), inputs)
        errors = _kept_errors(result.errors)
        status = case_status(scored, result.tools_matched, result.agent_response, errors)
        source = error_source(scored, status)
        return _rebuilt(result, status, source, metric_results=scored, errors=errors)

    async def _rescore_turns(self, result: TestResult, case: TestCaseModel | None) -> TestResult:
        assert result.turns is not None
        turns: list[TurnResult] = []
        verdicts: list[tuple[Status, str | None]] = []
        for index, turn in enumerate(result.turns):
            spec = _case_turn(case, index)
            inputs = self._inputs(
                result,
                input=turn.input,
                actual_output=turn.response,
                expected_output=turn.ground_truth,
                retrieval=spec.retrieval_context if spec is not None else None,
                tool_invocations=tuple(turn.tool_invocations),
                expected_tools=tuple(turn.expected_tools) if turn.expected_tools else None,
                latency_ms=float(turn.execution_time_ms),
                token_usage=turn.token_usage,
                turn_index=index,
                turn_config=dict(spec.turn_config or {}) if spec is not None else {},
            )
            scored = await self._score(self._select(case, spec), inputs)
            errors = _kept_errors(turn.errors)
            status = case_status(scored, turn.tools_matched, turn.response, errors)
            verdicts.append((status, error_source(scored, status)))
            turns.append(
                turn.model_copy(
                    update={
                        "metric_results": scored,
                        "errors": errors,
                        "passed": status is Status.PASS,
                    }
                )
            )
        status, source = turns_verdict(verdicts)
        errors = [f"[turn {t.turn_index}] {e}" for t in turns for e in t.errors]
        return _rebuilt(result, status, source, turns=turns, errors=errors)


def _rebuilt(result: TestResult, status: Status, source: str | None, **update: Any) -> TestResult:
    update.update(status=status, passed=status is Status.PASS, error_source=source)
    return TestResult.model_validate(result.model_copy(update=update).model_dump())
