"""What a function tool prints is untrusted too (docs/agent-yaml.md): a tool that prints a
secret it read from the environment must not put it on the console, in a log file or in
Dagster's compute logs. The process's ``sys.stdout`` and ``sys.stderr`` are wrapped in a
stream that scrubs whole lines (a secret printed in pieces, ``print("key", key)``, is one
line) with the secrets registered at the moment it writes. A flush writes a line's start too,
except a tail that could begin a secret (``print(key[:12], end="", flush=True)``): that waits
for the rest of its line, or for the interpreter's exit."""

from __future__ import annotations

import atexit
import contextlib
import sys
import threading
import weakref
from typing import Any, TextIO

from holodeck_core.redaction import encodings, redact_text, registered_secrets

MAX_PENDING_CHARS = 65_536
"""A line longer than this (no newline yet) is scrubbed and written as it stands."""


class ScrubbedStream:
    """A text stream that writes ``stream``'s lines scrubbed; everything else is ``stream``'s."""

    def __init__(self, stream: TextIO) -> None:
        self.wrapped = stream
        self._pending = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            head, newline, rest = self._pending.rpartition("\n")
            if newline:
                self._pending = rest
                self.wrapped.write(redact_text(head + newline))
            if len(self._pending) > MAX_PENDING_CHARS:
                self._emit()
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        with self._lock:
            self._emit(hold=_secret_start(self._pending))
        self.wrapped.flush()

    def close_line(self) -> None:
        """Write whatever waits (at the interpreter's exit; a stream closed by then is left)."""
        with self._lock, contextlib.suppress(ValueError, OSError):
            self._emit()
            self.wrapped.flush()

    def _emit(self, hold: int = 0) -> None:
        cut = len(self._pending) - hold
        if cut > 0:
            text, self._pending = self._pending[:cut], self._pending[cut:]
            self.wrapped.write(redact_text(text))

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, buffer...
        return getattr(self.wrapped, name)


def _secret_start(text: str) -> int:
    """The length of the longest tail of ``text`` that begins a form of a registered secret."""
    longest = 0
    for secret in registered_secrets():
        for form in encodings(secret):
            for size in range(min(len(form) - 1, len(text)), longest, -1):
                if text.endswith(form[:size]):
                    longest = size
                    break
    return longest


def scrub_standard_streams() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` (once: a stream already wrapped stays as it is).
    Called before a function tool's module is imported, so its import-time prints count."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, ScrubbedStream):
            wrapped = ScrubbedStream(stream)
            setattr(sys, name, wrapped)
            if not _streams:
                atexit.register(_close_lines)
            _streams.add(wrapped)


_streams: weakref.WeakSet[ScrubbedStream] = weakref.WeakSet()


def _close_lines() -> None:
    for stream in list(_streams):
        stream.close_line()
