"""A python target's host process (``python -m holodeck_core.agents.targets.host_main FD``):
imports the callable once, then answers the calls the run sends over the socket ``FD``, each
as a task of one event loop (a sync callable in a daemon thread), as the target would run
in-process. Whatever a call does, raising ``SystemExit``, ``KeyboardInterrupt`` or
``GeneratorExit`` included, comes back as that call's error; a host that exits or hangs is
the run's to replace and kill (:mod:`holodeck_core.agents.targets.host`, docs/targets.md).

Messages are tuples: in, ``("start", callable, base_dir, sys_path)`` then ``("call", id,
payload)``, ``("cancel", id)`` and ``("forget", session_id)``; out, ``("ready",)`` or
``("failed", message)``, then ``("reply", id, Reply)`` and ``("error", id, (kind, message,
status, retry_after))``."""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import signal
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from holodeck_core.agents.targets.python import TargetCase, reply_of
from holodeck_core.calls.classify import classify
from holodeck_core.calls.errors import CallErrorKind, ModelCallError
from holodeck_core.metrics.base import MetricError
from holodeck_core.metrics.code_graders import load_grader
from holodeck_core.tools.untrusted import crashed, in_daemon_thread


def main(fd: int) -> None:
    conn = Connection(fd)
    _, callable_name, base_dir, sys_path = conn.recv()
    sys.path[:] = [*sys_path, *(p for p in sys.path if p not in sys_path)]
    try:
        function: Callable[..., Any] = load_grader(callable_name, Path(base_dir))
    except MetricError as exc:  # SystemExit at import included
        conn.send(("failed", str(exc).replace("grader ", "")))
        return
    except BaseException as exc:  # KeyboardInterrupt, GeneratorExit at import
        conn.send(("failed", f"cannot import {callable_name!r}: {crashed(exc, 'its module')}"))
        return
    conn.send(("ready",))
    asyncio.run(_Host(conn, function).serve())


class _Host:
    def __init__(self, conn: Connection, function: Callable[..., Any]) -> None:
        self._conn = conn
        self._function = function
        self._lock = threading.Lock()
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._states: dict[str, dict[str, Any]] = {}

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        ended = loop.create_future()

        def read() -> None:
            while True:
                try:
                    message = self._conn.recv()
                except (EOFError, OSError):  # the run is gone: so is all this host started
                    if os.getpgid(0) == os.getpid():  # a group of our own (always, from host)
                        os.killpg(0, signal.SIGKILL)
                    os._exit(0)
                loop.call_soon_threadsafe(self._handle, message, ended)

        threading.Thread(target=read, name="holodeck-target-host", daemon=True).start()
        await ended

    def _handle(self, message: tuple[Any, ...], ended: asyncio.Future[None]) -> None:
        kind = message[0]
        if kind == "call":
            _, call_id, payload = message
            self._tasks[call_id] = asyncio.get_running_loop().create_task(
                self._call(call_id, payload)
            )
        elif kind == "cancel" and (task := self._tasks.get(message[1])) is not None:
            task.cancel()
        elif kind == "forget":
            self._states.pop(message[1], None)

    async def _call(self, call_id: int, payload: dict[str, Any]) -> None:
        case = TargetCase(**payload, state=self._states.setdefault(payload["session_id"], {}))
        try:
            if inspect.iscoroutinefunction(self._function):
                value = await self._function(case)
            else:
                value = await in_daemon_thread(functools.partial(self._function, case), {})
            self._send(("reply", call_id, reply_of(value)))
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                return  # the run gave up on this call
            self._error(call_id, ModelCallError(CallErrorKind.INTERNAL, "CancelledError"))
        except BaseException as exc:  # SystemExit, KeyboardInterrupt, GeneratorExit too
            self._error(call_id, _classified(exc))
        finally:
            self._tasks.pop(call_id, None)

    def _error(self, call_id: int, error: ModelCallError) -> None:
        detail = (error.kind.value, error.args[0], error.status, error.retry_after)
        self._send(("error", call_id, detail))

    def _send(self, message: tuple[Any, ...]) -> None:
        try:
            with self._lock:
                self._conn.send(message)
        except (OSError, ValueError):
            pass  # the run is gone; the reader ends this process
        except Exception as exc:  # a reply that cannot be pickled (a tool result, say)
            reason = f"the target's reply cannot be sent to the run: {type(exc).__name__}: {exc}"
            self._error(message[1], ModelCallError(CallErrorKind.INTERNAL, reason))


def _classified(exc: BaseException) -> ModelCallError:
    if isinstance(exc, Exception):
        return classify(exc)
    return ModelCallError(CallErrorKind.INTERNAL, crashed(exc, "the target"))


if __name__ == "__main__":
    main(int(sys.argv[1]))
