"""What a prompt tool's Handlebars template may read (issue 25, class 5): the tool's arguments
as data (names, nested keys, list items), never an attribute of a Python object. Checked when
the agent loads, so ``validate`` and ``test`` reject such a template before any model call;
:mod:`holodeck_core.tools.templates` enforces the same at render time."""

from __future__ import annotations

import re
from typing import Any

_SCALARS = frozenset({"string", "number", "integer", "boolean"})
_TAG = re.compile(r"\{\{\{?~?[#/^&>]?(?P<body>.*?)~?\}?\}\}", re.DOTALL)
_PATH = re.compile(r"(?<![\"'=\w@./-])[@A-Za-z_][\w@./-]*+")


def attribute_path(source: str, parameters: dict[str, Any]) -> str | None:
    """The first path of ``source`` that reads an attribute: a ``_``-prefixed segment, or a
    segment below a parameter declared a string, number or boolean; None if there is none."""
    for tag in _TAG.finditer(source):
        body = tag["body"]
        if body.startswith("!"):  # a comment
            continue
        path: str
        for path in _PATH.findall(body):
            segments = [s for s in re.split(r"[./]", path) if s and s != ".."]
            spec = parameters.get(segments[0]) if segments else None
            scalar = isinstance(spec, dict) and spec.get("type") in _SCALARS
            if any(s.startswith("_") for s in segments) or (scalar and len(segments) > 1):
                return path
    return None


def attribute_problem(source: str, parameters: dict[str, Any]) -> str | None:
    """The message for :func:`attribute_path`'s finding, or None."""
    path = attribute_path(source, parameters)
    if path is None:
        return None
    return (
        f"`{path}` reads an attribute; a template reads the tool's arguments as data only "
        "(names, nested keys, list items)"
    )
