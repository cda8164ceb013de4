"""The thread the synchronous metrics (BLEU, METEOR, code graders) run on, off the event loop.

One thread (nltk is not thread-safe), and a daemon one: a metric still running when the
process ends (a grader stuck in a loop or a sleep, a run interrupted with Ctrl-C or stopped by
Dagster) does not keep the process alive. A ``ThreadPoolExecutor``'s threads are joined at
interpreter exit, so an interrupted ``holodeck test`` or run worker waited for the metric to
return (docs/dagster.md, "Stopping `dg dev`")."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

THREAD_NAME = "holodeck-metric"

_Job = tuple["Future[Any]", Callable[..., Any], tuple[Any, ...]]
_jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
_lock = threading.Lock()
_started_in: int | None = None
"""The process the thread was started in (a forked child starts its own)."""


def submit(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """``fn(*args)`` on the metrics thread, in turn; its future."""
    global _jobs, _started_in
    with _lock:
        if _started_in != os.getpid():
            _jobs = queue.SimpleQueue()
            threading.Thread(target=_work, args=(_jobs,), name=THREAD_NAME, daemon=True).start()
            _started_in = os.getpid()
        future: Future[Any] = Future()
        _jobs.put((future, fn, args))
    return future


def _work(jobs: queue.SimpleQueue[_Job]) -> None:
    while True:
        future, fn, args = jobs.get()
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # the caller's to handle, as an executor would
            future.set_exception(exc)
