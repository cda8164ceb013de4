"""Shared building blocks of the data model: a strict base class and the secret type."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    PlainSerializer,
    SecretStr,
    SerializerFunctionWrapHandler,
)

from holodeck_core.redaction import REDACTED

_SEGMENT = r"[A-Za-z_][\w-]*(?:\[\d+\])*"
JSON_PATH = re.compile(rf"^{_SEGMENT}(?:\.{_SEGMENT})*$")
"""A path into JSON: keys and non-negative ``[index]``, no JSONPath operators
(``answer``, ``items[0].score``, ``choices[0].message.content``)."""


class StrictModel(BaseModel):
    """Base of every model: unknown keys are errors, never silently dropped."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _serialize_secret(value: SecretStr | None) -> str | None:
    return None if value is None else REDACTED


Secret = Annotated[SecretStr, PlainSerializer(_serialize_secret, return_type=str | None)]
"""A secret string. It serializes as ``***`` everywhere (docs/architecture.md), so a real value can
only be read with ``get_secret_value()`` and never reaches a file by accident."""


def digest(value: Any) -> str:
    """sha256 of the canonical JSON of ``value`` (fingerprints, cache keys, identities)."""
    import hashlib
    import json

    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def json_bytes(value: Any) -> int:
    """Size of ``value`` as JSON, the way HoloDeck measures ``ToolInvocation.bytes``."""
    import json

    return len(json.dumps(value, default=str))


def omit_if_none(
    model: StrictModel, handler: SerializerFunctionWrapHandler, *names: str
) -> dict[str, Any]:
    """Serialize without ``names`` that are None: an optional addition leaves the files of
    runs that do not use it exactly as they were."""
    data: dict[str, Any] = handler(model)
    for name in names:
        if getattr(model, name) is None:
            data.pop(name, None)
    return data
