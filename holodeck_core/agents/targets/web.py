"""The targets that speak JSON over HTTP: ``http`` (a body template and paths into the reply,
as promptfoo's http provider), ``openai_chat`` (an OpenAI-compatible ``/chat/completions``)
and ``holodeck_serve`` (HoloDeck 0.7.1's REST ``POST /agent/<name>/chat``).

A status other than 2xx is a call error classified like a model call's (429 and 5xx
transient, with Retry-After; 401/403 auth; other 4xx permanent); a refused or dropped
connection is transient; a 2xx reply the paths cannot read is a malformed reply (transient),
unless it is the target's own error object (``{"error": ...}``), which is the response."""

from __future__ import annotations

import base64
import json
import mimetypes
import re
from pathlib import Path
from typing import Any

import aiohttp
from yarl import URL

from holodeck_core.agents.loop import TurnInput
from holodeck_core.agents.targets.base import Reply, Session, lookup, unreadable, usage_of
from holodeck_core.calls.classify import status_error
from holodeck_core.calls.errors import CallErrorKind, ModelCallError
from holodeck_core.defaults import MAX_TARGET_REDIRECTS, MAX_TARGET_REPLY_BYTES
from holodeck_core.models import ProcessedFileInput, ToolInvocation
from holodeck_core.models.target import (
    TEMPLATE_VARIABLE,
    HolodeckServeTarget,
    HttpTarget,
    OpenAIChatTarget,
)

SERVE_MIME_TYPES = frozenset(
    {
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "application/pdf",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "text/plain",
        "text/csv",
        "text/markdown",
    }
)
"""What HoloDeck 0.7.1's ``FileContent`` accepts (``holodeck/serve/models.py``)."""


class HttpExchange:
    """One aiohttp session per target, opened on the first call; the scheduler, not the
    connection pool, bounds the calls in flight. Redirects are followed by hand, within the
    target's origin only (:data:`MAX_TARGET_REDIRECTS`), and a reply body is read up to
    :data:`MAX_TARGET_REPLY_BYTES` (docs/targets.md, "Errors, limits and retries")."""

    def __init__(self, headers: dict[str, str]) -> None:
        self._headers = headers
        self._session: aiohttp.ClientSession | None = None

    async def json(self, method: str, url: str, body: Any) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers=self._headers, connector=aiohttp.TCPConnector(limit=0)
            )
        try:
            text = await self._exchange(self._session, method, URL(url), body)
        except aiohttp.ClientError as exc:
            raise ModelCallError(
                CallErrorKind.CONNECTION, f"{type(exc).__name__}: {exc}".rstrip(": ")
            ) from exc
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise unreadable(f"the reply is not JSON: {' '.join(text.split())[:120]!r}") from None

    async def _exchange(
        self, session: aiohttp.ClientSession, method: str, url: URL, body: Any
    ) -> str:
        """The 2xx reply's text, after at most :data:`MAX_TARGET_REDIRECTS` redirects within
        ``url``'s origin; a 301/302/303 turns a POST into a body-less GET, as browsers do."""
        for _ in range(MAX_TARGET_REDIRECTS + 1):
            async with session.request(
                method,
                url,
                json=None if method in BODYLESS else body,
                allow_redirects=False,
            ) as response:
                if response.status in REDIRECTS:
                    url = same_origin_location(url, response)
                    if response.status in (301, 302, 303) and method not in BODYLESS:
                        method = "GET"
                    continue
                if not 200 <= response.status < 300:  # only its start is shown
                    head = decoded(await response.content.read(READ_BYTES), response)
                    raise status_error(
                        response.status,
                        f"HTTP {response.status}: {' '.join(head.split())[:200]}",
                        dict(response.headers),
                    )
                return await capped_text(response)
        raise ModelCallError(
            CallErrorKind.REJECTED,
            f"more than {MAX_TARGET_REDIRECTS} redirects (MAX_TARGET_REDIRECTS); "
            "set url to the address that answers",
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


BODYLESS = frozenset({"GET", "HEAD"})
REDIRECTS = frozenset({301, 302, 303, 307, 308})


def same_origin_location(url: URL, response: aiohttp.ClientResponse) -> URL:
    """Where a redirect points, if it stays on ``url``'s scheme, host and port; else a
    :data:`CallErrorKind.REJECTED` error naming the other origin (never its path or query,
    which may carry a token)."""
    status = response.status
    try:
        target = url.join(URL(response.headers.get("Location", "")))
        origin = str(target.origin())
    except ValueError:  # no Location, or not a URL
        raise ModelCallError(
            CallErrorKind.REJECTED, f"HTTP {status} without a readable Location", status=status
        ) from None
    if (target.scheme, target.host, target.port) == (url.scheme, url.host, url.port):
        return target
    raise ModelCallError(
        CallErrorKind.REJECTED,
        f"HTTP {status} redirects to another origin, {origin}: not followed (the target's "
        f"headers and body go only to {url.origin()}); set url to the address it moves to",
        status=status,
    )


async def capped_text(response: aiohttp.ClientResponse) -> str:
    """The body as text, read up to :data:`MAX_TARGET_REPLY_BYTES`: a larger Content-Length
    is refused before a byte is read, a longer body once the bound is passed."""
    limit = MAX_TARGET_REPLY_BYTES
    declared = response.content_length
    if declared is not None and declared > limit:
        raise too_large(f"its Content-Length is {declared:,} bytes")
    data = bytearray()
    async for chunk in response.content.iter_chunked(READ_BYTES):
        data += chunk
        if len(data) > limit:
            raise too_large("the body ran past it")
    return decoded(bytes(data), response)


READ_BYTES = 64 * 1024
"""A body is read this much at a time (and an error status's body only this much)."""


def decoded(data: bytes, response: aiohttp.ClientResponse) -> str:
    try:
        return data.decode(response.charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return data.decode("utf-8", errors="replace")


def too_large(why: str) -> ModelCallError:
    return ModelCallError(
        CallErrorKind.REJECTED,
        f"the reply is larger than the limit of {MAX_TARGET_REPLY_BYTES:,} bytes "
        f"(MAX_TARGET_REPLY_BYTES): {why}",
    )


def _own_error(body: Any, missing: ModelCallError) -> str:
    """A 2xx reply carrying the target's own error is the response; else ``missing``."""
    if isinstance(body, dict) and body.get("error") is not None:
        return json.dumps(body, ensure_ascii=False)
    raise missing


def _files(files: list[ProcessedFileInput], resolve: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": item.original.description or item.original.path or item.original.url,
            "type": item.original.type,
            "path": str(resolve(item.original.path)) if item.original.path else None,
            "url": item.original.url,
            "markdown": item.markdown_content,
        }
        for item in files
    ]


def render(template: Any, values: dict[str, Any]) -> Any:
    """The body template with ``{{name}}`` filled in: a string that is exactly one variable
    takes the value itself (a list, a number, null), others get its text."""
    if isinstance(template, dict):
        return {key: render(value, values) for key, value in template.items()}
    if isinstance(template, list):
        return [render(value, values) for value in template]
    if not isinstance(template, str):
        return template
    whole = TEMPLATE_VARIABLE.fullmatch(template.strip())
    if whole:
        return values[whole.group(1)]

    def text(match: re.Match[str]) -> str:
        value = values[match.group(1)]
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    return TEMPLATE_VARIABLE.sub(text, template)


def tool_invocations(calls: Any, where: str) -> list[ToolInvocation]:
    """``[{name, arguments, result?, error?, status?}]`` (arguments an object or its JSON
    text; OpenAI's ``{function: {name, arguments}}`` too) as invocations; ``status:
    error`` without an ``error`` text becomes one."""
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise unreadable(f"{where} is not a list")
    out: list[ToolInvocation] = []
    for call in calls:
        item = call.get("function", call) if isinstance(call, dict) else None
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise unreadable(f"a tool call in {where} has no name: {str(call)[:80]!r}")
        arguments = item.get("arguments") or {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}")
            except json.JSONDecodeError:
                arguments = {"_raw": arguments}
        error = call.get("error") if isinstance(call, dict) else None
        if error is None and isinstance(call, dict) and call.get("status") == "error":
            error = "the tool reported status: error"
        out.append(
            ToolInvocation.of(
                item["name"],
                arguments if isinstance(arguments, dict) else {"_value": arguments},
                call.get("result") if isinstance(call, dict) else None,
                error=None if error is None else str(error),
            )
        )
    return out


class HttpClient:
    assigns_session = False

    def __init__(self, spec: HttpTarget, resolve: Any) -> None:
        self.spec = spec
        self._resolve = resolve
        headers = {name: value.get_secret_value() for name, value in spec.headers.items()}
        self._http = HttpExchange(headers)

    async def send(self, turn: TurnInput, index: int, session: Session) -> Reply:
        values = {
            "input": turn.message,
            "turn": index,
            "session": session.id,
            "messages": list(session.messages),
            "files": _files(turn.files, self._resolve),
        }
        request = render(self.spec.body, values)
        body = await self._http.json(self.spec.method, self.spec.url, request)
        paths = self.spec.response
        if paths.text is None:
            text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
        else:
            try:
                found = lookup(body, paths.text)
            except ModelCallError as exc:
                text = _own_error(body, exc)
            else:
                text = found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)
        return Reply(
            text=text,
            invocations=tool_invocations(_optional(body, paths.tool_calls), paths.tool_calls or ""),
            usage=usage_of(_optional(body, paths.usage)),
            session=_text(_optional(body, paths.session)),
        )

    async def ready(self, session: Session) -> None:
        """An HTTP endpoint has nothing to start."""

    async def aclose(self) -> None:
        await self._http.aclose()


def _optional(body: Any, path: str | None) -> Any:
    """A part the paths name and the reply may omit (no tools called, no usage)."""
    if path is None:
        return None
    try:
        return lookup(body, path)
    except ModelCallError:
        return None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


class OpenAIChatTargetClient:
    """The conversation so far as ``messages`` (the agent behind the endpoint has its own
    system prompt and tools); the reply's ``tool_calls`` are the agent's invocations."""

    assigns_session = False

    def __init__(self, spec: OpenAIChatTarget) -> None:
        self.spec = spec
        headers = {name: value.get_secret_value() for name, value in spec.headers.items()}
        if spec.api_key is not None:
            headers.setdefault("Authorization", f"Bearer {spec.api_key.get_secret_value()}")
        self._http = HttpExchange(headers)
        self._url = spec.url.rstrip("/") + "/chat/completions"

    async def send(self, turn: TurnInput, index: int, session: Session) -> Reply:
        request = {"model": self.spec.model, "messages": list(session.messages)}
        body = await self._http.json("POST", self._url, request)
        try:
            message = lookup(body, "choices[0].message")
        except ModelCallError as exc:
            return Reply(text=_own_error(body, exc), usage=usage_of(_optional(body, "usage")))
        if not isinstance(message, dict):
            raise unreadable("choices[0].message is not an object")
        content = message.get("content")
        return Reply(
            text=content if isinstance(content, str) else "",
            invocations=tool_invocations(message.get("tool_calls"), "choices[0].message"),
            usage=usage_of(body.get("usage")),
        )

    async def ready(self, session: Session) -> None:
        """An HTTP endpoint has nothing to start."""

    async def aclose(self) -> None:
        await self._http.aclose()


class HolodeckServeClient:
    """``ChatRequest{message, session_id, files}`` → ``ChatResponse{content, session_id,
    tool_calls[{name, arguments, status}], tokens_used, execution_time_ms}``; the session id
    the server returns is sent back on the next turn."""

    assigns_session = True

    def __init__(self, spec: HolodeckServeTarget, agent_name: str, resolve: Any) -> None:
        self._resolve = resolve
        self._http = HttpExchange({})
        self._url = f"{spec.url.rstrip('/')}/agent/{spec.agent or agent_name}/chat"

    async def send(self, turn: TurnInput, index: int, session: Session) -> Reply:
        request: dict[str, Any] = {"message": turn.message, "session_id": session.id}
        if turn.files:
            request["files"] = [self._file_content(item) for item in turn.files]
        body = await self._http.json("POST", self._url, request)
        if not isinstance(body, dict) or not isinstance(body.get("content"), str):
            return Reply(text=_own_error(body, unreadable("the reply is not a ChatResponse")))
        return Reply(
            text=body["content"],
            invocations=tool_invocations(body.get("tool_calls"), "tool_calls"),
            usage=usage_of(body.get("tokens_used")),
            session=_text(body.get("session_id")),
        )

    def _file_content(self, item: ProcessedFileInput) -> dict[str, Any]:
        """The file itself when HoloDeck takes its type, else its Markdown as text/markdown."""
        name = item.original.path or item.original.url or "file"
        mime = mimetypes.guess_type(name)[0]
        if item.original.path and mime in SERVE_MIME_TYPES:
            data = Path(self._resolve(item.original.path)).read_bytes()
            return {
                "content": base64.b64encode(data).decode("ascii"),
                "mime_type": mime,
                "filename": Path(name).name,
            }
        return {
            "content": base64.b64encode(item.markdown_content.encode("utf-8")).decode("ascii"),
            "mime_type": "text/markdown",
            "filename": Path(name).stem + ".md",
        }

    async def ready(self, session: Session) -> None:
        """An HTTP endpoint has nothing to start."""

    async def aclose(self) -> None:
        await self._http.aclose()
