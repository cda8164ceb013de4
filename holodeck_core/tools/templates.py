"""Handlebars templates of ``type: prompt`` tools, data only (docs/agent-yaml.md).

pybars resolves a path segment it does not find as a key with ``getattr`` and calls what it
finds: ``{{q.upper}}`` calls ``str.upper``, ``{{q.__class__}}`` builds a list from a scope that
never ends (memory grows until the machine gives up). Here a template sees plain data (the
model's JSON arguments: dicts, lists, strings, numbers) and a path only reads keys, list
indexes and ``length``; anything else is empty. ``validate`` rejects, before any model call, a
path that reads an attribute of a declared string, number or boolean, or any ``_``-prefixed
segment. Rendering runs off the event loop under a deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pybars

from holodeck_core.config.templates import template_problem
from holodeck_core.defaults import TEMPLATE_RENDER_S
from holodeck_core.errors import ConfigError
from holodeck_core.tools.untrusted import in_daemon_thread

_SCOPE_NAMES = frozenset({"@root", "@_parent", "@index", "@key", "@first", "@last", "this"})


def compile_template(
    source: str, parameters: dict[str, Any], *, where: str
) -> Callable[[dict[str, Any]], str]:
    """The render function of ``source``, or a ConfigError naming ``where`` and the path (or
    the size: compiling takes time in proportion to it)."""
    problem = template_problem(source, parameters)
    if problem:
        raise ConfigError(f"{where}: {problem}")
    return data_template(source, where=where)


def data_template(source: str, *, where: str) -> Callable[[dict[str, Any]], str]:
    """The render function of ``source`` whose paths read data only, whatever they name."""
    try:
        render = pybars.Compiler().compile(source)
    except Exception as exc:  # pybars raises its own and PyMeta parse errors
        raise ConfigError(f"{where}: not a valid Handlebars template: {exc}") from None
    render.__globals__["resolve"] = _resolve  # this template's module only

    def run(arguments: dict[str, Any]) -> str:
        return str(render(_verbatim(arguments)))

    return run


async def render_off_loop(render: Callable[[dict[str, Any]], str], data: dict[str, Any]) -> str:
    """``render(data)`` in a daemon thread, given up after :data:`TEMPLATE_RENDER_S`."""
    async with asyncio.timeout(TEMPLATE_RENDER_S):
        text: str = await in_daemon_thread(render, {"arguments": data})
    return text


def _verbatim(value: Any) -> Any:
    """Plain data, strings marked as already safe (pybars inserts them without escaping)."""
    if isinstance(value, str):
        return pybars.strlist([value]) if value else value
    if isinstance(value, dict):
        return {str(key): _verbatim(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_verbatim(item) for item in value]
    return value if isinstance(value, int | float | bool) or value is None else str(value)


def _pick(value: Any, segment: str) -> Any:
    """One step of a path through data: a key, a list index or a list's ``length``."""
    if isinstance(value, pybars.Scope):
        if segment in _SCOPE_NAMES or (value.overrides and segment in value.overrides):
            return value.get(segment)
        return _pick(value.context, segment)
    if isinstance(value, dict):
        return value.get(segment)
    if type(value) is list:
        if segment == "length":
            return len(value)
        if segment.isdigit() and int(segment) < len(value):
            return value[int(segment)]
    return None


def _resolve(context: Any, *segments: str) -> Any:
    """pybars' ``resolve`` (``@../index`` included) with :func:`_pick` for every step."""
    if segments == ("",) and isinstance(context, pybars.Scope):  # a bare ``this``
        return context.get("this")
    carry = False
    for segment in segments:
        if carry:
            carry, segment = False, f"@{segment}"
        if segment[:2] == "@@" and len(segment) > 1:
            segment, carry = segment[1:], True
        if context is None:
            return None
        if segment in (None, ""):
            continue
        context = _pick(context, segment)
    return context
