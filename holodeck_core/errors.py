"""Exit codes (docs/cli.md) and the errors that map onto them.

A user mistake is raised as one of these and printed as a message, never a traceback."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    """Precedence when several apply: 2 > 3 > 4 > 1 > 0."""

    OK = 0
    FAILED = 1
    CONFIG = 2
    EXECUTION = 3
    EVALUATION = 4

    @staticmethod
    def worst(*codes: ExitCode) -> ExitCode:
        return max(codes, key=_PRECEDENCE.index, default=ExitCode.OK)


_PRECEDENCE = [
    ExitCode.OK,
    ExitCode.FAILED,
    ExitCode.EVALUATION,
    ExitCode.EXECUTION,
    ExitCode.CONFIG,
]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file: where it is and how to fix it."""

    file: str
    message: str
    path: str = ""
    line: int | None = None

    def render(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        located = f"{self.path}: {self.message}" if self.path else self.message
        return f"{where}: {located}" if where else located


class HolodeckError(Exception):
    """Base of errors the CLI reports as a message with an exit code."""

    exit_code: ExitCode = ExitCode.EXECUTION


class ConfigError(HolodeckError):
    """Bad input (exit 2). Carries every problem found, not just the first."""

    exit_code = ExitCode.CONFIG

    def __init__(self, problems: list[Problem] | str, *, file: str = "") -> None:
        if isinstance(problems, str):
            problems = [Problem(file=file, message=problems)]
        self.problems = problems
        super().__init__("\n".join(p.render() for p in problems))


class NoHistoryError(ConfigError):
    """The history named does not exist yet (no file, no lake): nothing recorded to read."""


class ExecutionError(HolodeckError):
    """The run could not proceed: infrastructure, a locked database after retries (exit 3)."""

    exit_code = ExitCode.EXECUTION


def safe_message(exc: BaseException | str) -> str:
    """An error's text for the console: registered secrets and credentials scrubbed,
    terminal control characters shown as escapes (an error may quote a provider's reply)."""
    from holodeck_core.redaction import redact_text
    from holodeck_core.terminal import printable

    return printable(redact_text(str(exc)))
