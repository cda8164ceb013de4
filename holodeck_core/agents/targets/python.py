"""``python`` targets: ``callable: "module:function"`` (the module found beside the agent file
first, then on ``sys.path``, as a code grader's), sync or async, called once per turn::

    from holodeck_core.agents.targets.python import TargetCase, TargetReply, TargetToolCall

    async def answer(case: TargetCase) -> TargetReply:
        text = await my_agent(case.input, history=case.messages)
        return TargetReply(text, tool_calls=[TargetToolCall("search", {"q": case.input})])

A plain ``str`` return is the text. A sync function runs in a worker thread. An exception is
classified like a model call's (an SDK's 429 or timeout is transient, a ``ValueError``
permanent). See docs/targets.md for adapters of OpenAI Agents SDK agents and LangGraph graphs.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from holodeck_core.agents.loop import TurnInput
from holodeck_core.agents.targets.base import Reply, Session
from holodeck_core.agents.targets.web import tool_invocations
from holodeck_core.errors import ConfigError
from holodeck_core.metrics.base import MetricError
from holodeck_core.metrics.code_graders import load_grader
from holodeck_core.models import TokenUsage
from holodeck_core.models.outside import checked_counts
from holodeck_core.models.target import PythonTarget


@dataclass(frozen=True)
class TargetFile:
    """An attachment of the turn: its Markdown (as the in-process agent reads it) and where
    it is (``path`` absolute, or ``url``)."""

    name: str
    type: str
    markdown: str
    path: Path | None = None
    url: str | None = None


@dataclass
class TargetCase:
    """What the callable gets for one turn."""

    input: str
    """This turn's user message."""
    turn: int
    """0 for the first turn of a case."""
    messages: list[dict[str, str]]
    """The conversation so far, this turn's message last (``{"role", "content"}``)."""
    files: list[TargetFile]
    session_id: str
    """Stable across the turns of one case run (a LangGraph ``thread_id``, say)."""
    state: dict[str, Any]
    """Kept between the turns of one case run: put your agent's session here."""


@dataclass(frozen=True)
class TargetToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    error: str | None = None


@dataclass(frozen=True)
class TargetUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class TargetReply:
    """What the callable returns (or a plain ``str``)."""

    text: str
    tool_calls: list[TargetToolCall] = field(default_factory=list)
    usage: TargetUsage | None = None


class PythonClient:
    assigns_session = False

    def __init__(self, spec: PythonTarget, base_dir: Path, resolve: Callable[[str], Path]) -> None:
        try:
            function: Callable[..., Any] = load_grader(spec.callable, base_dir)
        except MetricError as exc:
            message = str(exc).replace("grader ", "")
            raise ConfigError(f"target python.callable {spec.callable!r}: {message}") from None
        self._function = function
        self._resolve = resolve

    async def send(self, turn: TurnInput, index: int, session: Session) -> Reply:
        case = TargetCase(
            input=turn.message,
            turn=index,
            messages=list(session.messages),
            files=[
                TargetFile(
                    name=item.original.description or item.original.path or item.original.url or "",
                    type=item.original.type,
                    markdown=item.markdown_content,
                    path=self._resolve(item.original.path) if item.original.path else None,
                    url=item.original.url,
                )
                for item in turn.files
            ],
            session_id=session.id or "",
            state=session.state,
        )
        if inspect.iscoroutinefunction(self._function):
            value = await self._function(case)
        else:
            value = await asyncio.to_thread(self._function, case)
        return _reply(value)

    async def aclose(self) -> None:
        """A callable holds nothing this target opened."""


def _reply(value: Any) -> Reply:
    if isinstance(value, str):
        return Reply(text=value)
    if not isinstance(value, TargetReply):
        raise TypeError(
            f"a python target returns a TargetReply or a str, got {type(value).__name__}"
        )
    usage = value.usage or TargetUsage()
    calls = [
        {"name": c.name, "arguments": c.arguments, "result": c.result, "error": c.error}
        for c in value.tool_calls
    ]
    return Reply(
        text=value.text,
        invocations=tool_invocations(calls, "tool_calls"),
        usage=_usage(usage),
    )


def _usage(usage: TargetUsage) -> TokenUsage:
    counts = checked_counts(
        "usage", prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens
    )
    return TokenUsage(**counts, total_tokens=sum(counts.values()))
