"""Code graders of the acme-support example, a plain module that HoloDeck 0.7.1 loads too.

Each grader receives the engine's grader context (the turn's input, the agent's response, the
ground truth, the tool invocations...: the same fields in HoloDeck and in holodeck-pipelines)
and returns a bool or a ``GraderResult``. They are referenced from ``agent.yaml`` as
``grader: graders.support_checks:<name>``. HoloDeck accepts only its own ``GraderResult``
class, so that is the one used when HoloDeck runs the graders; holodeck-pipelines reads any
object with ``score``/``passed``/``reason``/``details``, so nothing here imports it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

try:  # HoloDeck's own result class, when HoloDeck runs the graders
    from holodeck.lib.test_runner.code_grader import GraderResult
except ImportError:

    @dataclass(frozen=True)
    class GraderResult:  # type: ignore[no-redef]
        """A grader's structured answer: ``score`` in 0-1; ``passed`` overrides it."""

        score: float
        passed: bool | None = None
        reason: str | None = None
        details: dict[str, Any] | None = None


MAX_WORDS = 40
TRIAGE_CATEGORIES = frozenset({"damaged_item", "late_delivery", "billing", "other"})
TRIAGE_PRIORITIES = frozenset({"low", "normal", "high"})
ORDER_ID = re.compile(r"^A-\d{4}$")


def quotes_tool_results(ctx: Any) -> GraderResult:
    """Every successful tool result reaches the customer: the share of results quoted."""
    results = [
        str(call.result) for call in ctx.tool_invocations if call.error is None and call.result
    ]
    if not results:
        return GraderResult(score=0.0, passed=False, reason="no tool returned a result")
    quoted = [text for text in results if text in ctx.agent_response]
    missing = [text for text in results if text not in ctx.agent_response]
    return GraderResult(
        score=len(quoted) / len(results),
        passed=not missing,
        reason=f"{len(quoted)} of {len(results)} tool results quoted in the response",
        details={"missing": missing},
    )


def concise(ctx: Any) -> bool:
    """Support answers stay short: at most ``MAX_WORDS`` words."""
    return 0 < len(ctx.agent_response.split()) <= MAX_WORDS


def valid_triage(ctx: Any) -> GraderResult:
    """The triage reply is a JSON object with a known category, a known priority and an
    order id; the score is the share of these checks that hold."""
    try:
        data: Any = json.loads(ctx.agent_response)
    except ValueError as exc:
        return GraderResult(score=0.0, passed=False, reason=f"not JSON: {exc}")
    if not isinstance(data, dict):
        return GraderResult(score=0.0, passed=False, reason="not a JSON object")
    order_id = data.get("order_id")
    checks = {
        "category": data.get("category") in TRIAGE_CATEGORIES,
        "priority": data.get("priority") in TRIAGE_PRIORITIES,
        "order_id": isinstance(order_id, str) and ORDER_ID.match(order_id) is not None,
    }
    failed = [name for name, ok in checks.items() if not ok]
    return GraderResult(
        score=sum(checks.values()) / len(checks),
        passed=not failed,
        reason="all fields valid" if not failed else f"invalid: {', '.join(failed)}",
        details={"checks": checks},
    )
