"""Score one :class:`CaseRun` against its case: metrics, expected tools, and a status.

PASS: every metric and tool expectation met. FAIL: ran, missed one. ERROR: could not be
evaluated: the agent, a tool loop, a file or the infrastructure failed (``execution``), or a
metric with ``fail_on_error`` could not run (``evaluation``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from holodeck_core.metrics import EvalContext, MetricInput, aevaluate_metrics, select_metrics
from holodeck_core.metrics.tool_matching import ToolMatchReport, match_expected_tools
from holodeck_core.metrics.verdict import case_status, error_source, turns_verdict
from holodeck_core.models import (
    MetricResult,
    Status,
    TestCaseModel,
    TestResult,
    ToolInvocation,
    Turn,
    TurnResult,
)
from holodeck_core.models.evaluation import Metric
from holodeck_core.models.test_case import ExpectedToolSpec
from holodeck_core.runner.case_run import CaseRun, TurnRun

MULTI_TURN_SEPARATOR = "\n---\n"


class CaseEvaluator:
    def __init__(
        self,
        agent_metrics: Sequence[Metric] | None,
        model_name: str,
        context: EvalContext,
        retrieval_tools: frozenset[str] = frozenset(),
    ) -> None:
        self.agent_metrics = list(agent_metrics) if agent_metrics is not None else None
        self.model_name = model_name
        self.context = context
        self.retrieval_tools = retrieval_tools

    async def evaluate(self, case: TestCaseModel, run: CaseRun) -> TestResult:
        if case.turns is None:
            return await self._single(case, run)
        return await self._multi(case, run)

    async def _single(self, case: TestCaseModel, run: CaseRun) -> TestResult:
        turn = run.turns[0]
        base = _base(case, run, case.input or "")
        if turn.error:
            return _errored(base, run, expected=case.expected_tools)
        metrics = await self._metrics(
            select_metrics(self.agent_metrics, case.evaluations), case, turn, 0, None
        )
        verdict = _Verdict.of(metrics, case.expected_tools, turn)
        return TestResult(
            **base,
            agent_response=turn.response,
            tool_calls=[i.name for i in turn.tool_invocations],
            tool_invocations=turn.tool_invocations,
            expected_tools=case.expected_tools,
            tools_matched=verdict.tools_matched,
            metric_results=metrics,
            passed=verdict.status is Status.PASS,
            status=verdict.status,
            error_source=verdict.source,
            errors=verdict.errors,
        )

    async def _multi(self, case: TestCaseModel, run: CaseRun) -> TestResult:
        turns = case.turns or []
        base = _base(case, run, MULTI_TURN_SEPARATOR.join(t.input for t in turns))
        if run.error:
            return _errored(base, run, _turn_results(turns, run.turns))
        evaluated: list[TurnResult] = []
        statuses: list[tuple[Status, str | None]] = []
        for index, (spec, turn) in enumerate(zip(turns, run.turns, strict=True)):
            metrics = await self._metrics(
                select_metrics(self.agent_metrics, case.evaluations, spec.evaluations),
                case,
                turn,
                index,
                spec,
            )
            verdict = _Verdict.of(metrics, spec.expected_tools, turn)
            statuses.append((verdict.status, verdict.source))
            evaluated.append(
                TurnResult(
                    turn_index=index,
                    input=spec.input,
                    response=turn.response,
                    ground_truth=spec.ground_truth,
                    expected_tools=spec.expected_tools,
                    tool_calls=[i.name for i in turn.tool_invocations],
                    tool_invocations=turn.tool_invocations,
                    tools_matched=verdict.tools_matched,
                    arg_match_details=verdict.report.arg_match_details()
                    if verdict.report
                    else None,
                    metric_results=metrics,
                    passed=verdict.status is Status.PASS,
                    execution_time_ms=turn.model_ms,
                    token_usage=turn.usage,
                    errors=verdict.errors,
                )
            )
        status, source = turns_verdict(statuses)
        errors = [f"[turn {t.turn_index}] {e}" for t in evaluated for e in t.errors]
        return TestResult(
            **base,
            agent_response=MULTI_TURN_SEPARATOR.join(t.response or "" for t in run.turns),
            tool_calls=[i.name for t in run.turns for i in t.tool_invocations],
            tool_invocations=[i for t in run.turns for i in t.tool_invocations],
            passed=status is Status.PASS,
            status=status,
            error_source=source,
            errors=errors,
            turns=evaluated,
        )

    async def _metrics(
        self,
        metrics: list[Metric],
        case: TestCaseModel,
        turn: TurnRun,
        index: int,
        spec: object,
    ) -> list[MetricResult]:
        if not metrics:
            return []
        ground_truth = getattr(spec, "ground_truth", None) if spec else case.ground_truth
        retrieval = getattr(spec, "retrieval_context", None) if spec else case.retrieval_context
        if retrieval is None:
            retrieval = self._retrieved(turn) or None
        expected = getattr(spec, "expected_tools", None) if spec else case.expected_tools
        inputs = MetricInput(
            input=turn.input,
            actual_output=turn.response,
            expected_output=ground_truth,
            retrieval_context=tuple(retrieval) if retrieval is not None else None,
            tool_invocations=tuple(turn.tool_invocations),
            expected_tools=tuple(expected) if expected is not None else None,
            latency_ms=float(turn.model_ms),
            token_usage=turn.usage,
            model=self.model_name,
            test_case_name=case.name or case.id,
            turn_index=index,
            turn_config=(getattr(spec, "turn_config", None) or {}) if spec else {},
        )
        return await aevaluate_metrics(metrics, inputs, context=self.context)

    def _retrieved(self, turn: TurnRun) -> list[str]:
        """Without a ``retrieval_context`` on the case, what the agent's retrieval tools
        (vectorstore, hierarchical_document, MCP with ``is_retrieval``) returned is used."""
        texts: list[str] = []
        for call in turn.tool_invocations:
            if call.error is not None:
                continue
            if call.retrieval_context is not None:
                texts.extend(call.retrieval_context)
            elif call.name in self.retrieval_tools:
                texts.append(_retrieved_text(call.result))
        return texts


def _retrieved_text(result: object) -> str:
    return result if isinstance(result, str) else json.dumps(result, default=str)


def _base(case: TestCaseModel, run: CaseRun, test_input: str) -> dict[str, object]:
    return {
        "test_id": case.id,
        "test_name": case.name,
        "test_input": test_input or "(empty)",
        "processed_files": [f for t in run.turns for f in t.processed_files],
        "ground_truth": case.ground_truth,
        "execution_time_ms": run.execution_time_ms,
        "timestamp": run.timestamp,
        "token_usage": run.usage,
        "model_time_ms": run.model_ms,
        "tags": case.tags,
        "metadata": case.metadata,
        "weight": case.weight,
        "notes": run.notes or None,
    }


def _errored(
    base: dict[str, object],
    run: CaseRun,
    turns: list[TurnResult] | None = None,
    *,
    expected: Sequence[ExpectedToolSpec] | None = None,
) -> TestResult:
    """An ERROR case keeps its expected tools, matched against the calls it did make (as
    HoloDeck's executor does: ``tools_matched: false`` when they were not all made)."""
    invocations = [i for t in run.turns for i in t.tool_invocations]
    return TestResult(
        **base,
        agent_response=None,
        tool_calls=[i.name for i in invocations],
        tool_invocations=invocations,
        expected_tools=list(expected) if expected is not None else None,
        tools_matched=_matched(expected, invocations),
        passed=False,
        status=Status.ERROR,
        error_source="execution",
        errors=[run.error or "the case could not be run"],
        turns=turns,
    )


def _matched(
    expected: Sequence[ExpectedToolSpec] | None, invocations: Sequence[ToolInvocation]
) -> bool | None:
    return None if expected is None else match_expected_tools(expected, invocations).matched


def _turn_results(specs: Sequence[Turn], runs: list[TurnRun]) -> list[TurnResult]:
    return [
        TurnResult(
            turn_index=index,
            input=turn.input,
            response=turn.response,
            ground_truth=spec.ground_truth,
            expected_tools=spec.expected_tools,
            tool_calls=[i.name for i in turn.tool_invocations],
            tool_invocations=turn.tool_invocations,
            tools_matched=_matched(spec.expected_tools, turn.tool_invocations),
            passed=False,
            execution_time_ms=turn.model_ms,
            token_usage=turn.usage,
            errors=[turn.error] if turn.error else [],
            skipped=turn.error_kind == "skipped",
        )
        for index, (spec, turn) in enumerate(zip(specs, runs, strict=False))
    ]


@dataclass(frozen=True)
class _Verdict:
    """A turn's (or single-turn case's) expected-tool match and status."""

    report: ToolMatchReport | None
    status: Status
    source: str | None
    errors: list[str]

    @property
    def tools_matched(self) -> bool | None:
        return self.report.matched if self.report else None

    @classmethod
    def of(
        cls,
        metrics: list[MetricResult],
        expected: Sequence[ExpectedToolSpec] | None,
        turn: TurnRun,
    ) -> _Verdict:
        report = (
            match_expected_tools(expected, turn.tool_invocations) if expected is not None else None
        )
        errors = list(report.missing) if report else []
        status = case_status(metrics, report.matched if report else None, turn.response, errors)
        return cls(report, status, error_source(metrics, status), errors)
