"""HoloDeck's legacy AI metrics (``type: standard``): ``groundedness``, ``relevance``,
``coherence``, ``fluency``.

The judge rates 1..``scale`` (HoloDeck's ``scale``, default 5) and the score is normalized
as ``(s - 1) / (scale - 1)`` -- ``(s - 1) / 4`` on the usual 1-5 scale -- *before* the
threshold is applied; ``raw_score`` keeps ``s``. (HoloDeck compared the raw 1-5 score with
0-1 thresholds, so almost everything passed.)

Inputs: ``groundedness`` the response and the retrieval context (else the context);
``relevance`` and ``coherence`` the input and the response; ``fluency`` the response. A
``custom_prompt`` replaces the user message (placeholders ``{{input}}``,
``{{actual_output}}``, ``{{context}}``, ``{{scale}}``; the response is appended when it uses
none of them). An empty response gets the lowest score without a judge call.
"""

from __future__ import annotations

from holodeck_core.defaults import LEGACY_METRIC_SCALE
from holodeck_core.metrics.base import EvalContext, InputField, MetricError, MetricInput, Score
from holodeck_core.metrics.judge_parse import check_score, score_number
from holodeck_core.metrics.judge_prompts import (
    RenderedPrompt,
    custom_label,
    load_prompt,
    numbered,
    placeholders_in,
    render_custom,
)
from holodeck_core.metrics.judge_session import JudgeSession
from holodeck_core.models.evaluation import StandardMetric

LEGACY_REQUIRES: dict[str, tuple[InputField, ...]] = {
    "groundedness": ("actual_output",),
    "relevance": ("input", "actual_output"),
    "coherence": ("input", "actual_output"),
    "fluency": ("actual_output",),
}
_FIELDS = {"input", "actual_output", "context"}


def _context(metric: StandardMetric, inputs: MetricInput) -> str:
    nodes = [n for n in inputs.retrieval_context or inputs.context or () if n.strip()]
    if metric.metric == "groundedness" and not nodes:
        raise MetricError(
            f"metric {metric.display_name!r} needs a retrieval_context or a context; "
            "this case has none"
        )
    return numbered(nodes)


def legacy_prompt(metric: StandardMetric, inputs: MetricInput, top: int) -> RenderedPrompt:
    values = {
        "scale": str(top),
        "input": inputs.input if inputs.input is not None else "(none)",
        "actual_output": inputs.actual_output or "",
        "context": _context(metric, inputs),
    }
    template = load_prompt(f"legacy_{metric.metric}")
    prompt = template.render(values)
    if metric.custom_prompt is None:
        return prompt
    user = render_custom(metric.custom_prompt, values)
    if not placeholders_in(metric.custom_prompt) & _FIELDS:
        user += f"\n\nResponse:\n{values['actual_output']}"
    return RenderedPrompt(
        f"{template.label}+{custom_label(metric.custom_prompt)}", prompt.system, user
    )


async def legacy_judge(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """A 1..scale judge rating, normalized to 0-1 before the threshold."""
    top = metric.scale or LEGACY_METRIC_SCALE
    if top < 2:
        raise MetricError(f"metric {metric.display_name!r}: scale must be at least 2 (1..scale)")
    prompt = legacy_prompt(metric, inputs, top)
    session = JudgeSession.start(ctx, metric)
    details = {"judge_scale": f"1-{top}"}
    if not (inputs.actual_output or "").strip():
        return session.result(
            0.0, raw_score=1.0, reasoning="the response is empty", details=details
        )
    answer = await session.ask(prompt, check=check_score(1, top))
    rating = score_number(answer.data["score"])
    assert rating is not None  # the check guarantees it
    reason = answer.data.get("reason")
    return session.result(
        (rating - 1) / (top - 1),
        raw_score=rating,
        reasoning=reason if isinstance(reason, str) else None,
        details=details,
    )
