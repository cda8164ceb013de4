"""The cyclic garbage collector while a suite runs (docs/benchmarks.md).

Once the tools are open, every module a run needs is imported: the SDKs' thousands of
pydantic types and our config are alive until the process ends, yet each full collection
walked them all again. :func:`relaxed_collector` moves them to the collector's permanent
generation (``gc.freeze``) and raises the young generation's threshold for the run; both are
undone when the run ends, so a long-lived process (a Dagster run worker, a test session)
collects the run's own cycles afterwards as usual. Runs may nest or overlap in one process:
only the outermost one freezes and restores. A CLI process raises the threshold from its
start (``holodeck_core/cli/main.py``): its imports alone made ~270 young collections."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from holodeck_core.defaults import RUN_GC_YOUNG_THRESHOLD

_lock = threading.Lock()
_depth = 0
_saved: tuple[int, ...] = ()


@contextmanager
def relaxed_collector() -> Iterator[None]:
    """Freeze what is alive now and collect the young generation less often, until exit."""
    global _depth, _saved
    with _lock:
        _depth += 1
        if _depth == 1:
            _saved = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(max(_saved[0], RUN_GC_YOUNG_THRESHOLD), *_saved[1:])
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.set_threshold(*_saved)
                gc.unfreeze()
