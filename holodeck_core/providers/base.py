"""The interface every model backend implements and what the backends share (the factory
that picks one is :mod:`holodeck_core.providers.factory`, so no backend imports a module
importing it)."""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from dataclasses import replace
from types import ModuleType
from typing import Any, Protocol
from urllib.parse import urlsplit

from holodeck_core.calls.batch import BatchAPI, SendAlone, active_batches
from holodeck_core.calls.errors import ModelCallError
from holodeck_core.models import LLMProvider
from holodeck_core.models.outside import repaired_note, valid_text, valid_value
from holodeck_core.providers.messages import Message, ModelCall, ModelReply, ToolCall, ToolSpec
from holodeck_core.providers.table import provider_spec


def sdk_http_client(sdk: ModuleType, endpoint: str | None) -> Any:
    """The HTTP client for an ``openai`` or ``anthropic`` SDK client: the SDK's own aiohttp
    transport (``DefaultAioHttpClient``), else ``None`` (the SDK's default httpx client).

    The default httpx pool scans every open connection for each request (a ``getpeername``
    per connection): at 100 calls in flight it cost more CPU than the rest of the run
    (docs/benchmarks.md). aiohttp refuses credentials in the URL beside the SDK's
    ``Authorization`` header, which httpx accepts, so such endpoints keep httpx."""
    if endpoint and urlsplit(endpoint).username is not None:
        return None
    return sdk.DefaultAioHttpClient()


async def post_openai(
    client: Any, path: str, body: dict[str, Any], cast_to: type[Any], timeout: float | None
) -> Any:
    """``body`` POSTed through an ``openai`` client as its ``create`` sends it, without the
    SDK's walk of the body against its request TypedDicts: our bodies are plain JSON (no
    aliased keys, dates or files), for which that walk returns an equal copy at ~0.5 ms of
    CPU a call (docs/benchmarks.md). Same bytes, headers, auth and response model."""
    options = {"timeout": timeout, "security": {"bearer_auth": True}}
    return await client.post(path, body=body, cast_to=cast_to, options=options)


class ModelClient(Protocol):
    """One provider protocol. Implementations never retry: the scheduler does."""

    model: LLMProvider
    batch_api: BatchAPI | None
    """Its provider's batch API (None: this backend's calls cannot batch)."""

    async def complete(
        self,
        system: str,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        response_schema: dict[str, Any] | None = None,
        timeout: float | None = None,
        top_logprobs: int | None = None,
    ) -> ModelReply: ...

    async def aclose(self) -> None: ...


class SDKClient(ABC):
    """A backend on an official SDK client (``openai`` or ``anthropic``): what the three
    wire protocols share is here once — the provider's error classes, the timed call that
    turns every SDK exception into a :class:`~holodeck_core.calls.errors.ModelCallError`,
    closing the client. A backend says how it builds a request, sends it and reads the reply."""

    def __init__(self, model: LLMProvider, client: Any) -> None:
        self.model = model
        spec = provider_spec(model.provider)
        self._classify = spec.classify_error
        self._client = client
        self.batch_api: BatchAPI | None = self.batches(client) if spec.batches else None

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(
        self,
        system: str,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        response_schema: dict[str, Any] | None = None,
        timeout: float | None = None,
        top_logprobs: int | None = None,
    ) -> ModelReply:
        request = self.request(ModelCall(system, messages, tools, response_schema, top_logprobs))
        started = time.perf_counter()
        batches = active_batches() if self.batch_api is not None else None
        try:
            if batches is not None and self.batch_api is not None:
                response = await batches.request(self.batch_api, request)
            else:
                response = await self.send(request, timeout)
        except (SendAlone, ModelCallError):
            raise
        except Exception as exc:
            raise self._classify(exc) from exc
        return valid_reply(self.reply(response, int((time.perf_counter() - started) * 1000)))

    @abstractmethod
    def request(self, call: ModelCall) -> dict[str, Any]:
        """The request body: plain JSON, as the provider receives it."""

    @abstractmethod
    async def send(self, request: dict[str, Any], timeout: float | None) -> Any:
        """One SDK call; its exceptions are classified by :meth:`complete`."""

    def batches(self, client: Any) -> BatchAPI | None:
        """This backend's requests through its provider's batch API (docs/cost.md), if any."""
        return None

    @abstractmethod
    def reply(self, response: Any, elapsed_ms: int) -> ModelReply:
        """The SDK's response as a :class:`ModelReply` (a malformed one raises)."""


def valid_reply(reply: ModelReply) -> ModelReply:
    """``reply`` with its text, tool calls (names, arguments, keys), log probabilities and
    replayed items valid Unicode, and a note when anything had to be replaced
    (:mod:`holodeck_core.models.outside`); every protocol's reply passes here once."""
    text, replaced = valid_text(reply.text)
    calls: list[ToolCall] = []
    for call in reply.tool_calls:
        (call_id, name, raw), count = valid_value([call.id, call.name, call.raw_arguments])
        arguments, more = valid_value(call.arguments)
        replaced += count + more
        calls.append(replace(call, id=call_id, name=name, raw_arguments=raw, arguments=arguments))
    extras, count = valid_value(
        [reply.logprobs, list(reply.replay), reply.finish_reason, reply.system_fingerprint]
    )
    replaced += count
    if not replaced:
        return reply
    logprobs, replay, finish_reason, fingerprint = extras
    return replace(
        reply,
        text=text,
        tool_calls=calls,
        logprobs=logprobs,
        replay=tuple(replay),
        finish_reason=finish_reason,
        system_fingerprint=fingerprint,
        notes=(*reply.notes, repaired_note("the model's reply", replaced)),
    )


def parse_tool_call(call_id: str, name: str, raw: str | dict[str, Any] | None) -> ToolCall:
    """A tool call whose arguments may be invalid JSON: keep the raw text and the reason."""
    if isinstance(raw, dict):
        return ToolCall(id=call_id, name=name, raw_arguments=json.dumps(raw), arguments=raw)
    text = raw or "{}"
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        return ToolCall(call_id, name, text, None, f"invalid JSON arguments: {exc.msg}")
    if not isinstance(parsed, dict):
        return ToolCall(call_id, name, text, None, "arguments must be a JSON object")
    return ToolCall(id=call_id, name=name, raw_arguments=text, arguments=parsed)
