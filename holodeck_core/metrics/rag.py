"""RAG metrics (``type: rag``), following DeepEval's published definitions; no embeddings.

Verdicts are ``yes`` / ``no`` (/ ``idk`` where DeepEval has it):

* **faithfulness**: claims extracted from the response, each checked against the retrieval
  context; score = claims not contradicted (``yes`` or ``idk``) / claims; 1.0 without claims.
* **answer_relevancy**: statements of the response, each judged for relevance to the input;
  score = statements not irrelevant (``yes`` or ``idk``) / statements; 1.0 without statements.
* **contextual_relevancy**: per retrieval-context node (one judge question each), its
  statements judged for relevance to the input; score = relevant / all statements; 0 if none.
* **contextual_precision**: each ranked node judged useful (``yes``) for the expected output;
  score = (1/R) Σ_k precision@k · rel_k over the R relevant nodes; 0 if none is relevant.
* **contextual_recall**: each sentence of the expected output judged attributable to the
  retrieval context; score = attributable / sentences; 0 if none.

Two deliberate differences from DeepEval: faithfulness checks claims against the retrieval
context directly (DeepEval first extracts "truths" from it: one judge call more, same
definition), and an **empty response** scores 0 on faithfulness and answer relevancy without
a judge call (DeepEval would give 1.0 for "no claims"; an empty answer must fail,
docs/agent-yaml.md). The ``reasoning`` (``include_reason``, default on) is composed from the judge's
verdicts and their reasons instead of a further judge call. Prompts: ``prompts/<metric>*.txt``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from holodeck_core.metrics.base import EvalContext, InputField, MetricError, MetricInput, Score
from holodeck_core.metrics.judge_answer import JudgeAnswer
from holodeck_core.metrics.judge_parse import (
    check_string_list,
    check_verdicts,
    reason_of,
    verdict_of,
)
from holodeck_core.metrics.judge_prompts import RenderedPrompt, load_prompt, numbered
from holodeck_core.metrics.judge_session import JudgeSession
from holodeck_core.metrics.registry import MetricFn
from holodeck_core.models.evaluation import RAGMetric

YES_NO = frozenset({"yes", "no"})
YES_NO_IDK = frozenset({"yes", "no", "idk"})
_SHOWN = 3


def nodes(metric: RAGMetric, inputs: MetricInput) -> list[str]:
    """The non-blank retrieval-context nodes, in rank order; none is an error."""
    found = [node for node in inputs.retrieval_context or () if node.strip()]
    if not found:
        raise MetricError(
            f"metric {metric.display_name!r} needs a retrieval_context (from the test case or "
            "from retrieval-tool results); this case has none"
        )
    return found


def _text(value: str | None) -> str:
    return value if value is not None else "(none)"


def _verdict_items(answer: JudgeAnswer) -> list[dict[str, Any]]:
    return [dict(item) for item in answer.data["verdicts"]]


def _examples(items: Sequence[tuple[str, str]]) -> str:
    shown = [f"'{text}'" + (f" ({reason})" if reason else "") for text, reason in items[:_SHOWN]]
    more = f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else ""
    return "; ".join(shown) + more


def _finish(
    session: JudgeSession,
    metric: RAGMetric,
    score: float,
    reasoning: str,
    details: dict[str, Any],
) -> Score:
    return session.result(
        score, reasoning=reasoning if metric.include_reason else None, details=details
    )


def _empty_response(session: JudgeSession, metric: RAGMetric) -> Score:
    return _finish(session, metric, 0.0, "the response is empty", {"empty_response": True})


async def _items(session: JudgeSession, prompt: RenderedPrompt, key: str) -> list[str]:
    answer = await session.ask(prompt, check=check_string_list(key))
    return [s.strip() for s in answer.data[key] if s.strip()]


async def faithfulness(metric: RAGMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """Claims of the response not contradicted by the retrieval context / all claims."""
    context = nodes(metric, inputs)
    session = JudgeSession.start(ctx, metric)
    output = inputs.actual_output or ""
    if not output.strip():
        return _empty_response(session, metric)
    claims = await _items(
        session, load_prompt("faithfulness_claims").render({"actual_output": output}), "claims"
    )
    if not claims:
        reason = "the response makes no factual claims"
        return _finish(session, metric, 1.0, reason, {"claims": [], "verdicts": []})
    prompt = load_prompt("faithfulness_verdicts").render(
        {
            "retrieval_context": numbered(context),
            "claims": numbered(claims),
            "count": str(len(claims)),
        }
    )
    answer = await session.ask(prompt, check=check_verdicts(YES_NO_IDK, count=len(claims)))
    verdicts = _verdict_items(answer)
    contradicted = [
        (claim, reason_of(v))
        for claim, v in zip(claims, verdicts, strict=True)
        if verdict_of(v) == "no"
    ]
    supported = len(claims) - len(contradicted)
    reasoning = faithfulness_reasoning(len(claims), contradicted)
    details = {
        "claims": claims,
        "verdicts": [
            {"claim": c, "verdict": verdict_of(v), "reason": reason_of(v)}
            for c, v in zip(claims, verdicts, strict=True)
        ],
    }
    return _finish(session, metric, supported / len(claims), reasoning, details)


def faithfulness_reasoning(claims: int, contradicted: list[tuple[str, str]]) -> str:
    """ "the claim is contradicted by the retrieval context: …", "2 of 5 claims are …",
    "none of the 5 claims is contradicted …": the count that matters first, then examples."""
    where = "contradicted by the retrieval context"
    if not contradicted:
        return (
            f"the claim is not {where}"
            if claims == 1
            else f"none of the {claims} claims is {where}"
        )
    if claims == 1:
        return f"the claim is {where}: {_examples(contradicted)}"
    verb = "is" if len(contradicted) == 1 else "are"
    return f"{len(contradicted)} of {claims} claims {verb} {where}: {_examples(contradicted)}"


async def answer_relevancy(metric: RAGMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """Statements of the response relevant to the input / all statements."""
    session = JudgeSession.start(ctx, metric)
    output = inputs.actual_output or ""
    if not output.strip():
        return _empty_response(session, metric)
    statements = await _items(
        session,
        load_prompt("answer_relevancy_statements").render({"actual_output": output}),
        "statements",
    )
    if not statements:
        reason = "the response makes no statements"
        return _finish(session, metric, 1.0, reason, {"statements": [], "verdicts": []})
    prompt = load_prompt("answer_relevancy_verdicts").render(
        {
            "input": _text(inputs.input),
            "statements": numbered(statements),
            "count": str(len(statements)),
        }
    )
    answer = await session.ask(prompt, check=check_verdicts(YES_NO_IDK, count=len(statements)))
    verdicts = _verdict_items(answer)
    pairs = list(zip(statements, verdicts, strict=True))
    irrelevant = [(s, reason_of(v)) for s, v in pairs if verdict_of(v) == "no"]
    relevant = len(statements) - len(irrelevant)
    reasoning = (
        f"{relevant} of {len(statements)} statements of the response are relevant to the input"
    )
    if irrelevant:
        reasoning += f"; irrelevant: {_examples(irrelevant)}"
    details = {
        "statements": statements,
        "verdicts": [
            {"statement": s, "verdict": verdict_of(v), "reason": reason_of(v)} for s, v in pairs
        ],
    }
    return _finish(session, metric, relevant / len(statements), reasoning, details)


async def contextual_relevancy(metric: RAGMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """Statements of the retrieval context relevant to the input / all its statements."""
    context = nodes(metric, inputs)
    session = JudgeSession.start(ctx, metric)
    template = load_prompt("contextual_relevancy")
    check = check_verdicts(YES_NO, text_key="statement")
    asked = await asyncio.gather(
        *(
            session.ask(template.render({"input": _text(inputs.input), "node": node}), check=check)
            for node in context
        ),
        return_exceptions=True,
    )
    per_node: list[list[dict[str, Any]]] = []
    for outcome in asked:
        if isinstance(outcome, BaseException):
            raise outcome
        per_node.append(_verdict_items(outcome))
    flat = [item for items in per_node for item in items]
    relevant = sum(1 for item in flat if verdict_of(item) == "yes")
    score = relevant / len(flat) if flat else 0.0
    irrelevant = [
        (str(item["statement"]), reason_of(item)) for item in flat if verdict_of(item) != "yes"
    ]
    reasoning = (
        f"{relevant} of {len(flat)} statements in the retrieval context are relevant to the input"
    )
    if irrelevant:
        reasoning += f"; irrelevant: {_examples(irrelevant)}"
    details = {
        "nodes": [
            [
                {"statement": str(i["statement"]), "verdict": verdict_of(i), "reason": reason_of(i)}
                for i in items
            ]
            for items in per_node
        ]
    }
    return _finish(session, metric, score, reasoning, details)


def ranked_precision(relevant: Sequence[bool]) -> float:
    """DeepEval's contextual precision: mean of precision@k over the relevant ranks k."""
    hits, total = 0, 0.0
    for k, is_relevant in enumerate(relevant, 1):
        if is_relevant:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


async def contextual_precision(metric: RAGMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """Are the nodes useful for the expected output ranked above the others?"""
    context = nodes(metric, inputs)
    session = JudgeSession.start(ctx, metric)
    prompt = load_prompt("contextual_precision").render(
        {
            "input": _text(inputs.input),
            "expected_output": _text(inputs.expected_output),
            "retrieval_context": numbered(context),
            "count": str(len(context)),
        }
    )
    answer = await session.ask(prompt, check=check_verdicts(YES_NO, count=len(context)))
    verdicts = _verdict_items(answer)
    relevant = [verdict_of(v) == "yes" for v in verdicts]
    ranks = [str(k) for k, rel in enumerate(relevant, 1) if rel]
    reasoning = (
        f"useful nodes at ranks {', '.join(ranks)} of {len(context)}"
        if ranks
        else f"none of the {len(context)} nodes is useful for the expected output"
    )
    details = {
        "verdicts": [
            {"rank": k, "verdict": verdict_of(v), "reason": reason_of(v)}
            for k, v in enumerate(verdicts, 1)
        ]
    }
    return _finish(session, metric, ranked_precision(relevant), reasoning, details)


async def contextual_recall(metric: RAGMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """Sentences of the expected output attributable to the retrieval context / sentences."""
    context = nodes(metric, inputs)
    session = JudgeSession.start(ctx, metric)
    prompt = load_prompt("contextual_recall").render(
        {"expected_output": _text(inputs.expected_output), "retrieval_context": numbered(context)}
    )
    answer = await session.ask(prompt, check=check_verdicts(YES_NO, text_key="sentence"))
    verdicts = _verdict_items(answer)
    attributable = sum(1 for v in verdicts if verdict_of(v) == "yes")
    score = attributable / len(verdicts) if verdicts else 0.0
    missing = [(str(v["sentence"]), reason_of(v)) for v in verdicts if verdict_of(v) != "yes"]
    reasoning = (
        f"{attributable} of {len(verdicts)} sentences of the expected output are attributable "
        "to the retrieval context"
    )
    if missing:
        reasoning += f"; not attributable: {_examples(missing)}"
    details = {
        "verdicts": [
            {"sentence": str(v["sentence"]), "verdict": verdict_of(v), "reason": reason_of(v)}
            for v in verdicts
        ]
    }
    return _finish(session, metric, score, reasoning, details)


RAG_METRICS: dict[str, tuple[MetricFn, tuple[InputField, ...]]] = {
    "faithfulness": (faithfulness, ("actual_output", "retrieval_context")),
    "answer_relevancy": (answer_relevancy, ("input", "actual_output")),
    "contextual_relevancy": (contextual_relevancy, ("input", "retrieval_context")),
    "contextual_precision": (
        contextual_precision,
        ("input", "expected_output", "retrieval_context"),
    ),
    "contextual_recall": (contextual_recall, ("expected_output", "retrieval_context")),
}
"""metric_type → (function, required inputs)."""
