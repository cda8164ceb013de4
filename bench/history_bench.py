"""Benchmark the run history: ingest N runs x M cases x 3 metrics, then time each view, in the
DuckDB file and in a DuckLake (docs/history.md) side by side.

    .venv/bin/python bench/history_bench.py              # 1,000 runs x 100 cases x 3 metrics
    .venv/bin/python bench/history_bench.py --runs 50    # a quick look
    .venv/bin/python bench/history_bench.py --no-lake    # the DuckDB file only
    .venv/bin/python bench/history_bench.py --servers    # the lake on PostgreSQL + moto S3

With ``--servers`` the lake's catalog is a PostgreSQL cluster and its data a moto S3 bucket,
both started here on 127.0.0.1 (tests/services.py), and the S3 requests of one
``holodeck history runs`` are counted (DuckDB's HTTP log).

Runs are built with the real models (two agents, five prompt versions each, one run a day per
prompt, statuses with per-case pass rates so flaky cases and flips exist), streamed in batches
through the production ingest path (flatten to Arrow, one transaction per run), re-ingested once
to time the idempotent skip, and then every view is fully read. The last line sums it up.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from holodeck_core.defaults import HISTORY_INGEST_BATCH  # noqa: E402
from holodeck_core.history import ingest, queries, schema, store  # noqa: E402
from holodeck_core.history.ducklake import DuckLake  # noqa: E402
from holodeck_core.models import (  # noqa: E402
    Agent,
    EvalRun,
    EvalRunMetadata,
    MetricResult,
    PromptVersion,
    ReportSummary,
    Status,
    TestReport,
    TestResult,
    TokenUsage,
    ToolInvocation,
)
from holodeck_core.models.agent import Instructions  # noqa: E402
from holodeck_core.models.evaluation import (  # noqa: E402
    Direction,
    EvaluationConfig,
    RAGMetric,
    StandardMetric,
)
from holodeck_core.models.llm import LLMProvider  # noqa: E402

AGENTS = ("support-bot", "billing-bot")
PROMPTS = ("v1", "v2", "v3", "v4", "v5")
START = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)


def make_agent(name: str) -> Agent:
    return Agent(
        name=name,
        model=LLMProvider(provider="openai", name="gpt-4o-mini"),
        instructions=Instructions(file="prompts/system.md"),
        evaluations=EvaluationConfig(
            model=LLMProvider(provider="openai", name="gpt-4o"),
            metrics=[
                RAGMetric(metric_type="faithfulness", threshold=0.5),
                StandardMetric(metric="bleu", threshold=0.4),
                StandardMetric(metric="latency", threshold=3000),
            ],
        ),
    )


def make_case(rng: random.Random, case: int, when: datetime, base_pass: float) -> TestResult:
    """One case with three metrics; status drawn from the case's own pass probability."""
    draw = rng.random()
    status = Status.ERROR if draw > 0.98 else Status.PASS if draw < base_pass else Status.FAIL
    latency = rng.randint(200, 2500)
    if status is Status.ERROR:
        metrics = [
            MetricResult(metric_name="faithfulness", kind="rag", passed=None, error="judge 503"),
            MetricResult(metric_name="bleu", passed=None, error="no response"),
            MetricResult(metric_name="latency", passed=None, error="no response"),
        ]
    else:
        good = status is Status.PASS
        faith = rng.uniform(0.6, 1.0) if good else rng.uniform(0.0, 0.45)
        bleu = rng.uniform(0.45, 1.0) if good else rng.uniform(0.0, 0.9)
        metrics = [
            MetricResult(
                metric_name="faithfulness",
                kind="rag",
                score=faith,
                threshold=0.5,
                passed=faith >= 0.5,
                model_used="gpt-4o",
            ),
            MetricResult(metric_name="bleu", score=bleu, threshold=0.4, passed=good or bleu >= 0.4),
            MetricResult(
                metric_name="latency",
                raw_score=float(latency),
                threshold=3000,
                direction=Direction.LOWER_IS_BETTER,
                unit="ms",
                passed=True,
            ),
        ]
    tools = (
        [ToolInvocation.of("lookup_order", {"order": case}, {"status": "shipped"})]
        if case % 3 == 0 and status is not Status.ERROR
        else []
    )
    return TestResult(
        test_id=f"case-{case:03d}",
        test_name=f"case {case}",
        test_input=f"Question {case}?",
        agent_response=None if status is Status.ERROR else f"Answer {case}.",
        tool_calls=[t.name for t in tools],
        tool_invocations=tools,
        metric_results=metrics,
        passed=status is Status.PASS,
        status=status,
        execution_time_ms=latency,
        errors=["model timeout"] if status is Status.ERROR else [],
        timestamp=when.isoformat(),
        token_usage=TokenUsage(prompt_tokens=120, completion_tokens=40, total_tokens=160),
    )


def make_runs(n_runs: int, n_cases: int, seed: int = 7, first: int = 0) -> Iterator[EvalRun]:
    """Runs ``bench-{first:05d}`` on, a day for each agent and prompt (``first``: the runs a
    history of that many would append next, their statuses drawn anew)."""
    rng = random.Random(seed)
    agents = {name: make_agent(name) for name in AGENTS}
    streams = [(a, p) for a in AGENTS for p in PROMPTS]
    base_pass = {
        s: [rng.choice((0.97, 0.97, 0.9, 0.7, 0.5)) for _ in range(n_cases)] for s in streams
    }
    dataset = hashlib.sha256(f"{n_cases} cases".encode()).hexdigest()
    for i in range(first, first + n_runs):
        agent_name, prompt = streams[i % len(streams)]
        when = START + timedelta(days=i // len(streams), minutes=i % len(streams))
        results = [
            make_case(rng, c, when, base_pass[(agent_name, prompt)][c]) for c in range(n_cases)
        ]
        summary = ReportSummary.from_results(results, wall_time_ms=60_000).model_copy(
            update={"cost_usd": round(0.00002 * 160 * n_cases, 6)}
        )
        yield EvalRun(
            report=TestReport(
                agent_name=agent_name,
                agent_config_path="agent.yaml",
                results=results,
                summary=summary,
                timestamp=when.isoformat(),
                holodeck_version="holodeck-pipelines bench",
            ),
            metadata=EvalRunMetadata(
                agent_config=agents[agent_name],
                prompt_version=PromptVersion(
                    version=prompt,
                    source="file",
                    file_path="prompts/system.md",
                    body_hash=hashlib.sha256(prompt.encode()).hexdigest(),
                ),
                holodeck_version="holodeck-pipelines bench",
                run_id=f"bench-{i:05d}",
                trigger="nightly",
                dataset_hash=dataset,
                partition_key=prompt,
            ),
        )


def time_views(
    target: store.History,
) -> tuple[dict[str, tuple[float, int]], tuple[float, float], float]:
    """Seconds and rows of a full read of each view; the open (wall and CPU s); one compare."""
    t0, c0 = time.perf_counter(), time.process_time()
    with store.reader(target) as con:
        t_open = (time.perf_counter() - t0, time.process_time() - c0)
        view_times: dict[str, tuple[float, int]] = {}
        for view in (*schema.MAIN_VIEWS, "flaky_cases(5)"):
            t0 = time.perf_counter()
            table = con.sql(f"SELECT * FROM {view}").to_arrow_table()
            view_times[view] = (time.perf_counter() - t0, table.num_rows)
        (n_runs,) = con.execute("SELECT count(*) FROM eval_runs").fetchall()[0]
        t0 = time.perf_counter()
        last_same_stream = (n_runs - 1) // 10 * 10  # same agent and prompt as run 0
        queries.compare_runs(con, "bench-00000", f"bench-{last_same_stream:05d}")
        t_compare = time.perf_counter() - t0
    return view_times, t_open, t_compare


def bench_lake(lake: DuckLake, n_runs: int, n_cases: int) -> tuple[float, float, float]:
    """Ingest into a lake one run per call, as each worker does; (prepare s, write s, CPU s)."""
    t_prepare = t_write = cpu = 0.0
    for run in make_runs(n_runs, n_cases):
        t0, c0 = time.perf_counter(), time.process_time()
        prepared = ingest.prepare_run(run)
        t1 = time.perf_counter()
        ingest.write_batch(lake, [prepared])
        t_prepare, t_write = t_prepare + t1 - t0, t_write + time.perf_counter() - t1
        cpu += time.process_time() - c0
    return t_prepare, t_write, cpu


def time_runs_command(history: store.History) -> tuple[float, int | None]:
    """Wall seconds of one ``holodeck history runs`` in this process, and (a lake on S3) the
    HTTP requests DuckDB made for it."""
    import contextlib
    import io

    from holodeck_core.cli.main import main as cli

    argv = ["history", "runs", "--format", "csv"]
    argv += ["--lake", history.url] if isinstance(history, DuckLake) else ["--db", str(history)]
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        cli(argv)
    seconds = time.perf_counter() - t0
    if not isinstance(history, DuckLake) or not history.on_s3:
        return seconds, None
    with history.connect(read_only=True) as con:  # the same reads, logged
        con.execute("CALL enable_logging('HTTP')")
        queries.list_runs(con, limit=20)
        (requests,) = con.execute(
            "SELECT count(*) FROM duckdb_logs WHERE type = 'HTTP'"
        ).fetchone() or (0,)
    return seconds, int(requests)


@contextlib.contextmanager
def lake_on_servers() -> Iterator[DuckLake]:
    """A DuckLake with its catalog in a fresh PostgreSQL and its data in a moto S3 bucket."""
    from tests.services import postgres_server, s3_server

    with postgres_server() as pg, s3_server() as s3:
        os.environ.update({**s3.env(), "PGPASSWORD": pg.password})
        s3.client().create_bucket(Bucket="holodeck-bench")
        yield DuckLake.parse(
            f"ducklake:postgresql://{pg.user}@{pg.host}:{pg.port}/{pg.db_name}"
            "?data=s3://holodeck-bench/history"
        )


def bench_lake_side(
    lake: DuckLake,
    args: argparse.Namespace,
    view_times: dict[str, tuple[float, int]],
    t_compare: float,
    db: Path,
) -> None:
    l_prepare, l_write, l_cpu = bench_lake(lake, args.runs, args.cases)
    lake_views, l_open, l_compare = time_views(lake)
    lake_ingest = l_prepare + l_write
    print(f"DuckLake {lake} (one run per write, as each worker writes):")
    print(f"  flatten                     {l_prepare:8.2f} s")
    print(f"  write (one transaction)     {l_write:8.2f} s")
    print(
        f"  ingest total                {lake_ingest:8.2f} s  "
        f"{1000 * lake_ingest / args.runs:8.1f} ms/run  ({l_cpu:.2f} CPU s)"
    )
    print(f"  open a snapshot             {l_open[0]:8.3f} s  ({l_open[1]:.2f} CPU s)")
    print(f"  {'view':<28}{'file':>8}  {'lake':>8}")
    for view, (seconds, n) in lake_views.items():
        assert n == view_times[view][1], (view, n, view_times[view][1])
        print(f"  query {view:<22}{view_times[view][0]:8.3f}  {seconds:8.3f} s  {n:>9} rows")
    print(f"  compare two runs            {t_compare:8.3f}  {l_compare:8.3f} s")
    file_runs, _ = time_runs_command(db)
    lake_runs, requests = time_runs_command(lake)
    print(
        f"  `history runs`              {file_runs:8.3f}  {lake_runs:8.3f} s"
        + (f"  ({requests} S3 requests)" if requests is not None else "")
    )
    lake_slowest = max(lake_views, key=lambda v: lake_views[v][0])
    print(
        f"RESULT-LAKE runs={args.runs} ingest_s={lake_ingest:.2f} ingest_cpu_s={l_cpu:.2f} "
        f"ms_per_run={1000 * lake_ingest / args.runs:.1f} open_s={l_open[0]:.3f} "
        f"views_total_s={sum(t for t, _ in lake_views.values()):.3f} "
        f"slowest_view={lake_slowest}:{lake_views[lake_slowest][0]:.3f}s "
        f"compare_s={l_compare:.3f} runs_cmd_s={lake_runs:.3f} file_runs_cmd_s={file_runs:.3f} "
        f"s3_requests={requests}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--batch", type=int, default=HISTORY_INGEST_BATCH)
    parser.add_argument("--db", type=Path, help="database file (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary database")
    parser.add_argument("--no-lake", action="store_true", help="skip the DuckLake")
    parser.add_argument("--lake", help="lake URL (default: a temporary folder)")
    parser.add_argument(
        "--servers", action="store_true", help="the lake on PostgreSQL + moto S3, started here"
    )
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="history-bench-"))
    db = args.db or tmp / "history.duckdb"
    if db.exists():
        db.unlink()
    t_build = t_prepare = t_write = ingest_cpu = 0.0
    ingested = 0
    load = os.getloadavg()[0]
    runs = make_runs(args.runs, args.cases)
    while True:
        t0 = time.perf_counter()
        batch = [run for _, run in zip(range(args.batch), runs, strict=False)]
        t1 = time.perf_counter()
        if not batch:
            break
        c1 = time.process_time()
        prepared = [ingest.prepare_run(run) for run in batch]
        t2 = time.perf_counter()
        ingested += len(ingest.write_batch(db, prepared).ingested)
        t3 = time.perf_counter()
        ingest_cpu += time.process_time() - c1
        t_build, t_prepare, t_write = t_build + t1 - t0, t_prepare + t2 - t1, t_write + t3 - t2
    t0 = time.perf_counter()
    skipped = 0
    for batch_start in range(0, args.runs, args.batch):
        ids = range(batch_start, min(batch_start + args.batch, args.runs))
        # Re-ingest: the cost of the idempotency check alone (rows are already prepared).
        again = [
            ingest.PreparedRun(run_id=f"bench-{i:05d}", tables=prepared[0].tables) for i in ids
        ]
        skipped += len(ingest.write_batch(db, again).skipped)
    t_again = time.perf_counter() - t0
    ingest_s = t_prepare + t_write

    with store.reader(db) as con:
        row = con.execute(
            "SELECT (SELECT count(*) FROM test_results), (SELECT count(*) FROM metric_results), "
            "(SELECT count(*) FROM tool_invocations)"
        ).fetchall()
        n_tests, n_metrics, n_tools = row[0]
    view_times, _, t_compare = time_views(db)
    size_mb = db.stat().st_size / 1e6

    rows_total = ingested + n_tests + n_metrics + n_tools
    print(
        f"history bench: {args.runs} runs x {args.cases} cases x 3 metrics -> {db} "
        f"(load average {load:.1f} at start on {os.cpu_count()} CPUs: on a busy machine the "
        "CPU seconds are the steadier figure)"
    )
    print(f"  build EvalRuns (pydantic)   {t_build:8.2f} s  (not part of ingest)")
    print(f"  flatten to Arrow            {t_prepare:8.2f} s")
    print(f"  write (batches of {args.batch})     {t_write:8.2f} s")
    print(
        f"  ingest total                {ingest_s:8.2f} s  {ingested / ingest_s:8.0f} runs/s  "
        f"{rows_total / ingest_s:10.0f} rows/s  ({ingest_cpu:.2f} CPU s)"
    )
    print(f"  re-ingest (all skipped)     {t_again:8.2f} s  ({skipped} skipped)")
    print(
        f"  rows: eval_runs {ingested}, test_results {n_tests}, metric_results {n_metrics}, "
        f"tool_invocations {n_tools}; file {size_mb:.1f} MB"
    )
    for view, (seconds, n) in view_times.items():
        print(f"  query {view:<22}{seconds:8.3f} s  {n:>9} rows")
    print(f"  compare two runs            {t_compare:8.3f} s")
    slowest = max(view_times, key=lambda v: view_times[v][0])
    print(
        f"RESULT runs={ingested} cases={n_tests} metrics={n_metrics} ingest_s={ingest_s:.2f} "
        f"ingest_cpu_s={ingest_cpu:.2f} "
        f"ms_per_run={1000 * ingest_s / max(ingested, 1):.1f} "
        f"rows_per_s={rows_total / ingest_s:.0f} "
        f"views_total_s={sum(t for t, _ in view_times.values()):.3f} "
        f"slowest_view={slowest}:{view_times[slowest][0]:.3f}s compare_s={t_compare:.3f} "
        f"db_mb={size_mb:.1f}"
    )
    if not args.no_lake:
        with contextlib.ExitStack() as stack:
            lake = DuckLake.parse(args.lake or str(tmp / "lake"))
            if args.servers:
                lake = stack.enter_context(lake_on_servers())
            bench_lake_side(lake, args, view_times, t_compare, db)
    if args.db is None and not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
