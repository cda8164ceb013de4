"""The run's side of a python target's host process (docs/targets.md): the callable runs in a
process of its own, in a session of its own, so that a target that exits the process, forks,
never returns or swallows cancellation cannot take the run with it.

One host serves every call of the target (one event loop, sync callables in threads: the
concurrency the target had in-process, its module imported once). A host that dies fails the
calls it had in flight (transient: retried on a fresh host). A call the run gives up on (its
timeout, Ctrl-C) retires its host: new cases go to a fresh one, and the retired host's process
group is killed once the cases it served have ended; every host's group is killed at the end
of the run, and at the interpreter's exit. What a host prints reaches the console line by
line, secrets scrubbed and control characters escaped, as a function tool's does."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any

from holodeck_core.agents.targets.base import Reply
from holodeck_core.calls.errors import CallErrorKind, ModelCallError
from holodeck_core.defaults import PYTHON_TARGET_START_TIMEOUT_S
from holodeck_core.redaction import redact_text
from holodeck_core.terminal import printable
from holodeck_core.tools.output import MAX_PENDING_CHARS

_MAIN = "holodeck_core.agents.targets.host_main"
_hosts: weakref.WeakSet[TargetHost] = weakref.WeakSet()


class HostStartError(Exception):
    """The host could not import the callable (or died, or hung, doing it)."""


def kill_group(group: int) -> None:
    """SIGKILL to every process left in ``group`` (a host and whatever it forked)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)


@atexit.register
def _kill_every_host() -> None:
    for host in list(_hosts):
        kill_group(host.pid)


def _forward(pipe: IO[bytes], name: str) -> None:
    """The host's ``stdout``/``stderr``, line by line, to ours: scrubbed and escaped."""
    for raw in iter(lambda: pipe.readline(MAX_PENDING_CHARS), b""):
        stream = getattr(sys, name)
        with contextlib.suppress(ValueError, OSError):  # ours closed: the run is ending
            stream.write(printable(redact_text(raw.decode("utf-8", "replace"))))
            stream.flush()


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "closed its channel"
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


class TargetHost:
    """One host process; its methods run on the event loop that started it."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", _MAIN, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: what it forks dies with it
            env={**os.environ, "PYTHONUNBUFFERED": "1"},  # nothing lost when it exits
        )
        theirs.close()
        _hosts.add(self)
        self.pid = self._proc.pid
        self._conn = Connection(ours.detach())
        self._pending: dict[int, asyncio.Future[Reply]] = {}
        self._ids = itertools.count()
        self.sessions: set[str] = set()
        self.retired = False
        self.exited = False
        for pipe, name in ((self._proc.stdout, "stdout"), (self._proc.stderr, "stderr")):
            assert pipe is not None
            threading.Thread(target=_forward, args=(pipe, name), daemon=True).start()

    async def start(self, callable_name: str, base_dir: Path) -> None:
        """Import the callable in the host; :class:`HostStartError` saying why it could not."""
        self._conn.send(("start", callable_name, str(base_dir), list(sys.path)))
        answer = await asyncio.to_thread(self._handshake)
        if answer[0] != "ready":
            self._kill()
            raise HostStartError(answer[1])
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._read, args=(loop,), daemon=True).start()

    def _handshake(self) -> tuple[str, ...]:
        try:
            if self._conn.poll(PYTHON_TARGET_START_TIMEOUT_S):
                return tuple(self._conn.recv())
            reason = f"did not import it within {PYTHON_TARGET_START_TIMEOUT_S:g} s"
        except (EOFError, OSError):
            reason = _exit_reason(self._proc.wait(PYTHON_TARGET_START_TIMEOUT_S))
        return ("failed", f"the target's process {reason} while importing its module")

    def _read(self, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            try:
                message = self._conn.recv()
            except (EOFError, OSError):
                message = ("exited",)
            try:
                loop.call_soon_threadsafe(self._receive, message)
            except RuntimeError:  # the loop is closed: the run ended without this host
                return
            if message[0] == "exited":
                return

    def _receive(self, message: tuple[Any, ...]) -> None:
        if message[0] == "exited":
            self._exited()
            return
        kind, call_id, body = message
        future = self._pending.pop(call_id, None)
        if future is None or future.done():  # a call the run gave up on
            return
        if kind == "reply":
            future.set_result(body)
        else:
            error_kind, text, status, retry_after = body
            error = ModelCallError(
                CallErrorKind(error_kind), text, status=status, retry_after=retry_after
            )
            future.set_exception(error)

    def _exited(self) -> None:
        self.exited = True
        code = self._proc.poll()
        if code is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self._proc.wait(1)
        reason = f"the target's process {_exit_reason(code)} during the call"
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ModelCallError(CallErrorKind.CONNECTION, reason))
        self._pending.clear()
        self._kill()  # what it forked goes with it

    async def call(self, payload: dict[str, Any]) -> Reply:
        call_id = next(self._ids)
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        try:
            self._conn.send(("call", call_id, payload))
            return await future
        except OSError:
            self._pending.pop(call_id, None)
            raise ModelCallError(CallErrorKind.CONNECTION, "the target's process is gone") from None
        except asyncio.CancelledError:
            if self._pending.pop(call_id, None) is not None:  # given up on, still running
                self.retired = True
                self._tell(("cancel", call_id))
            raise

    def forget(self, session_id: str) -> None:
        """The case run ``session_id`` ended: its state goes."""
        self.sessions.discard(session_id)
        self._tell(("forget", session_id))

    @property
    def done(self) -> bool:
        """Retired (or dead) and serving nobody: to be ended."""
        return (self.retired or self.exited) and not self._pending and not self.sessions

    def _tell(self, message: tuple[Any, ...]) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._conn.send(message)

    def _kill(self) -> None:
        kill_group(self.pid)
        with contextlib.suppress(OSError):
            self._conn.close()

    async def end(self) -> None:
        """Kill the host's process group and reap the host."""
        self._kill()
        await asyncio.to_thread(self._proc.wait)
        _hosts.discard(self)
