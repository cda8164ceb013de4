"""What every target shares (docs/targets.md): the conversation driver that sends each turn
through the one call scheduler, under the target's own endpoint limit, timeout and attempts,
and the reply every kind reports (text, tool invocations, usage)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from holodeck_core.agents.loop import TurnInput, TurnOutcome
from holodeck_core.calls.errors import CallErrorKind, ModelCallError
from holodeck_core.calls.ledger import Charge, estimate_tokens
from holodeck_core.calls.scheduler import CallScheduler
from holodeck_core.metrics.response_path import path_tokens
from holodeck_core.models import LLMProvider, TokenUsage, ToolInvocation
from holodeck_core.models.outside import plausible_count, repaired_note, valid_value
from holodeck_core.models.target import Target
from holodeck_core.redaction import redact_text


@dataclass
class Reply:
    """One turn's answer from a target."""

    text: str
    invocations: list[ToolInvocation] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    session: str | None = None
    """A session id the target returned, sent back on the next turn."""
    notes: list[str] = field(default_factory=list)
    """What was made valid in the reply (lone surrogates replaced)."""

    def valid(self) -> Reply:
        """This reply with its text, session and tool calls (names, arguments, keys, results,
        errors) valid Unicode, and a note when anything was replaced; every kind of target's
        reply passes here once (:mod:`holodeck_core.models.outside`)."""
        calls = [i.model_dump(exclude_none=True) for i in self.invocations]
        (text, session, dumped), replaced = valid_value([self.text, self.session, calls])
        if not replaced:
            return self
        return Reply(
            text=text,
            invocations=[ToolInvocation.model_validate(i) for i in dumped],
            usage=self.usage,
            session=session,
            notes=[*self.notes, repaired_note("the target's reply", replaced)],
        )


@dataclass
class Session:
    """One case's conversation with a target: its id (``None`` until a server that assigns
    ids has given one) and the messages so far."""

    id: str | None
    messages: list[dict[str, str]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    """Free for a python target to keep what its agent needs between turns."""


class TargetClient(Protocol):
    """Sends one turn; never retries (the scheduler does). Raises :class:`ModelCallError`
    or any exception :func:`~holodeck_core.calls.classify.classify` understands."""

    assigns_session: bool
    """The server assigns the session id (``None`` on the first turn); else one is made."""

    async def ready(self, session: Session) -> None:
        """Whatever ``session``'s next call needs started (a python target's process),
        outside that call's timeout; raises :class:`ModelCallError` when it cannot start."""

    async def send(self, turn: TurnInput, index: int, session: Session) -> Reply: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class TargetRunner:
    """A :class:`~holodeck_core.agents.loop.ConversationRunner` over a target."""

    target: Target
    client: TargetClient
    scheduler: CallScheduler
    timeout: float
    model: LLMProvider
    """The model the target's calls are charged as (its price is unknown unless
    ``holodeck.yaml`` ``pricing:`` names it; its ``max_tokens`` bounds a reply)."""

    @property
    def endpoint(self) -> str:
        """The scheduler lane of this target (its own limit and 429 pauses)."""
        return f"target:{self.target.label}"

    @property
    def attempts(self) -> int | None:
        return self.target.spec.attempts

    async def run(self, turns: list[TurnInput]) -> list[TurnOutcome]:
        session = Session(id=None if self.client.assigns_session else uuid.uuid4().hex)
        outcomes: list[TurnOutcome] = []
        for index, turn in enumerate(turns):
            if outcomes and outcomes[-1].error is not None:
                outcomes.append(TurnOutcome(skipped=True, error="skipped: an earlier turn failed"))
                continue
            outcomes.append(await self._turn(turn, index, session))
        return outcomes

    async def _turn(self, turn: TurnInput, index: int, session: Session) -> TurnOutcome:
        session.messages.append({"role": "user", "content": turn.message})
        try:
            await self.client.ready(session)
        except ModelCallError as exc:
            return TurnOutcome(error=self._named(exc))
        elapsed: list[float] = []

        async def attempt() -> Reply:
            started = time.perf_counter()
            try:
                return (await self.client.send(turn, index, session)).valid()
            finally:
                elapsed.append(time.perf_counter() - started)

        said = [m["content"] for m in session.messages]
        charge = Charge(
            "agent",
            self.model,
            TARGET_PRICES,
            estimate_tokens(*said),
            usage=_reply_usage,
            input_chars=sum(map(len, said)),
        )
        try:
            reply = await self.scheduler.call(
                attempt,
                endpoint=self.endpoint,
                timeout=self.timeout,
                attempts=self.attempts,
                charge=charge,
            )
        except ModelCallError as exc:
            return TurnOutcome(error=self._named(exc))
        session.messages.append({"role": "assistant", "content": reply.text})
        session.id = reply.session or session.id
        return TurnOutcome(
            response=reply.text,
            invocations=reply.invocations,
            usage=reply.usage,
            model_ms=int(elapsed[-1] * 1000),
            notes=reply.notes,
        )

    def _named(self, error: ModelCallError) -> ModelCallError:
        """The error with the target named (credentials in its URL scrubbed)."""
        message = error.args[0] if error.args else ""
        return ModelCallError(
            error.kind,
            f"target {redact_text(self.target.label)}: {message}",
            status=error.status,
            retry_after=error.retry_after,
            attempts=error.attempts,
        )


TARGET_PRICES = "target"
"""A target's price rows: none ship; ``pricing: {models: {...}}`` (or ``providers: {target:
...}``) in holodeck.yaml prices the model it is charged as."""


def _reply_usage(reply: Any) -> TokenUsage:
    return reply.usage if isinstance(reply, Reply) else TokenUsage()


def unreadable(what: str) -> ModelCallError:
    """A reply the target's paths cannot read: transient (a healthy server answers again)."""
    return ModelCallError(CallErrorKind.MALFORMED, what)


def lookup(data: Any, path: str) -> Any:
    """The value at ``path`` (keys and ``[index]``) in parsed JSON, or a
    :class:`ModelCallError` naming the step that is missing."""
    cursor = data
    for token in path_tokens(path):
        if isinstance(token, int):
            if not isinstance(cursor, list) or token >= len(cursor):
                raise unreadable(f"the reply has no [{token}] on the way to {path}")
        elif not isinstance(cursor, dict) or token not in cursor:
            raise unreadable(f"the reply has no {token!r} on the way to {path}")
        cursor = cursor[token]
    return cursor


def usage_of(value: Any) -> TokenUsage:
    """Token counts from an OpenAI-style (``prompt_tokens``) or Anthropic-style
    (``input_tokens``) usage object; anything else counts nothing."""
    if not isinstance(value, dict):
        return TokenUsage()

    def count(*names: str) -> int:
        """The first count present; past any plausible one, the call's error."""
        for name in names:
            number = value.get(name)
            if isinstance(number, int) and not isinstance(number, bool) and number >= 0:
                return plausible_count(number, f"usage.{name}")
        return 0

    prompt = count("prompt_tokens", "input_tokens")
    completion = count("completion_tokens", "output_tokens")
    return TokenUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=count("total_tokens") or prompt + completion,
    )
