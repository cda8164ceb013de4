"""Text and numbers from outside (model replies, tool results, target outputs) made valid
once, where they come in (docs/history.md, "Text and numbers from outside").

Text that is not valid Unicode (a lone surrogate such as ``\\ud800``, which JSON may escape)
cannot be written as UTF-8: it would crash the journal, the EvalRun and the history. It is
replaced with U+FFFD and a note says so. A token count past
:data:`~holodeck_core.defaults.MAX_CALL_TOKENS` is no real count: :class:`ImplausibleCount`,
which the call layer makes the call's error."""

from __future__ import annotations

import json
import math
from typing import Any

from holodeck_core.defaults import MAX_CALL_TOKENS
from holodeck_core.models.results import TokenUsage

REPLACEMENT = "\ufffd"
BIGINT_MAX = 2**63 - 1
"""The largest integer a history column (DuckDB's BIGINT) holds."""


class ImplausibleCount(ValueError):
    """A number from outside past any plausible value; the message names the field."""


def valid_text(text: str) -> tuple[str, int]:
    """``text`` as valid Unicode, and how many lone surrogates became U+FFFD (a high and a low
    surrogate in a row are joined into their character)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return fixed, fixed.count(REPLACEMENT) - text.count(REPLACEMENT)
    return text, 0


def valid_value(value: Any) -> tuple[Any, int]:
    """A JSON value (a tool's arguments or result) with every string and key valid, and how
    many lone surrogates were replaced. Anything else JSON cannot hold is left as it is."""
    if isinstance(value, str):
        return valid_text(value)
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return value, 0
    fixed, count = valid_text(text)
    return (json.loads(fixed), count) if count else (value, 0)


def repaired_note(what: str, count: int) -> str:
    """The note a case carries when ``what`` had ``count`` lone surrogates replaced."""
    return (
        f"{what} was not valid Unicode: {count} lone surrogate(s) replaced with U+FFFD "
        "(docs/history.md)"
    )


def plausible_count(value: Any, field: str, limit: int = MAX_CALL_TOKENS) -> int:
    """``value`` as a token count: a non-negative integer up to ``limit``, else
    :class:`ImplausibleCount` naming ``field``. Missing (None) counts 0."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ImplausibleCount(f"{field} is {_shown(value)}, not a count of tokens")
    if value > limit:
        raise ImplausibleCount(
            f"{field} is {_shown(value)}, more than any call uses (MAX_CALL_TOKENS = "
            f"{limit:,} in holodeck_core/defaults.py): not a real count"
        )
    return value


def checked_counts(where: str, **counts: Any) -> dict[str, int]:
    """The token counts a reply reported, by their names there, each checked by
    :func:`plausible_count` as ``<where>.<name>``."""
    return {name: plausible_count(value, f"{where}.{name}") for name, value in counts.items()}


def call_usage(where: str, **counts: Any) -> TokenUsage:
    """A call's :class:`TokenUsage` from counts reported under its own names
    (``prompt_tokens=...``), checked by :func:`checked_counts`."""
    return TokenUsage(**checked_counts(where, **counts))


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an integer past Python's digit limit
        return "a number of thousands of digits"
    return text if len(text) <= 40 else f"{text[:20]}…({len(text)} characters)"


def invalid_at(value: Any, limit: int = BIGINT_MAX) -> tuple[str, str] | None:
    """The first place in ``value`` (dicts, lists, scalars, as a model dumps) that no history
    can hold, as ``(path, why)``: a string or key that is not valid Unicode, a number that is
    not finite, an integer past ``limit``. None when every value is fine."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for key, child in node.items():
                where = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and valid_text(key)[1]:
                    return path or "(top)", f"the key {key!r} is not valid Unicode"
                stack.append((where, child))
        elif isinstance(node, list | tuple):
            stack.extend((f"{path}.{index}", child) for index, child in enumerate(node))
        elif isinstance(node, str) and valid_text(node)[1]:
            return path, "text that is not valid Unicode (a lone surrogate)"
        elif isinstance(node, float) and not math.isfinite(node):
            return path, f"{node} is not a finite number"
        elif isinstance(node, int) and not isinstance(node, bool) and abs(node) > limit:
            return path, f"{_shown(node)} is past the history's 64-bit integers"
    return None
