"""What really went wrong under an SDK exception, read from its chain of causes.

The SDKs' aiohttp transport reports a refused connection as ``ConnectTimeout`` (so the
``openai`` SDK raises ``APITimeoutError: Request timed out.``) and a dropped one as
``Connection error.``; the socket error that says why sits at the bottom of ``__cause__``.
:func:`transport_failure` finds it and names the endpoint, so a model server that is not
running reads "cannot connect to http://127.0.0.1:19181/v1: connection refused"."""

from __future__ import annotations

import errno
import re
from collections.abc import Iterator
from urllib.parse import urlsplit

from holodeck_core.calls.errors import CallErrorKind

# the API routes the SDKs append to a base URL: what is left is the endpoint a user configured
_ROUTE = re.compile(r"/(chat/completions|completions|messages|embeddings|responses)/?$")

_ERRNO_REASONS = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset by the server",
    errno.ECONNABORTED: "connection aborted",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
    errno.EPIPE: "the server closed the connection",
}


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what caused it, outermost first (cycles cut)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def transport_failure(exc: BaseException) -> tuple[CallErrorKind, str] | None:
    """``"cannot connect to <endpoint>: <reason>"`` (or the dropped-connection equivalent)
    when a socket-level failure is in ``exc``'s chain, a malformed-response error when the
    server answered something that is not HTTP, else ``None`` (a real timeout, an HTTP status,
    a bug: the caller's other rules decide). Both kinds are transient."""
    chain = list(causes(exc))
    endpoint = _endpoint(chain)
    names = {cls.__name__ for e in chain for cls in type(e).__mro__}
    connecting = "ClientConnectorError" in names or "ConnectError" in names
    for error in chain:
        reason = _ERRNO_REASONS.get(getattr(error, "errno", None) or -1)
        if reason is None and isinstance(error, ConnectionRefusedError):
            reason = "connection refused"
        if reason is not None:
            verb = "cannot connect to" if connecting else "lost the connection to"
            return CallErrorKind.CONNECTION, f"{verb} {endpoint}: {reason}"
    if "ServerDisconnectedError" in names or "RemoteProtocolError" in names:
        why = "closed the connection without answering (server disconnected)"
    elif "ClientConnectionResetError" in names:
        why = "closed the connection before the request was sent"
    elif "HttpProcessingError" in names:
        return CallErrorKind.MALFORMED, f"{endpoint} did not answer in HTTP (bad status line)"
    else:
        return None
    return CallErrorKind.CONNECTION, f"{endpoint} {why}"


def _endpoint(chain: list[BaseException]) -> str:
    """The endpoint the failed request went to: scheme, host, port and base path only (no
    userinfo, no query: a key in a URL never reaches a message)."""
    for error in chain:
        url = getattr(getattr(error, "request", None), "url", None)
        if url is None:
            url = getattr(getattr(error, "request_info", None), "url", None)
        if url is not None:
            parts = urlsplit(str(url))
            if parts.hostname:
                host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
                port = f":{parts.port}" if parts.port else ""
                path = _ROUTE.sub("", parts.path)
                return f"{parts.scheme}://{host}{port}{path}"
    return "the model endpoint"
