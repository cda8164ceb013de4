"""Where an orchestrator keeps the stages' outputs between steps (docs/scale-out.md): a local
folder, or object storage reached with bounded timeouts and retries and the credentials the
orchestrator holds."""

from __future__ import annotations

from typing import Any

from upath import UPath

from holodeck_core.config import remote


def artifact_base(
    base_url: str,
    *,
    key: str | None = None,
    secret: str | None = None,
    endpoint_url: str | None = None,
) -> UPath:
    """The base of the outputs: ``base_url`` as a path; on object storage with the given
    credentials (what is not given, the client finds in the environment)."""
    options: dict[str, Any] = {}
    if "://" in base_url and not base_url.startswith("file://"):
        given = {"key": key, "secret": secret, "endpoint_url": endpoint_url}
        options = {**remote.s3_options(), **{name: value for name, value in given.items() if value}}
    base: UPath = UPath(base_url, **options)
    remote.bounded(base.fs)
    return base
