"""What a prompt tool's Handlebars template may read (docs/agent-yaml.md): the tool's arguments
as data (names, nested keys, list items), never an attribute of a Python object, and at most
:data:`~holodeck_core.defaults.MAX_TEMPLATE_CHARS` long. Checked when
the agent loads, so ``validate`` and ``test`` reject such a template before any model call;
:mod:`holodeck_core.tools.templates` enforces the same at render time."""

from __future__ import annotations

import re
from typing import Any

from holodeck_core.defaults import MAX_TEMPLATE_CHARS

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


def template_problem(source: str, parameters: dict[str, Any]) -> str | None:
    """What is wrong with ``source``, or None: longer than :data:`MAX_TEMPLATE_CHARS` (pybars
    compiles in time proportional to it), or a path of :func:`attribute_path`."""
    if len(source) > MAX_TEMPLATE_CHARS:
        return (
            f"the template is {len(source):,} characters; a prompt tool's template may hold "
            f"at most {MAX_TEMPLATE_CHARS:,} (put long reference text in a vectorstore tool or "
            "in the agent's instructions)"
        )
    path = attribute_path(source, parameters)
    if path is None:
        return None
    return (
        f"`{path}` reads an attribute; a template reads the tool's arguments as data only "
        "(names, nested keys, list items)"
    )
