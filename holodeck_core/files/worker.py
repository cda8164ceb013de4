"""Conversion worker processes: reused between files, killed at the file timeout.

A conversion runs in a child process so that a document that hangs or blows up a parser
(pdfminer on a pathological PDF, a huge workbook) cannot stall or crash the run: at
``file_timeout`` the child is killed (SIGKILL) and replaced on the next job. Workers are
started with the "spawn" method, which is safe in a multi-threaded parent (the runner's threads,
Dagster), and import markitdown once at start-up; the timeout counts from the moment a ready
worker receives the job, so start-up time never eats into it.

``concurrent.futures.ProcessPoolExecutor`` is not used: it cannot kill one stuck task without
breaking the whole pool."""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import queue
import signal
import threading
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess

from pydantic import Field

from holodeck_core.defaults import (
    FILE_WORKER_MAX_JOBS,
    FILE_WORKER_MEMORY_BYTES,
    FILE_WORKER_STARTUP_TIMEOUT_S,
)
from holodeck_core.files.jobs import ConversionJob, ConversionOutput
from holodeck_core.models.base import StrictModel

MEMORY_LIMIT_ENV = "HOLODECK_FILE_WORKER_MEMORY_MB"
_READY = "ready"


def memory_limit_bytes() -> int:
    configured = os.environ.get(MEMORY_LIMIT_ENV, "")
    return int(configured) * 1024 * 1024 if configured.isdigit() else FILE_WORKER_MEMORY_BYTES


def _cap_memory(limit: int) -> None:
    """Cap this process's address space (soft and hard limit, so a parser cannot lift it)."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _worker_main(conn: Connection, memory_limit: int) -> None:
    """Child process: build the converter once, then answer jobs until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _cap_memory(memory_limit)
    from holodeck_core.files.convert import Converter

    converter = Converter()
    conn.send(_READY)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        conn.send(converter.run(job))


class WorkerError(Exception):
    """A worker could not be started or died."""


class _Worker:
    def __init__(self, startup_timeout: float, memory_limit: int) -> None:
        context = multiprocessing.get_context("spawn")
        parent_end, child_end = context.Pipe(duplex=True)
        self.process: SpawnProcess = context.Process(
            target=_worker_main,
            args=(child_end, memory_limit),
            name="holodeck-file-worker",
            daemon=True,
        )
        self.process.start()
        child_end.close()
        self.conn = parent_end
        self.jobs = 0
        try:
            ready = parent_end.poll(startup_timeout) and parent_end.recv() == _READY
        except (EOFError, OSError):
            ready = False
        if not ready:
            self.kill()
            raise WorkerError(
                f"conversion worker did not start within {startup_timeout:g} s "
                f"(exit code {self.process.exitcode})"
            )

    @property
    def alive(self) -> bool:
        return self.process.is_alive() and not self.conn.closed

    def run(self, job: ConversionJob, timeout: float) -> ConversionOutput:
        """Run ``job``; on timeout kill this worker. Raises :class:`WorkerError` if it died."""
        self.jobs += 1
        try:
            self.conn.send(job)
            if not self.conn.poll(timeout):
                self.kill()
                return ConversionOutput(error=f"conversion timed out after {timeout:g} s")
            output = self.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            self.kill()
            raise WorkerError(
                f"conversion worker died (exit code {self.process.exitcode}); "
                "the file may be too large or malformed for the converter"
            ) from None
        if not isinstance(output, ConversionOutput):  # pragma: no cover - protocol guard
            self.kill()
            raise WorkerError(f"conversion worker sent {type(output).__name__}")
        return output

    def stop(self) -> None:
        """Ask politely, then kill."""
        with contextlib.suppress(OSError, ValueError):
            self.conn.send(None)
        self.process.join(2)
        self.kill()

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()


class PoolStats(StrictModel):
    """Counters, for tests and for the run's diagnostics."""

    size: int
    started: int = Field(0, description="Worker processes started.")
    killed: int = Field(0, description="Workers killed at the file timeout.")
    died: int = Field(0, description="Workers that exited on their own mid-job.")
    jobs: int = Field(0, description="Conversions sent to a worker.")


class WorkerPool:
    """Up to ``size`` conversions at once, each in a worker process of its own.

    Thread-safe: ``run`` blocks until a worker is free. Workers start lazily, are reused, are
    retired after ``max_jobs_per_worker`` jobs (bounding leaks in parsers), and are replaced
    after a timeout or a crash."""

    def __init__(
        self,
        size: int | None = None,
        *,
        startup_timeout: float = FILE_WORKER_STARTUP_TIMEOUT_S,
        max_jobs_per_worker: int = FILE_WORKER_MAX_JOBS,
        memory_limit: int | None = None,
    ) -> None:
        self.size = size or max(1, min(4, os.cpu_count() or 1))
        self._memory_limit = memory_limit or memory_limit_bytes()
        self._startup_timeout = startup_timeout
        self._max_jobs = max_jobs_per_worker
        self._slots = threading.BoundedSemaphore(self.size)
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._stats = PoolStats(size=self.size)
        self._closed = False

    def stats(self) -> PoolStats:
        with self._lock:
            return self._stats.model_copy()

    def _count(self, field: str) -> None:
        with self._lock:
            setattr(self._stats, field, getattr(self._stats, field) + 1)

    def _take(self) -> _Worker:
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                break
            if worker.alive:
                return worker
            worker.kill()
        self._count("started")
        return _Worker(self._startup_timeout, self._memory_limit)

    def _give_back(self, worker: _Worker) -> None:
        if self._closed or not worker.alive or worker.jobs >= self._max_jobs:
            worker.stop()
        else:
            self._idle.put(worker)

    def run(self, job: ConversionJob, timeout: float) -> ConversionOutput:
        """Convert in a worker; never raises (start-up failures and crashes become errors)."""
        if self._closed:
            return ConversionOutput(error="conversion pool is closed")
        with self._slots:
            try:
                worker = self._take()
            except (WorkerError, OSError) as exc:
                return ConversionOutput(error=str(exc))
            self._count("jobs")
            try:
                output = worker.run(job, timeout)
            except WorkerError as exc:
                self._count("died")
                output = ConversionOutput(error=str(exc))
            else:
                if not worker.alive:
                    self._count("killed")
            finally:
                self._give_back(worker)
        return output

    def close(self) -> None:
        """Stop idle workers; busy ones stop when their job returns."""
        self._closed = True
        while True:
            try:
                self._idle.get_nowait().stop()
            except queue.Empty:
                return

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_default_pool: WorkerPool | None = None
_default_lock = threading.Lock()


def default_pool() -> WorkerPool:
    """The process-wide pool, created on first use and closed at interpreter exit."""
    global _default_pool
    with _default_lock:
        if _default_pool is None or _default_pool._closed:
            _default_pool = WorkerPool()
            atexit.register(_default_pool.close)
        return _default_pool
