"""The resume journal (docs/architecture.md): finished cases, appended and fsynced as they complete.

``<HOLODECK_HOME>/journal/<agent slug>/<suite fingerprint>.jsonl``, local disk only. A run
reuses entries whose case fingerprint matches; only cases without an error are written. A
run that finishes with no transient error closes the journal, so the next run starts fresh.

Two runs of the same suite at once pay for each case once: a case is *claimed* (a lock on
one byte of ``<fingerprint>.lock``, chosen by the case fingerprint) while it runs, and a run
that waited for a claim first looks whether the other run journaled that case meanwhile.

Appends are group-committed (:meth:`Journal.write`): the cases that finish while one fsync is
under way go to disk together in the next, so 100 cases in flight cost a handful of writes,
not 100, and a case is still awaited until its line is on disk.

A journal that cannot be written (a full or read-only disk) never aborts the run: what was
appended stays, later cases are not journaled, and :attr:`Journal.failure` says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from holodeck_core.naming import slugify
from holodeck_core.redaction import redact
from holodeck_core.runner.case_run import CaseRun

_LOCK_SLOTS = 1 << 30
_FIRST_POLL_S = 0.02
_MAX_POLL_S = 0.5


class Journal:
    def __init__(
        self,
        root: Path,
        agent_name: str,
        suite_fingerprint: str,
        secrets: frozenset[str] = frozenset(),
    ) -> None:
        self.path = root / slugify(agent_name) / f"{suite_fingerprint}.jsonl"
        self.secrets = secrets
        self.failure: str | None = None
        """Why appending stopped (ENOSPC, a read-only disk...), once it did."""
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, int], CaseRun] = {}
        self._offset = 0
        self._done = self.path.with_suffix(".jsonl.done")
        self._done_at_load: tuple[int, int] | None = None
        self._lock_fd: int | None = None
        self._pending: list[CaseRun] = []  # redacted, waiting for the next group commit
        self._commit_gate: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    def load(self) -> dict[tuple[str, int], CaseRun]:
        """Entries of the open journal by case fingerprint and trial. A torn last line (a
        crash while writing) is ignored."""
        self._done_at_load = _identity(self._done)
        self._entries, self._offset = {}, 0
        self._read_new()
        return dict(self._entries)

    def finished(self, fingerprint: str, trial: int = 0) -> CaseRun | None:
        """The entry of ``fingerprint``'s ``trial`` if this or another run journaled it since
        :meth:`load`, including a run that closed the journal meanwhile."""
        with self._lock:
            self._read_new()
            if (fingerprint, trial) not in self._entries:
                done = _identity(self._done)
                if done is not None and done != self._done_at_load:  # closed since load
                    with contextlib.suppress(OSError):
                        self._entries.update(_parse(self._done.read_bytes()))
                    self._done_at_load = done  # after its entries: see :meth:`lookup`
            return self._entries.get((fingerprint, trial))

    async def lookup(self, fingerprint: str, trial: int = 0) -> CaseRun | None:
        """:meth:`finished`, answered from memory when the files did not change since this
        run last looked (the common case: no other run of the suite is under way). That check
        runs on the event loop while :meth:`finished` may be reading on a worker thread, so the
        offset and the closed file's identity move only once the entries they cover are in:
        moved first, a concurrent lookup took a case another run had paid for as missing."""
        if _size(self.path) == self._offset and _identity(self._done) == self._done_at_load:
            return self._entries.get((fingerprint, trial))
        return await asyncio.to_thread(self.finished, fingerprint, trial)

    def _read_new(self) -> None:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except OSError:
            return
        complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits
        self._entries.update(_parse(complete))
        self._offset += len(complete)  # after its entries: see :meth:`lookup`

    @contextlib.asynccontextmanager
    async def claim(self, fingerprint: str, trial: int = 0) -> AsyncIterator[None]:
        """Hold the claim on ``fingerprint``'s ``trial``: a concurrent run of the same suite
        waits here."""
        fd = self._lock_fd if self._lock_fd is not None else self._lock_file()
        if fd is None:  # no lock file possible (read-only disk): run unclaimed
            yield
            return
        slot = (int(fingerprint[:15], 16) + trial) % _LOCK_SLOTS if fingerprint else trial
        await _lock_slot(fd, slot)
        try:
            yield
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, slot)

    def _lock_file(self) -> int | None:
        with self._lock:
            if self._lock_fd is None:
                try:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    lock_path = self.path.with_suffix(".lock")
                    self._lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
                except OSError:
                    return None
            return self._lock_fd

    def append(self, run: CaseRun) -> None:
        """Append one finished case (redacted: the journal is on disk too) and fsync."""
        if run.error is None and self.failure is None:
            self._commit([redact(run, self.secrets)])

    async def write(self, run: CaseRun) -> None:
        """:meth:`append`, group-committed: returns once ``run`` is on disk, in one write and
        one fsync with every case that finished while the previous fsync was under way."""
        if run.error is not None or self.failure is not None:
            return
        self._pending.append(redact(run, self.secrets))
        loop = asyncio.get_running_loop()
        if self._commit_gate is None or self._commit_gate[0] is not loop:
            self._commit_gate = loop, asyncio.Lock()  # a lock serves one event loop
        try:
            async with self._commit_gate[1]:  # whoever holds it commits what is pending
                batch, self._pending = self._pending, []
                if batch:
                    await asyncio.to_thread(self._commit, batch)
        except asyncio.CancelledError:  # the run stops, the case is paid for: keep it
            batch, self._pending = self._pending, []
            self._commit(batch)
            raise

    def _commit(self, runs: list[CaseRun]) -> None:
        if not runs:
            return
        data = "".join(run.model_dump_json() + "\n" for run in runs).encode("utf-8")
        with self._lock:
            before = _size(self.path)
            try:
                append_line(self.path, data)
            except OSError as exc:
                self.failure = (
                    f"cannot write the resume journal {self.path}: {exc.strerror or exc}; "
                    "cases finished after this were not journaled"
                )
                return
            if before == self._offset and _size(self.path) == before + len(data):
                # only our lines since we last read: know them without reading them back
                self._entries.update({(run.fingerprint, run.trial): run for run in runs})
                self._offset += len(data)

    @property
    def batches(self) -> BatchJournal:
        """The batches this suite's runs submitted (``execution.batch``), beside the journal."""
        return BatchJournal(self.path.with_suffix(".batches.jsonl"), self.secrets)

    def close(self) -> None:
        """The run finished: keep the entries as ``.done`` for inspection, start fresh next."""
        self._release()
        for path in (self.path, self.batches.path):
            if path.exists():
                path.replace(path.with_name(path.name + ".done"))

    def discard(self) -> None:
        """``--fresh``: set the open journal aside without reusing it."""
        for path in (self.path, self.batches.path):
            if path.exists():
                path.replace(path.with_name(path.name + ".discarded"))

    def _release(self) -> None:
        with self._lock:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None


class BatchJournal:
    """``<suite fingerprint>.batches.jsonl``: one line per batch submitted, written and fsynced
    before the run waits on it, so a rerun of a killed run takes its answers from the batch it
    already paid for (:mod:`holodeck_core.calls.batch`)."""

    def __init__(self, path: Path, secrets: frozenset[str] = frozenset()) -> None:
        self.path = path
        self.secrets = secrets

    @property
    def scope(self) -> str:
        """The suite's journal key (the file's name): every custom_id of its requests holds
        it, so two cells in one batch never share an id."""
        return self.path.name.removesuffix(".batches.jsonl")

    def submitted(self) -> list[dict[str, Any]]:
        """Every batch written so far (a torn last line is ignored)."""
        try:
            data = self.path.read_bytes()
        except OSError:
            return []
        entries: list[dict[str, Any]] = []
        for line in data.splitlines():
            try:
                entry = json.loads(line)
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(entry, dict) and isinstance(entry.get("custom_ids"), list):
                entries.append(entry)
        return entries

    def record(self, entry: dict[str, Any]) -> None:
        """Append ``entry`` and fsync; a disk that refuses it loses only the resume."""
        line = json.dumps(redact(entry, self.secrets)) + "\n"
        with contextlib.suppress(OSError):
            append_line(self.path, line.encode("utf-8"))


def append_line(path: Path, data: bytes) -> None:
    """The journal's write boundary: append ``data`` (whole lines), after a torn line if the
    last write was cut short, and fsync."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as handle:
        if handle.tell():
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                handle.write(b"\n")  # after a torn line, start a fresh one
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


async def _lock_slot(fd: int, slot: int) -> None:
    """Take the claim, polling while another run holds it. Not a blocking ``lockf``: POSIX
    locks belong to the process, so two runs each waiting for a claim the other holds look
    like a deadlock to the kernel (EDEADLK), though each run's other cases will release
    theirs; and a blocked lock would hold one of the event loop's few worker threads."""
    delay = _FIRST_POLL_S
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, slot)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, _MAX_POLL_S)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _identity(path: Path) -> tuple[int, int] | None:
    """Which file ``path`` is (inode, mtime), or None if there is none."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def _parse(data: bytes) -> dict[tuple[str, int], CaseRun]:
    entries: dict[tuple[str, int], CaseRun] = {}
    for line in data.splitlines():
        try:
            run = CaseRun.model_validate_json(line)
        except (ValidationError, UnicodeDecodeError):
            continue  # a line torn by a crash: that case simply runs again
        entries[run.fingerprint, run.trial] = run
    return entries
