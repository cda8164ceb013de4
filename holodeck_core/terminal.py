"""Text from configs, models and the history, made safe to show on a terminal.

Rich interprets ``[...]`` in plain strings as markup (``case [/y]`` raises ``MarkupError``,
``[bold]x[/]`` restyles data) and a terminal obeys escape sequences in whatever it prints. So
data is never formatted into a markup string: it goes into :class:`rich.text.Text` through
:func:`plain`, and control characters (ESC, BEL, CR, C1 codes, bidi overrides) are shown as
``\\x1b``-style escapes instead of being sent to the terminal.

Under GitHub Actions the runner also reads every line of stdout and stderr that starts with
``::`` (after blanks) as a workflow command, and ``##[`` anywhere in a line as its older form.
:func:`workflow_commands_guarded` filters both streams, so no line of outside text can be
one, however it got there (a name with a newline, a wrapped table title, a log record); our
own annotations go out through :func:`print_workflow_command` (examples/ci/README.md).
"""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO, cast

from holodeck_core.defaults import SHOWN_LINE_CHARS

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


def one_line(text: str, limit: int = SHOWN_LINE_CHARS) -> str:
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


# The runner splits its output at \r and \n, trims each line's leading whitespace and takes
# a line that then starts with "::" as a command; "##[" starts the older form anywhere.
_LINE_END = re.compile(r"\r\n?|\n")
_BLANKS = r"[\s\u200b\ufeff]*+"
_COMMAND_START = re.compile(rf"^({_BLANKS}):(?=:)")
_UNDECIDED = re.compile(rf"{_BLANKS}:?|.*#", re.DOTALL)
_OLD_COMMAND = "##["


def defuse_workflow_commands(line: str, *, line_start: bool = True) -> str:
    """``line`` (without its line end) as GitHub's runner reads it as text: a leading ``::``
    becomes ``%3A:`` and ``##[`` becomes ``#%23[`` (``%3A``/``%23``: the runner's own
    escapes). ``line_start=False``: the rest of a line begun earlier."""
    if line_start:
        line = _COMMAND_START.sub(r"\1%3A", line, count=1)
    return line.replace(_OLD_COMMAND, "#%23[")


class WorkflowCommandGuard(io.TextIOBase):
    """A text stream passing whole lines on to ``stream``, each defused; a partial line waits
    for its end unless it can no longer become a command (then it goes on at a flush)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream
        self._pending = ""
        self._line_start = True  # whether _pending begins a line (nothing of it went out)

    def write(self, text: str) -> int:
        pending = self._pending + text
        start = 0
        for end in _LINE_END.finditer(pending):
            line = pending[start : end.start()]
            self.stream.write(defuse_workflow_commands(line, line_start=self._line_start))
            self.stream.write(end[0])
            start, self._line_start = end.end(), True
        self._pending = pending[start:]
        return len(text)

    def flush(self) -> None:
        pending = self._pending
        if pending and not _UNDECIDED.fullmatch(pending):
            self.stream.write(defuse_workflow_commands(pending, line_start=self._line_start))
            self._pending, self._line_start = "", False
        self.stream.flush()

    def close_line(self) -> None:
        """End a waiting partial line (it is defused like any other)."""
        if self._pending:
            self.write("\n")
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", None) or "utf-8"


def in_github_actions() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


@contextmanager
def workflow_commands_guarded() -> Iterator[None]:
    """Under GitHub Actions, ``sys.stdout`` and ``sys.stderr`` filtered by
    :class:`WorkflowCommandGuard` while the block runs (elsewhere nothing changes)."""
    if not in_github_actions():
        yield
        return
    out, err = sys.stdout, sys.stderr
    guards = WorkflowCommandGuard(out), WorkflowCommandGuard(err)
    sys.stdout, sys.stderr = cast(TextIO, guards[0]), cast(TextIO, guards[1])
    try:
        yield
    finally:
        for guard in guards:
            guard.close_line()
        sys.stdout, sys.stderr = out, err


def print_workflow_command(line: str) -> None:
    """Print one workflow command of ours (its data escaped by the caller) on stdout, past
    the guard, at the start of a line."""
    stream: object = sys.stdout
    if isinstance(stream, WorkflowCommandGuard):
        stream.close_line()
        stream = stream.stream
    print(line, file=cast(TextIO, stream), flush=True)
