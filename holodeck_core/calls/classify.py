"""Map exceptions of the ``openai`` and ``anthropic`` SDKs onto :class:`ModelCallError`.

Both SDKs are generated from the same template and share exception names and attributes, so
one classifier serves both without importing either."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from time import time

from holodeck_core.calls.causes import transport_failure
from holodeck_core.calls.errors import CallErrorKind, ModelCallError
from holodeck_core.models.outside import ImplausibleCount


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), if present and
    readable: never negative, possibly ``inf`` or huge (the scheduler caps what it waits);
    ``None`` for garbage (``nan``, words, a bad date), so plain back-off applies."""
    if not headers:
        return None
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    value = headers.get("retry-after")
    if not value:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time())
    except (TypeError, ValueError, OverflowError, IndexError):
        return None


def _number(text: str | None) -> float | None:
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else max(0.0, value)


def status_error(
    status: int, message: str, headers: Mapping[str, str] | None = None
) -> ModelCallError:
    """An HTTP error status as a call error: 429 and 5xx are transient (429 with its
    Retry-After), 401/403 an auth error, any other status a bad request."""
    if status == 429:
        kind = CallErrorKind.RATE_LIMIT
    elif status >= 500:
        kind = CallErrorKind.SERVER
    elif status in (401, 403):
        kind = CallErrorKind.AUTH
    else:
        kind = CallErrorKind.BAD_REQUEST
    return ModelCallError(kind, message, status=status, retry_after=retry_after_seconds(headers))


def classify(exc: BaseException) -> ModelCallError:
    if isinstance(exc, ModelCallError):
        return exc
    if isinstance(exc, ImplausibleCount):
        return ModelCallError(CallErrorKind.IMPLAUSIBLE, str(exc))
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    message = _message(exc)
    # before the type: the aiohttp transport dresses a refused connection as a timeout
    failure = transport_failure(exc)
    if failure is not None:
        return ModelCallError(*failure)
    if name == "APITimeoutError" or isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return ModelCallError(CallErrorKind.TIMEOUT, message or "the model call timed out")
    if name == "APIConnectionError":
        return ModelCallError(CallErrorKind.CONNECTION, message or "connection failed")
    if isinstance(status, int):
        return status_error(status, message, headers)
    if name == "APIResponseValidationError" or isinstance(exc, json.JSONDecodeError | KeyError):
        return ModelCallError(CallErrorKind.MALFORMED, message or "malformed response body")
    if isinstance(exc, OSError):  # sockets and the like under the SDK
        return ModelCallError(CallErrorKind.CONNECTION, f"{name}: {message}")
    # anything else is deterministic (a bad request built here, a bug): retrying won't help
    return ModelCallError(CallErrorKind.INTERNAL, f"{name}: {message}")


def _message(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    return " ".join(str(exc).split())[:300]
