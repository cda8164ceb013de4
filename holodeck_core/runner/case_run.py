"""What running the agent on one case produced, before any metric: the ``agent_responses``
stage's unit of work, and what the journal keeps so paid calls are never made twice."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from holodeck_core.models import ProcessedFileInput, TokenUsage, ToolInvocation
from holodeck_core.models.base import StrictModel
from holodeck_core.models.cost import Heading, HeadingCost

ErrorKind = Literal["model", "model_transient", "budget", "tool_loop", "file", "config", "skipped"]


class TurnRun(StrictModel):
    input: str
    response: str | None = None
    tool_invocations: list[ToolInvocation] = Field(default_factory=list)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    model_ms: int = Field(0, ge=0)
    processed_files: list[ProcessedFileInput] = Field(default_factory=list)
    error: str | None = None
    error_kind: ErrorKind | None = None
    system_fingerprint: str | None = None
    notes: list[str] = Field(default_factory=list)
    """What was made valid in the turn's text from outside."""


class CaseRun(StrictModel):
    case_id: str
    fingerprint: str
    turns: list[TurnRun]
    execution_time_ms: int = Field(ge=0)
    timestamp: str
    resumed: bool = Field(False, description="Reused from the journal: no model call made.")
    trial: int = Field(0, ge=0, description="Which of the case's K trials (docs/cli.md).")
    cost: dict[Heading, HeadingCost] = Field(
        default_factory=dict,
        description="What its calls cost: journaled, so a run that resumes it counts what the "
        "earlier attempt paid (docs/cost.md).",
    )

    @property
    def error(self) -> str | None:
        errors = [
            f"[turn {i}] {t.error}" if len(self.turns) > 1 else t.error
            for i, t in enumerate(self.turns)
            if t.error
        ]
        return "; ".join(e for e in errors if e) or None

    @property
    def transient(self) -> bool:
        """Failed only for reasons that may pass on a retry (429, 5xx, timeouts..., or a
        larger budget)."""
        return any(t.error_kind in ("model_transient", "budget") for t in self.turns)

    @property
    def budget_stopped(self) -> bool:
        return any(t.error_kind == "budget" for t in self.turns)

    @property
    def usage(self) -> TokenUsage:
        total = TokenUsage()
        for turn in self.turns:
            total = total + turn.usage
        return total

    @property
    def notes(self) -> list[str]:
        return [note for turn in self.turns for note in turn.notes]

    @property
    def model_ms(self) -> int:
        return sum(turn.model_ms for turn in self.turns)
