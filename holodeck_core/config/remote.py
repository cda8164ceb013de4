"""Remote endpoints of the history and the results (docs/agent-yaml.md): a DuckLake's
PostgreSQL catalog, its data on S3, EvalRuns on object storage. Each client is given the same
bounds (:data:`~holodeck_core.defaults.REMOTE_TIMEOUT_S`, ``HOLODECK_REMOTE_TIMEOUT``, and
:data:`~holodeck_core.defaults.REMOTE_ATTEMPTS`), so an endpoint that accepts a connection and
never answers ends the command, and what goes wrong is said in words naming the endpoint:
the user's input (credentials missing or refused: exit 2) or the infrastructure (refused,
silent, not speaking the protocol: exit 3)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from holodeck_core.defaults import REMOTE_ATTEMPTS, REMOTE_TIMEOUT_S
from holodeck_core.errors import ConfigError, ExecutionError, HolodeckError
from holodeck_core.redaction import redact_text

TIMEOUT_ENV = "HOLODECK_REMOTE_TIMEOUT"
S3_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
_OTHER_CREDENTIALS = (
    "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
)
_REFUSED_CODES = frozenset(
    {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"}
)


def timeout_s() -> float:
    """Seconds per connection or request: ``HOLODECK_REMOTE_TIMEOUT``, else the default."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return REMOTE_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value <= 3600:
        raise ConfigError(
            f"{TIMEOUT_ENV}={raw!r}: give the seconds a remote endpoint may take (0 < s <= 3600)"
        )
    return value


def s3_endpoint() -> str:
    """The S3 endpoint the environment names (``AWS_ENDPOINT_URL[_S3]``), else AWS's."""
    return (
        os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
        or "https://s3.amazonaws.com"
    )


def on_s3(url: str) -> bool:
    return url.startswith(("s3://", "s3a://"))


def require_s3_credentials(what: str, *, keys_only: bool = False) -> None:
    """A ConfigError naming the variables to set when the environment holds no S3
    credentials (``keys_only``: DuckDB, which reads the two keys only; otherwise a profile,
    a shared credentials file or a container's role do too)."""
    if all(os.environ.get(key) for key in S3_KEYS):
        return
    if not keys_only:
        shared = Path(os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials")
        if any(os.environ.get(name) for name in _OTHER_CREDENTIALS) or (
            shared.expanduser().is_file()
        ):
            return
    raise ConfigError(
        f"{redact_text(what)} is on S3 but no S3 credentials are set: export "
        f"{' and '.join(S3_KEYS)} (and AWS_ENDPOINT_URL for a store other than AWS, "
        "AWS_DEFAULT_REGION if it needs one)" + ("" if keys_only else ", or AWS_PROFILE")
    )


def s3_options() -> dict[str, Any]:
    """s3fs options that bound every request: botocore's connect and read timeouts, no
    retries of its own (s3fs retries :data:`REMOTE_ATTEMPTS` times, see :func:`bounded`),
    and the environment's endpoint."""
    seconds = timeout_s()
    options: dict[str, Any] = {
        "config_kwargs": {
            "connect_timeout": seconds,
            "read_timeout": seconds,
            "retries": {"max_attempts": 1, "mode": "standard"},
        }
    }
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:  # in the options, so fsspec's cache of clients keys by it too
        options["endpoint_url"] = endpoint
    return options


def bounded(filesystem: Any) -> Any:
    """An s3fs filesystem retrying :data:`REMOTE_ATTEMPTS` times in all, not its own 5 (a
    class attribute with no constructor argument)."""
    if hasattr(filesystem, "retries"):
        filesystem.retries = REMOTE_ATTEMPTS
    return filesystem


def duckdb_settings() -> list[str]:
    """``SET`` statements bounding DuckDB's HTTP (httpfs: S3 data of a lake)."""
    return [
        f"SET http_timeout = {max(1, round(timeout_s()))}",
        f"SET http_retries = {REMOTE_ATTEMPTS - 1}",
    ]


def postgres_conninfo(conninfo: str) -> str:
    """A libpq URI with ``connect_timeout`` (whole seconds, at least 2 as libpq wants) unless
    the user set one."""
    parts = urlsplit(conninfo)
    query = dict(parse_qsl(parts.query))
    query.setdefault("connect_timeout", str(max(2, round(timeout_s()))))
    return parts._replace(query=urlencode(query)).geturl()


def lake_error(prefix: str, text: str) -> HolodeckError:
    """A DuckDB error reaching a lake's catalog or data, as ``prefix: what it means: DuckDB's
    words`` (one line, redacted): credentials S3 refused are the user's to fix (exit 2), an
    endpoint silent, refusing or garbled is the infrastructure's (exit 3)."""
    said = redact_text(" ".join(text.split()))
    lowered = said.lower()
    if re.search(r"\b403\b", said) or "forbidden" in lowered or "accessdenied" in lowered:
        return ConfigError(
            f"{prefix}: S3 refused the credentials (check {' and '.join(S3_KEYS)}): {said}"
        )
    if any(word in lowered for word in ("timeout expired", "timed out", "timeout was reached")):
        hint = f"no answer within {timeout_s():g} s ({TIMEOUT_ENV} sets the seconds): "
    elif "connection refused" in lowered or "could not connect" in lowered:
        hint = "the connection was refused (is the server running and the port right?): "
    else:
        hint = ""
    return ExecutionError(f"{prefix}: {hint}{said}")


def s3_failure(exc: BaseException, what: str) -> HolodeckError | None:
    """The error to report for ``exc`` raised reaching ``what`` on object storage (botocore's
    errors, and those s3fs turns into ``OSError``), or None when ``exc`` is none of those."""
    try:
        from botocore import exceptions as boto
    except ImportError:  # no object storage client installed: nothing of it was raised
        return None
    where = f"{redact_text(what)} (endpoint {redact_text(s3_endpoint())})"
    said = redact_text(" ".join(str(exc).split()))
    if isinstance(exc, boto.NoCredentialsError):
        try:
            require_s3_credentials(what, keys_only=True)
        except ConfigError as missing:
            return missing
    code = ""
    if isinstance(exc, boto.ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
    if isinstance(exc, PermissionError) or code in _REFUSED_CODES:
        return ConfigError(
            f"{where} refused the credentials: {said} (check {' and '.join(S3_KEYS)}, and "
            "that they may read and write the bucket)"
        )
    if isinstance(exc, (boto.ConnectTimeoutError, boto.ReadTimeoutError, TimeoutError)):
        return ExecutionError(
            f"{where} did not answer within {timeout_s():g} s ({REMOTE_ATTEMPTS} attempts; "
            f"{TIMEOUT_ENV} sets the seconds): {said}"
        )
    if isinstance(exc, boto.EndpointConnectionError | ConnectionError):
        return ExecutionError(f"cannot connect to {where}: {said}")
    if isinstance(exc, boto.BotoCoreError):
        return ExecutionError(f"{where} did not answer as S3 does: {said}")
    if isinstance(exc, OSError | boto.ClientError):
        return ExecutionError(f"cannot reach {where}: {said}")
    return None
