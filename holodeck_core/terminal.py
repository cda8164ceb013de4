"""Text from configs, models and the history, made safe to show on a terminal.

Rich interprets ``[...]`` in plain strings as markup (``case [/y]`` raises ``MarkupError``,
``[bold]x[/]`` restyles data) and a terminal obeys escape sequences in whatever it prints. So
data is never formatted into a markup string: it goes into :class:`rich.text.Text` through
:func:`plain`, and control characters (ESC, BEL, CR, C1 codes, bidi overrides) are shown as
``\\x1b``-style escapes instead of being sent to the terminal.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

_WORD = re.compile(r"\S+")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every terminal control character written out as ``\\xNN``/``\\uNNNN``
    (newlines and tabs are kept)."""
    return _CONTROL.sub(escape_match, text)


def escape_match(match: re.Match[str]) -> str:
    """The matched character written as ``\\xNN`` / ``\\uNNNN`` (for ``re.sub``)."""
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(text: str, limit: int = 500) -> str:
    """``text`` on one line of at most ``limit`` characters, control characters escaped."""
    words: list[str] = []
    length = -1
    found = _WORD.finditer(text)  # only as far as the limit: a 10 MB reply costs 500
    for word in found:
        words.append(word[0])
        length += len(word[0]) + 1
        if length > limit:
            break
    flat = printable(" ".join(words))
    if len(flat) > limit or next(found, None) is not None:
        return flat[: limit - 1] + "…"
    return flat


def plain(text: object, style: str = "") -> Text:
    """A Rich ``Text`` showing ``text`` literally: no markup, no emoji codes, no escapes."""
    from rich.text import Text

    return Text(printable(str(text)), style=style)
