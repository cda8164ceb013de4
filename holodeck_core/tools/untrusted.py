"""What comes back from a tool is untrusted (docs/agent-yaml.md): a name the model
invented, a result that is not JSON or is huge, a function that raises ``SystemExit`` or never
returns. Each becomes a tool error the model reads (or a result cut with a marker), never a
crash of the run, and a hung function never keeps the process from exiting."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

from holodeck_core.defaults import MAX_TOOL_NAME_CHARS as MAX_NAME_CHARS
from holodeck_core.defaults import MAX_TOOL_RESULT_BYTES as MAX_RESULT_BYTES
from holodeck_core.defaults import MAX_TOOL_RESULT_DEPTH
from holodeck_core.models.bounded_json import depth
from holodeck_core.models.outside import valid_value


def shown_name(name: str) -> str:
    """``name`` as recorded and shown: at most :data:`MAX_NAME_CHARS` characters."""
    return name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS] + "…"


def unknown_tool(name: str, offered: Iterable[str]) -> str:
    """The error the model reads when it calls a tool nobody offered it."""
    return f"unknown tool {shown_name(name)!r}; available: {', '.join(offered) or 'none'}"


def cut(text: str, limit: int = MAX_RESULT_BYTES) -> str:
    """``text`` itself, or its first ``limit`` bytes (whole characters) and a marker saying how
    long it was."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    head = data[:limit].decode("utf-8", "ignore")
    return f"{head}\n[tool result truncated: {len(data):,} bytes, the limit is {limit:,}]"


def bounded(
    result: Any, error: str | None, limit: int = MAX_RESULT_BYTES
) -> tuple[Any, str | None, int]:
    """``(result, error, replaced)`` safe to record and to send back: the result as plain JSON
    values (anything else, e.g. a set or a date, as its ``str``), cut to ``limit`` bytes, its
    strings and keys valid Unicode (``replaced`` lone surrogates made U+FFFD); a result that
    cannot be JSON (a cycle, tuple keys, a 5,000-digit integer, 100,000 levels) an error."""
    result, error = _bounded(result, error, limit)
    (result, error), replaced = valid_value([result, error])
    return result, error, replaced


def _bounded(result: Any, error: str | None, limit: int) -> tuple[Any, str | None]:
    if error is not None:
        return None, cut(str(error), limit)
    if result is None or isinstance(result, str):
        return (None if result is None else cut(result, limit)), None
    try:
        text = json.dumps(result, default=str, ensure_ascii=False)
        if len(text.encode("utf-8", "surrogatepass")) > limit:
            return cut(text, limit), None
        value = json.loads(text)
        if depth(value, MAX_TOOL_RESULT_DEPTH) > MAX_TOOL_RESULT_DEPTH:
            return None, f"the tool returned a value nested deeper than {MAX_TOOL_RESULT_DEPTH}"
        return value, None
    except Exception as exc:  # whatever a hostile __str__ or a nesting limit raises
        reason = f"{type(exc).__name__}: {exc}"
        return None, f"the tool returned a value that is not JSON ({cut(reason, 500)})"


def crashed(exc: BaseException, who: str = "the tool") -> str:
    """The error the model reads for a tool that raised, ``SystemExit`` included (``who``
    names another raiser: a python target)."""
    if isinstance(exc, SystemExit):
        return f"{who} tried to exit the process (SystemExit: {exc.code!r})"
    return f"{type(exc).__name__}: {exc}"


async def in_daemon_thread(function: Callable[..., Any], arguments: dict[str, Any]) -> Any:
    """``function(**arguments)`` in a thread of its own that nobody waits for: when the caller
    gives up (a timeout, Ctrl-C), a function that never returns is left running in a daemon
    thread, so neither ``asyncio.run`` nor the interpreter's exit waits for it (the default
    executor's threads are joined at both)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[tuple[BaseException | None, Any]] = loop.create_future()
    context = contextvars.copy_context()

    def settle(outcome: tuple[BaseException | None, Any]) -> None:
        if not future.done():  # else the caller gave up already
            future.set_result(outcome)

    def work() -> None:
        try:
            outcome: tuple[BaseException | None, Any] = (None, context.run(function, **arguments))
        except BaseException as exc:  # SystemExit too: it must reach the caller, not end a thread
            outcome = (exc, None)
        with contextlib.suppress(RuntimeError):  # a closed loop: the run ended without it
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=work, name="holodeck-tool", daemon=True).start()
    failure, value = await future
    if failure is not None:
        raise failure
    return value
