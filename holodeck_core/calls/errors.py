"""Errors from model calls, classified once so retries and statuses never guess."""

from __future__ import annotations

from enum import StrEnum


class CallErrorKind(StrEnum):
    RATE_LIMIT = "rate_limit"
    SERVER = "server_error"
    TIMEOUT = "timeout"
    CONNECTION = "connection_error"
    MALFORMED = "malformed_response"
    BAD_REQUEST = "bad_request"
    AUTH = "auth_error"
    INTERNAL = "internal_error"
    TOOL_CRASHED = "tool_crashed"
    IMPLAUSIBLE = "implausible_reply"
    """A reply with a number no real one has (a token count past ``MAX_CALL_TOKENS``): not
    retried, the same server says it again."""
    REJECTED = "rejected_response"
    """An answer refused unread: a redirect off the endpoint's origin, a body over its bound
    (not retried: the same request gets the same answer)."""
    BUDGET = "budget"
    """Not sent: the run's budget would be passed (not retried; a rerun with more resumes)."""

    @property
    def transient(self) -> bool:
        """Worth retrying: the same request may succeed later."""
        return self in _TRANSIENT


_TRANSIENT = frozenset(
    {
        CallErrorKind.RATE_LIMIT,
        CallErrorKind.SERVER,
        CallErrorKind.TIMEOUT,
        CallErrorKind.CONNECTION,
        CallErrorKind.MALFORMED,
        CallErrorKind.TOOL_CRASHED,
    }
)


class ModelCallError(Exception):
    """A failed model call. ``attempts`` counts every try, including the retries."""

    def __init__(
        self,
        kind: CallErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retry_after = retry_after
        self.attempts = attempts

    @property
    def transient(self) -> bool:
        return self.kind.transient

    def __str__(self) -> str:
        status = f" {self.status}" if self.status else ""
        tries = f" after {self.attempts} attempts" if self.attempts > 1 else ""
        return f"{self.kind.value}{status}{tries}: {super().__str__()}"
