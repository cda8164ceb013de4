"""``response_path``: grade one JSON leaf of the response (HoloDeck 0.7.1 grammar).

Paths are keys and non-negative indices, no JSONPath operators: ``answer``,
``result.value``, ``items[0].score``, ``data.items[2].score``. A string leaf is graded as is;
numbers, booleans and null as their JSON text (``0.332``, ``true``, ``null``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from holodeck_core.metrics.base import MetricError, ResponseRejected
from holodeck_core.models.base import JSON_PATH

PATH_RE = JSON_PATH
_TOKEN_RE = re.compile(r"([A-Za-z_][\w-]*)|\[(\d+)\]")


def path_tokens(path: str) -> list[str | int]:
    """``items[0].score`` -> ``["items", 0, "score"]``; a path outside the grammar is a
    configuration error (:class:`MetricError`)."""
    if not PATH_RE.match(path):
        raise MetricError(
            f"response_path {path!r} is not a valid path (use keys and [index], "
            "e.g. answer, result.value, items[0].score)"
        )
    return [key if key else int(index) for key, index in _TOKEN_RE.findall(path)]


def extract_leaf(response: str, path: str) -> str:
    """The leaf at ``path`` of the JSON document ``response``, as text.

    Raises :class:`ResponseRejected` when the response is not JSON, the path is missing or
    the leaf is an object or array.
    """
    tokens = path_tokens(path)
    try:
        cursor: Any = json.loads(response)
    except ValueError as exc:
        snippet = response[:80].replace("\n", " ")
        raise ResponseRejected(
            f"response_path={path!r} but the response is not JSON ({exc}); got {snippet!r}"
        ) from None
    for token in tokens:
        if isinstance(token, int):
            if not isinstance(cursor, list):
                raise ResponseRejected(
                    f"response_path={path!r}: expected a list at [{token}], "
                    f"got {type(cursor).__name__}"
                )
            if token >= len(cursor):
                raise ResponseRejected(
                    f"response_path={path!r}: index [{token}] out of range (len={len(cursor)})"
                )
            cursor = cursor[token]
        else:
            if not isinstance(cursor, dict):
                raise ResponseRejected(
                    f"response_path={path!r}: expected an object at key {token!r}, "
                    f"got {type(cursor).__name__}"
                )
            if token not in cursor:
                raise ResponseRejected(
                    f"response_path={path!r}: key {token!r} not found (available: {sorted(cursor)})"
                )
            cursor = cursor[token]
    if isinstance(cursor, dict | list):
        kind = "an object" if isinstance(cursor, dict) else "an array"
        raise ResponseRejected(
            f"response_path={path!r}: the leaf is {kind}, expected a string, number, "
            "boolean or null"
        )
    return cursor if isinstance(cursor, str) else json.dumps(cursor)
