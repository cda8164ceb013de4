"""Where a ``holodeck test`` run's time goes: wall and CPU per phase, and the cyclic collector.

    HOLODECK_HOME=/tmp/h .venv/bin/python bench/run_phases.py test AGENT.yaml --fresh -q
        [--parallel 100]                      # our CLI's own arguments, unchanged
    PYTHONPATH=DIR .venv/bin/python bench/run_phases.py ...   # an earlier commit's packages

Runs our CLI in this process with timers around its phases (the config, the estimate,
opening the tools, the cases, building the EvalRun, writing its files, the history write)
and ``gc.callbacks`` counting the collector's CPU; prints them to stderr at the end
(docs/benchmarks.md). Started as ``python``, not as the ``holodeck`` console script, so the
process does not relax the collector before its imports. ``--profile FILE`` (before the
CLI's arguments) also writes a ``cProfile`` of the command to FILE; ``--console`` (first)
raises the young generation's threshold at start, as the console script does.
"""

from __future__ import annotations

import functools
import gc
import inspect
import sys
import time
from collections.abc import Callable
from typing import Any

PHASES = (
    ("holodeck_core.config.loader", None, "load_agent", "config (load_agent)"),
    ("holodeck_core.runner.suite", "Suite", "estimate", "estimate"),
    ("holodeck_core.runner.suite", "Suite", "open_tools", "opening the tools"),
    ("holodeck_core.runner.suite", "Suite", "run_all", "the cases (run_all)"),
    ("holodeck_core.runner.suite", "Suite", "eval_run", "building the EvalRun"),
    ("holodeck_core.engine.record", None, "save_eval_run", "writing the EvalRun files"),
    ("holodeck_core.engine.record", None, "record_history", "the history write"),
)

spent: dict[str, list[float]] = {}  # phase -> [wall, cpu, calls]
collector = {"cpu": 0.0, "runs": 0.0, "started": 0.0}
by_generation = [[0.0, 0] for _ in range(3)]  # generation -> [CPU, runs]


def _on_collect(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        collector["started"] = time.process_time()
    else:
        spent_cpu = time.process_time() - collector["started"]
        collector["cpu"] += spent_cpu
        collector["runs"] += 1
        by_generation[info["generation"]][0] += spent_cpu
        by_generation[info["generation"]][1] += 1


def _book(label: str, wall: float, cpu: float) -> None:
    entry = spent.setdefault(label, [0.0, 0.0, 0.0])
    entry[0] += time.perf_counter() - wall
    entry[1] += time.process_time() - cpu
    entry[2] += 1


def _timed(fn: Callable[..., Any], label: str) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return await fn(*args, **kwargs)
            finally:
                _book(label, wall, cpu)

        return timed_async

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _book(label, wall, cpu)

    return timed


def _instrument() -> None:
    import importlib

    for module_name, class_name, attr, label in PHASES:
        module = importlib.import_module(module_name)
        owner = getattr(module, class_name) if class_name else module
        setattr(owner, attr, _timed(getattr(owner, attr), label))


def main() -> int:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    gc.callbacks.append(_on_collect)
    args = sys.argv[1:]
    profile_to = None
    if args[:1] == ["--console"]:  # as the console script: the young threshold raised first
        from holodeck_core.defaults import RUN_GC_YOUNG_THRESHOLD

        gc.set_threshold(RUN_GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        args = args[1:]
    if args[:1] == ["--profile"]:
        profile_to, args = args[1], args[2:]
    _instrument()
    from holodeck_core.cli.main import main as cli

    print(f"imports: wall {time.perf_counter() - wall0:.2f} s", file=sys.stderr)
    if profile_to:
        import cProfile

        profiler = cProfile.Profile()
        code = profiler.runcall(cli, args)
        profiler.dump_stats(profile_to)
    else:
        code = cli(args)
    print(
        f"total: wall {time.perf_counter() - wall0:.2f} s, CPU {time.process_time() - cpu0:.2f} s",
        file=sys.stderr,
    )
    for label, (wall, cpu, calls) in spent.items():
        print(f"  {label:<28} wall {wall:6.2f} s  CPU {cpu:6.2f} s  x{calls:.0f}", file=sys.stderr)
    runs = collector["runs"]
    print(f"  cyclic GC: CPU {collector['cpu']:.2f} s in {runs:.0f} collections", file=sys.stderr)
    for generation, (cpu, count) in enumerate(by_generation):
        print(f"    generation {generation}: CPU {cpu:.2f} s in {count} runs", file=sys.stderr)
    gc.freeze()  # as the console script does: no final collection
    return code


if __name__ == "__main__":
    sys.exit(main())
