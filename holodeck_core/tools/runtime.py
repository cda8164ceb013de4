"""The interface every tool runtime implements (docs/agent-yaml.md).

Lifecycle: ``open()`` once per suite run, before the first model call; ``specs`` and
``identity()`` are valid after it; ``call()`` may run concurrently from many cases; ``aclose()``
once at the end (also on errors and Ctrl-C). A runtime that cannot start raises
:class:`ToolStartError` (exit 3) or :class:`~holodeck_core.errors.ConfigError` (exit 2) from
``open()``; a tool's own error comes back as ``ToolOutput.error`` for the model to see; a runtime
that died mid-run raises :class:`ToolCrashedError` from ``call()`` so the case is ERROR,
transient (docs/dagster.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from holodeck_core.calls.scheduler import CallScheduler
from holodeck_core.errors import ExecutionError
from holodeck_core.models import LLMProvider, RetrievedChunk, TokenUsage
from holodeck_core.providers.messages import ToolSpec


class ToolStartError(ExecutionError):
    """A tool runtime that cannot start (a crashed server, a failed handshake): the run stops
    before any model call, exit 3."""


class ToolCrashedError(Exception):
    """A runtime that died mid-run (after its one restart, where it has one). The case is
    ERROR and transient: a rerun resumes it."""


@dataclass(frozen=True)
class ToolOutput:
    """What one call returned. ``result`` is what the model reads (text or JSON-able);
    ``retrieval_context``/``chunks`` are set by retrieval tools; ``usage`` counts model tokens
    the tool itself spent (prompt tools, contextual summaries, rerankers)."""

    result: Any = None
    error: str | None = None
    retrieval_context: list[str] | None = None
    chunks: list[RetrievedChunk] | None = None
    usage: TokenUsage | None = None


@dataclass(frozen=True)
class ToolContext:
    """What a runtime may use: the agent's folder, the one call scheduler, a way to make model
    clients (the agent's provider by default), the cache home, the secrets to redact, and for
    retrieval tools the agent's ``embedding_provider`` block and the ``embedding_model`` its
    retrieval tools share."""

    base_dir: Path
    resolve: Callable[[str], Path]
    scheduler: CallScheduler
    agent_model: LLMProvider
    client_factory: Callable[[LLMProvider], Any]
    cache_dir: Path
    secrets: frozenset[str] = frozenset()
    timeout: float | None = None
    embedding_provider: LLMProvider | None = None
    embedding_model: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class ToolRuntime(Protocol):
    """One configured tool (``tools[i]`` of agent.yaml) with a live backend. An MCP server
    offers several functions, so ``specs`` may hold more than one; ``call`` takes the function
    name the model used."""

    config_name: str
    specs: list[ToolSpec]

    async def open(self) -> None: ...

    def identity(self) -> dict[str, Any]: ...

    async def call(self, function: str, arguments: dict[str, Any]) -> ToolOutput: ...

    async def aclose(self) -> None: ...
