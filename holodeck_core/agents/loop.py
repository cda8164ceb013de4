"""The agent's tool loop: user turn → model → tools → model … → answer, turn after turn."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol

from holodeck_core.calls.errors import CallErrorKind, ModelCallError
from holodeck_core.calls.scheduler import CallScheduler, endpoint_key
from holodeck_core.defaults import MAX_TOOL_TURNS
from holodeck_core.models import ProcessedFileInput, TokenUsage, ToolInvocation
from holodeck_core.providers.base import ModelClient
from holodeck_core.providers.charges import chat_charge
from holodeck_core.providers.messages import Image, Message, ToolCall
from holodeck_core.tools.runtime import ToolCrashedError
from holodeck_core.tools.toolbox import ToolBox, tool_message
from holodeck_core.tools.untrusted import unknown_tool


@dataclass(frozen=True)
class TurnInput:
    """One user turn: ``text`` is what the model reads (the message with its attachments as
    Markdown); targets also get the bare ``message`` and the processed ``files``."""

    text: str
    images: list[Image] = field(default_factory=list)
    message: str = ""
    files: list[ProcessedFileInput] = field(default_factory=list)


@dataclass
class TurnOutcome:
    response: str | None = None
    invocations: list[ToolInvocation] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    model_ms: int = 0
    error: ModelCallError | str | None = None
    skipped: bool = False
    system_fingerprint: str | None = None
    notes: list[str] = field(default_factory=list)
    """What was made valid in the text from outside (:mod:`holodeck_core.models.outside`)."""


class ConversationRunner(Protocol):
    """Runs a case's turns in one conversation: the in-process :class:`AgentRunner` or a
    target (:mod:`holodeck_core.agents.targets`)."""

    async def run(self, turns: list[TurnInput]) -> list[TurnOutcome]: ...


@dataclass(frozen=True)
class AgentRunner:
    """Everything needed to run one conversation; shared by all cases of a suite."""

    client: ModelClient
    scheduler: CallScheduler
    system: str
    toolbox: ToolBox | None = None
    response_schema: dict[str, Any] | None = None
    max_tool_turns: int = MAX_TOOL_TURNS
    timeout: float | None = None
    unknown_tool_ends_case: bool = False
    """A tool name not offered ends the case (an agent error) instead of going back to the
    model as a tool error: HoloDeck 0.7.1's openai-agents backend (docs/holodeck-fidelity.md)."""

    async def run(self, turns: list[TurnInput]) -> list[TurnOutcome]:
        """Run the turns in order in one conversation. After a turn fails, the rest are
        skipped: their context would be wrong."""
        history: list[Message] = []
        outcomes: list[TurnOutcome] = []
        for turn in turns:
            if outcomes and outcomes[-1].error is not None:
                outcomes.append(TurnOutcome(skipped=True, error="skipped: an earlier turn failed"))
                continue
            history.append(Message(role="user", text=turn.text, images=list(turn.images)))
            outcomes.append(await self._turn(history))
        return outcomes

    async def _turn(self, history: list[Message]) -> TurnOutcome:
        outcome = TurnOutcome()
        tools = self.toolbox.specs if self.toolbox else None
        endpoint = endpoint_key(self.client.model)
        for _ in range(self.max_tool_turns):
            try:
                reply = await self.scheduler.call(
                    lambda: self.client.complete(
                        self.system,
                        history,
                        tools=tools,
                        response_schema=self.response_schema,
                        timeout=self.timeout,
                    ),
                    endpoint=endpoint,
                    timeout=self.timeout,
                    charge=chat_charge("agent", self.client.model, self.system, history, tools),
                    batchable=self.client.batch_api is not None,
                )
            except ModelCallError as exc:
                outcome.error = exc
                return outcome
            outcome.usage = outcome.usage + reply.usage
            outcome.model_ms += reply.model_ms
            outcome.system_fingerprint = reply.system_fingerprint or outcome.system_fingerprint
            outcome.notes.extend(reply.notes)
            history.append(
                Message(
                    role="assistant",
                    text=reply.text,
                    tool_calls=reply.tool_calls,
                    replay=reply.replay,
                )
            )
            if not reply.tool_calls:
                outcome.response = reply.text
                return outcome
            if self.toolbox is None:
                outcome.error = "the model called a tool but the agent has none"
                return outcome
            unknown = self._unknown_tool(reply.tool_calls, self.toolbox)
            if unknown is not None:
                outcome.error = unknown
                return outcome
            try:
                invocations = await asyncio.gather(*map(self.toolbox.invoke, reply.tool_calls))
            except ToolCrashedError as exc:
                outcome.error = ModelCallError(CallErrorKind.TOOL_CRASHED, str(exc))
                return outcome
            outcome.invocations.extend(invocations)
            for invocation in invocations:
                if invocation.usage is not None:
                    outcome.usage = outcome.usage + invocation.usage
                outcome.notes.extend(invocation.notes or ())
            history.extend(tool_message(invocation) for invocation in invocations)
        outcome.error = (
            f"the model kept calling tools after {self.max_tool_turns} model calls "
            "(raise max_turns in the agent's openai: or claude: block if that is expected)"
        )
        return outcome

    def _unknown_tool(self, calls: list[ToolCall], toolbox: ToolBox) -> str | None:
        """The case's error when it ends on a tool the agent does not offer (no tool of the
        reply runs then, as in openai-agents), else None."""
        if not self.unknown_tool_ends_case:
            return None
        offered = [spec.name for spec in toolbox.specs]
        for call in calls:
            if call.name not in offered:
                return (
                    f"{unknown_tool(call.name, offered)}: the model called a tool the agent "
                    "does not have, which ends the case as in HoloDeck's openai-agents backend "
                    "(ModelBehaviorError)"
                )
        return None
