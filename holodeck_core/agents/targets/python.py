"""``python`` targets: ``callable: "module:function"`` (the module found beside the agent file
first, then on ``sys.path``, as a code grader's), sync or async, called once per turn::

    from holodeck_core.agents.targets.python import TargetCase, TargetReply, TargetToolCall

    async def answer(case: TargetCase) -> TargetReply:
        text = await my_agent(case.input, history=case.messages)
        return TargetReply(text, tool_calls=[TargetToolCall("search", {"q": case.input})])

A plain ``str`` return is the text. It runs in a host process of its own
(:mod:`holodeck_core.agents.targets.host`), a sync function in a thread there. An exception is
classified like a model call's (an SDK's 429 or timeout is transient, a ``ValueError``
permanent). See docs/targets.md for adapters of OpenAI Agents SDK agents and LangGraph graphs.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from holodeck_core.agents.loop import TurnInput
from holodeck_core.agents.targets.base import Reply, Session
from holodeck_core.agents.targets.host import HostStartError, TargetHost
from holodeck_core.agents.targets.web import tool_invocations
from holodeck_core.calls.errors import CallErrorKind, ModelCallError
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
    """Sends each turn to the target's host process (:mod:`holodeck_core.agents.targets.host`);
    the turns of one case run go to the host that has its ``state``."""

    assigns_session = False

    def __init__(self, spec: PythonTarget, base_dir: Path, resolve: Callable[[str], Path]) -> None:
        self._callable = spec.callable  # found at load, without running it (config/targets.py)
        self._base_dir = base_dir
        self._resolve = resolve
        self._host: TargetHost | None = None
        self._starting: asyncio.Task[TargetHost] | None = None
        self._hosts: list[TargetHost] = []
        self._by_session: dict[str, TargetHost] = {}

    async def ready(self, session: Session) -> None:
        """The host of ``session`` started (outside the call's timeout)."""
        await self._host_for(session)

    async def send(self, turn: TurnInput, index: int, session: Session) -> Reply:
        host = await self._host_for(session)
        try:
            return await host.call(self._payload(turn, index, session))
        finally:
            self._end_done()

    async def _host_for(self, session: Session) -> TargetHost:
        """The host that keeps ``session``'s state; a case run's first turn (or one whose
        host died) goes to the current host."""
        session_id = session.id or ""
        host = self._by_session.get(session_id)
        if host is not None and not host.exited:
            return host
        host = await self._current()
        if session_id not in self._by_session:
            loop = asyncio.get_running_loop()
            weakref.finalize(session, _soon, loop, self._forget, session_id)
        self._by_session[session_id] = host
        host.sessions.add(session_id)
        return host

    def _payload(self, turn: TurnInput, index: int, session: Session) -> dict[str, Any]:
        """A :class:`TargetCase`'s fields but ``state`` (the host keeps it)."""
        return {
            "input": turn.message,
            "turn": index,
            "messages": list(session.messages),
            "files": [
                TargetFile(
                    name=item.original.description or item.original.path or item.original.url or "",
                    type=item.original.type,
                    markdown=item.markdown_content,
                    path=self._resolve(item.original.path) if item.original.path else None,
                    url=item.original.url,
                )
                for item in turn.files
            ],
            "session_id": session.id or "",
        }

    async def _current(self) -> TargetHost:
        """The host new case runs go to, started (once, whatever call waits) when needed."""
        if self._host is not None and not (self._host.retired or self._host.exited):
            return self._host
        self._replace()
        assert self._starting is not None
        return await asyncio.shield(self._starting)

    def _replace(self) -> None:
        """Start a host in place of a retired or dead one (unless one is starting, or the
        callable cannot be imported: that answer stands)."""
        starting = self._starting
        if starting is not None and (not starting.done() or starting.exception() is not None):
            return
        self._starting = asyncio.get_running_loop().create_task(self._start())

    async def _start(self) -> TargetHost:
        host = TargetHost()
        self._hosts.append(host)
        try:
            await host.start(self._callable, self._base_dir)
        except HostStartError as exc:
            raise ModelCallError(CallErrorKind.INTERNAL, str(exc)) from None
        self._host = host
        return host

    def _forget(self, session_id: str) -> None:
        host = self._by_session.pop(session_id, None)
        if host is not None:
            host.forget(session_id)
        self._end_done()

    def _end_done(self) -> None:
        """Kill the hosts that were retired and serve nobody now; have a replacement warm."""
        if self._host is not None and (self._host.retired or self._host.exited):
            self._replace()
        for host in [h for h in self._hosts if h.done]:
            self._hosts.remove(host)
            asyncio.get_running_loop().create_task(host.end())

    async def aclose(self) -> None:
        """Kill every host's process group (Ctrl-C and errors included)."""
        hosts, self._hosts = self._hosts, []
        await asyncio.gather(*(host.end() for host in hosts), return_exceptions=True)


def _soon(loop: asyncio.AbstractEventLoop, function: Callable[[str], None], arg: str) -> None:
    """``function(arg)`` on ``loop`` (a finalizer may run in any thread); nothing once the
    loop is closed."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(function, arg)


def reply_of(value: Any) -> Reply:
    """What the callable returned as the turn's :class:`Reply` (a ``TypeError`` for anything
    but a :class:`TargetReply` or a ``str``)."""
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
