"""JSON from files we did not write (an EvalRun to import, retrieval records), parsed within
bounds (docs/agent-yaml.md): nesting past :data:`~holodeck_core.defaults.MAX_JSON_DEPTH` or an
integer past Python's digit limit is a :class:`BoundedJSONError` saying so, never a
``RecursionError`` or a bare ``ValueError`` traceback."""

from __future__ import annotations

import json
from typing import Any

from holodeck_core.defaults import MAX_JSON_DEPTH


class BoundedJSONError(ValueError):
    """Valid JSON, or nearly, beyond what we read: too deep, or a number too long."""


def loads(data: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads(data)`` within bounds. A syntax error stays a ``json.JSONDecodeError``."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise BoundedJSONError(f"JSON nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise BoundedJSONError(f"a number too long to read: {exc}") from None
    if depth(value, max_depth) > max_depth:
        raise BoundedJSONError(f"JSON nested deeper than {max_depth} levels")
    return value


def depth(value: Any, limit: int) -> int:
    """How deep ``value`` nests (a scalar is 0), counted without recursion and given up past
    ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            deepest = max(deepest, level + 1)
            if deepest > limit:
                return deepest
            stack.extend((child, level + 1) for child in node if isinstance(child, dict | list))
    return deepest
