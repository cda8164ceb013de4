"""A provider-neutral conversation: what the tool loop keeps and each backend translates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from holodeck_core.models import TokenUsage


@dataclass(frozen=True)
class Image:
    """An image input: raw bytes and their MIME type."""

    mime_type: str
    data_base64: str


@dataclass(frozen=True)
class ToolCall:
    """A tool call requested by the model. ``arguments`` is None when the model sent JSON
    we could not parse; ``parse_error`` then says why and the call gets an error result."""

    id: str
    name: str
    raw_arguments: str
    arguments: dict[str, Any] | None
    parse_error: str | None = None


@dataclass
class Message:
    role: Literal["user", "assistant", "tool"]
    text: str = ""
    images: list[Image] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False
    replay: tuple[dict[str, Any], ...] = ()
    """An assistant turn's output items as the Responses API returned them, sent back as
    they are in the next request (the openai-agents SDK's way); other protocols ignore it."""


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it: name, description and a JSON Schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]
    from_server: bool = False
    """An MCP server's own input schema, which HoloDeck's SDK sends as the server gave it
    (the schemas of HoloDeck's own tools are closed: ``additionalProperties: false``)."""


@dataclass(frozen=True)
class ModelCall:
    """What one model call asks, whatever the wire protocol: a backend builds its request
    body from it."""

    system: str
    messages: list[Message]
    tools: list[ToolSpec] | None = None
    response_schema: dict[str, Any] | None = None
    top_logprobs: int | None = None


@dataclass(frozen=True)
class ModelReply:
    text: str
    tool_calls: list[ToolCall]
    usage: TokenUsage
    model_ms: int
    finish_reason: str | None = None
    system_fingerprint: str | None = None
    logprobs: list[dict[str, Any]] | None = None
    replay: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    """What was made valid in the reply (lone surrogates replaced): kept on the case."""
