"""The DuckDB run history: schema, ingest under concurrency, views, CLI, HoloDeck import/export.

Every test uses a real DuckDB file in tmp_path and EvalRuns built with the real models.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import re
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import jsonschema
import pytest
from referencing import Registry, Resource

from holodeck_core.errors import ExecutionError
from holodeck_core.history import holodeck_export, holodeck_import, schema, store
from holodeck_core.history.cli import main
from holodeck_core.history.ingest import ingest_run, ingest_runs
from holodeck_core.models import (
    Agent,
    EvalRun,
    EvalRunMetadata,
    MetricResult,
    PromptVersion,
    ReportSummary,
    TestReport,
    TestResult,
    TokenUsage,
    ToolInvocation,
)
from holodeck_core.models.agent import Instructions
from holodeck_core.models.evaluation import (
    CodeMetric,
    Direction,
    EvaluationConfig,
    Gate,
    RAGMetric,
    StandardMetric,
)
from holodeck_core.models.llm import LLMProvider
from holodeck_core.models.test_case import TestCaseModel
from holodeck_core.models.tools import FunctionTool, ToolMock

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(__file__).resolve().parents[2] / "shared"
HOLODECK = SHARED / "corpus" / "holodeck"
GENERATED = HOLODECK / "generated"
DOCS = REPO / "docs" / "history.md"

AGENT = "support-bot"
CASES = ("refund-policy", "order-status", "weather-paris", "escalation")
CANARY = "sk-canary-7f3a9c"
T0 = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)

# HoloDeck 0.7.1's report shapes (its report models, as seen in its real output).
HD_RESULT_KEYS = set(holodeck_export.RESULT_FIELDS)
HD_METRIC_KEYS = set(holodeck_export.METRIC_RESULT_FIELDS)
HD_SUMMARY_KEYS = set(holodeck_export.SUMMARY_FIELDS)
HD_REPORT_KEYS = set(holodeck_export.REPORT_FIELDS)


# --------------------------------------------------------------------------- factory


def make_agent(name: str = AGENT, cases: tuple[str, ...] = CASES) -> Agent:
    """An agent using our extensions HoloDeck lacks (variants, latency metric, gate, case
    ids/tags/weights, tool mocks) and a secret that must never reach an export."""
    return Agent(
        name=name,
        model=LLMProvider(provider="openai", name="gpt-4o-mini", api_key=CANARY),
        instructions=Instructions(file="prompts/system.md", variants=["prompts/alt.md"]),
        tools=[
            FunctionTool(
                name="get_weather",
                description="Weather for a city",
                file="tools/weather.py",
                function="get_weather",
                mock=ToolMock(result="sunny"),
            )
        ],
        evaluations=EvaluationConfig(
            model=LLMProvider(provider="openai", name="gpt-4o"),
            metrics=[
                RAGMetric(metric_type="faithfulness", threshold=0.5),
                StandardMetric(metric="latency", threshold=5000),
                CodeMetric(grader="graders:exact_grader", name="exact_grader"),
            ],
            gate=Gate(min_pass_rate=0.8, max_errors=0),
        ),
        test_cases=[
            TestCaseModel(
                id=case,
                name=case.replace("-", " "),
                input=f"Question about {case}?",
                tags=["billing"] if i % 2 == 0 else ["ops"],
                weight=2.0 if i == 0 else 1.0,
                metadata={"priority": "high" if i == 0 else "normal"},
            )
            for i, case in enumerate(cases)
        ],
    )


def make_result(
    case: str, status: str, when: datetime, *, ms: int = 400, tool_error: str | None = None
) -> TestResult:
    """A consistent case: PASS meets every threshold, FAIL misses faithfulness, ERROR never
    got an answer (model timeout) and its judge failed too."""
    metrics: list[MetricResult] = []
    if status == "ERROR":
        metrics.append(
            MetricResult(metric_name="faithfulness", kind="rag", passed=None, error="judge timeout")
        )
    else:
        score = 0.9 if status == "PASS" else 0.2
        metrics.append(
            MetricResult(
                metric_name="faithfulness",
                kind="rag",
                score=score,
                raw_score=score,
                threshold=0.5,
                passed=status == "PASS",
                model_used="gpt-4o",
            )
        )
        metrics.append(
            MetricResult(
                metric_name="latency",
                raw_score=float(ms),
                threshold=5000,
                direction=Direction.LOWER_IS_BETTER,
                unit="ms",
                passed=True,
            )
        )
    tools = []
    if case == "weather-paris" and status != "ERROR":
        tools.append(
            ToolInvocation.of(
                "get_weather", {"city": "Paris"}, None if tool_error else "sunny", error=tool_error
            )
        )
    return TestResult(
        test_id=case,
        test_name=case.replace("-", " "),
        test_input=f"Question about {case}?",
        agent_response=None if status == "ERROR" else f"Answer about {case}.",
        tool_calls=[t.name for t in tools],
        tool_invocations=tools,
        metric_results=metrics,
        ground_truth=f"Answer about {case}.",
        passed=status == "PASS",
        status=status,
        execution_time_ms=ms,
        errors=["model timeout"] if status == "ERROR" else [],
        timestamp=when.isoformat(),
        token_usage=None
        if status == "ERROR"
        else TokenUsage(prompt_tokens=20, completion_tokens=10, total_tokens=30),
        tags=["billing"] if case in ("refund-policy", "weather-paris") else ["ops"],
        weight=2.0 if case == "refund-policy" else 1.0,
    )


def make_run(
    statuses: str,
    when: datetime,
    *,
    run_id: str,
    prompt: str = "v1",
    trigger: str = "nightly",
    cases: tuple[str, ...] = CASES,
    dataset_hash: str | None = None,
    cost: float | None = 0.01,
    tool_error: str | None = None,
    agent: Agent | None = None,
    prompt_body: str | None = None,
    partitioned: bool = True,
) -> EvalRun:
    """``statuses`` is one letter per case: P, F or E. The prompt's body is ``prompt_body``
    (default: the label); ``partitioned`` runs carry the prompt as their partition key."""
    letters = {"P": "PASS", "F": "FAIL", "E": "ERROR"}
    results = [
        make_result(
            case,
            letters[s],
            when - timedelta(seconds=len(cases) - i),
            ms=300 + 100 * i,
            tool_error=tool_error,
        )
        for i, (case, s) in enumerate(zip(cases, statuses, strict=True))
    ]
    summary = ReportSummary.from_results(results, wall_time_ms=1500).model_copy(
        update={"cost_usd": cost}
    )
    agent = agent or make_agent(cases=cases)
    return EvalRun(
        report=TestReport(
            agent_name=agent.name,
            agent_config_path="agent.yaml",
            results=results,
            summary=summary,
            timestamp=when.isoformat(),
            holodeck_version="holodeck-pipelines 0.1.0",
            environment={"python": "3.11", "execution_config": {"parallel_test_cases": 8}},
        ),
        metadata=EvalRunMetadata(
            agent_config=agent,
            prompt_version=PromptVersion(
                version=prompt,
                source="file",
                file_path="prompts/system.md",
                body_hash=hashlib.sha256((prompt_body or prompt).encode()).hexdigest(),
                tags=["support"],
            ),
            holodeck_version="holodeck-pipelines 0.1.0",
            cli_args=["test", "agent.yaml"],
            git_commit="abc1234",
            run_id=run_id,
            config_hash="c" * 64,
            dataset_hash=dataset_hash or hashlib.sha256(",".join(cases).encode()).hexdigest(),
            trigger=trigger,
            started_at=(when - timedelta(seconds=2)).isoformat(),
            partition_key=prompt if partitioned else None,
            provenance={"price_table": "2026-05"},
        ),
    )


def write_run(folder: Path, run: EvalRun, name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"{run.metadata.run_id}.json")
    path.write_text(run.to_json(), encoding="utf-8")
    return path


def day(n: int, hour: int = 8) -> datetime:
    return T0 + timedelta(days=n, hours=hour - 8)


HISTORY = (
    # run id, prompt, when, statuses (refund-policy, order-status, weather-paris, escalation)
    ("r1", "v2", day(0, 8), "PPFP", "nightly"),
    ("r2", "v2", day(0, 20), "PFFP", "manual"),
    ("r3", "v2", day(1, 8), "PPEP", "nightly"),
    ("r4", "v3", day(2, 8), "PPPF", "nightly"),
    ("r5", "v3", day(3, 8), "PFPF", "nightly"),
)


def build_history(db: Path) -> None:
    """A small hand-made history whose view results are worked out in the tests."""
    runs = [
        make_run(
            statuses,
            when,
            run_id=rid,
            prompt=prompt,
            trigger=trigger,
            tool_error="upstream 503" if rid == "r5" else None,
        )
        for rid, prompt, when, statuses, trigger in HISTORY
    ]
    report = ingest_runs(db, runs)
    assert report.ingested == [r[0] for r in HISTORY]


def query(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def counts(db: Path) -> dict[str, int]:
    return {t: query(db, f"SELECT count(*) FROM {t}")[0][0] for t in schema.TABLES}


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["history", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "history.duckdb"


@pytest.fixture
def history(db: Path) -> Path:
    build_history(db)
    return db


def need_corpus() -> None:
    if not GENERATED.is_dir():
        pytest.skip(f"HoloDeck corpus not available at {GENERATED} (../shared is absent)")


# --------------------------------------------------------------------------- schema & ingest


def test_schema_migrates_forward_and_refuses_newer(db: Path) -> None:
    con = duckdb.connect(str(db))
    assert schema.migrate(con, target=1) == [1]
    assert query_con(con, "SELECT count(*) FROM duckdb_views() WHERE view_name = 'v_runs'") == 0
    con.close()
    with store.writer(db) as con:  # opening a writer applies what is pending
        versions = [r[0] for r in con.execute("SELECT version FROM schema_version").fetchall()]
        views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
    assert versions == [1, 2, 3, 4] == [m.version for m in schema.MIGRATIONS]
    assert {"v_runs", "v_pass_rate_trend", "v_metric_trend", "v_regressions"} <= views
    assert {"v_flaky_cases", "v_errors"} <= views
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO schema_version (version, description) VALUES (99, 'future')")
    con.close()
    with pytest.raises(ExecutionError, match="newer than this release"), store.writer(db):
        pass


def query_con(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    row = con.execute(sql).fetchone()
    return row[0] if row else None


def test_ingest_is_idempotent_and_counts_error_in_the_denominator(db: Path, tmp_path: Path) -> None:
    run = make_run("PPFE", day(0), run_id="run-a")
    path = write_run(tmp_path / "results", run)
    assert ingest_run(db, run, source_path=path) is True
    before = counts(db)
    assert ingest_run(db, run, source_path=path) is False
    assert (
        counts(db)
        == before
        == {
            "eval_runs": 1,
            "test_results": 4,
            "metric_results": 7,  # 2 per PASS/FAIL case, 1 for the ERROR case
            "tool_invocations": 1,
            "prompt_versions": 1,
            "case_trials": 4,  # one trial per case
            "judge_control_scores": 0,
        }
    )
    row = query(
        db,
        "SELECT total_tests, passed, failed, errored, pass_rate, weighted_pass_rate, "
        "total_tokens, cost_usd, trigger, source_path, file_sha256, prompt_version "
        "FROM eval_runs",
    )[0]
    assert row[:4] == (4, 2, 1, 1)
    assert row[4] == pytest.approx(0.5)  # ERROR counts in the denominator
    assert row[5] == pytest.approx(3 / 5)  # refund-policy weighs 2
    assert row[6:9] == (90, 0.01, "nightly")
    assert row[9] == str(path.resolve())
    assert row[10] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert row[11] == "v1"
    tool = query(db, "SELECT name, args->>'city', result::VARCHAR FROM tool_invocations")
    assert tool == [("get_weather", "Paris", '"sunny"')]


def test_sync_ingests_only_what_is_missing(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "agent" / "results" / AGENT
    for i in range(3):
        write_run(results, make_run("PPPP", day(i), run_id=f"s{i}"))
    (results / "report.json").write_text(json.dumps({"agent_name": AGENT, "results": []}))
    code, _, err = run_cli(capsys, "sync", str(tmp_path / "agent" / "results"), "--db", str(db))
    assert code == 0, err
    assert "synced 3 run(s); 0 already" in err
    assert "1 non-EvalRun JSON file(s) ignored" in err
    write_run(results, make_run("PFPP", day(5), run_id="s3"))
    (results / "broken.json").write_text(json.dumps({"report": {}, "metadata": {}}))
    code, _, err = run_cli(capsys, "sync", str(results), "--db", str(db))
    assert code == 2  # the unreadable EvalRun is reported ...
    assert "broken.json" in err
    assert "synced 1 run(s); 3 already" in err  # ... after everything else was ingested
    assert sorted(r[0] for r in query(db, "SELECT run_id FROM eval_runs")) == [
        "s0",
        "s1",
        "s2",
        "s3",
    ]


# --------------------------------------------------------------------------- concurrency


def _ingest_worker(db: str, files: list[str], barrier: Any, out: Any) -> None:
    """A separate process: wait for the others, then ingest each file with its own
    connection so the four processes contend for the lock on every run."""
    from holodeck_core.history.holodeck_import import load_run_file
    from holodeck_core.history.ingest import ingest_run

    try:
        barrier.wait(timeout=60)
        written = []
        for name in files:
            loaded = load_run_file(Path(name))
            written.append(ingest_run(Path(db), loaded.run, source_path=Path(name)))
        out.put(("ok", written))
    except BaseException as exc:  # reported to the parent, which fails the test
        out.put(("error", f"{type(exc).__name__}: {exc}"))


def _hold_writer(db: str, acquired: Any, release: Any, hold_s: float) -> None:
    """Hold the write lock until ``release`` is set or ``hold_s`` passes."""
    with store.writer(Path(db)):
        acquired.set()
        release.wait(timeout=hold_s)


def test_four_processes_ingest_at_once(db: Path, tmp_path: Path) -> None:
    shared = write_run(tmp_path / "runs", make_run("PPPP", day(0), run_id="shared"))
    plan = [
        [
            str(write_run(tmp_path / "runs", make_run("PFPE", day(w, 9 + i), run_id=f"w{w}-{i}")))
            for i in range(4)
        ]
        + [str(shared)]
        for w in range(4)
    ]
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    workers = [
        ctx.Process(target=_ingest_worker, args=(str(db), files, barrier, out)) for files in plan
    ]
    for worker in workers:
        worker.start()
    outcomes = [out.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    errors = [o[1] for o in outcomes if o[0] != "ok"]
    assert errors == []
    assert all(w.exitcode == 0 for w in workers)
    written = [flag for o in outcomes for flag in o[1]]
    assert written.count(True) == 17  # 16 own runs + the shared one exactly once
    assert counts(db) == {
        "eval_runs": 17,
        "test_results": 17 * 4,
        "metric_results": 4 * 4 * 7 + 8,
        "tool_invocations": 17,
        "prompt_versions": 1,
        "case_trials": 17 * 4,
        "judge_control_scores": 0,
    }
    duplicates = query(
        db,
        "SELECT run_id, case_id, metric_index, count(*) FROM metric_results "
        "GROUP BY ALL HAVING count(*) > 1",
    )
    assert duplicates == []


def test_sql_reader_waits_for_a_writer(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ctx = mp.get_context("spawn")
    acquired, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_writer, args=(str(history), acquired, release, 1.5))
    holder.start()
    try:
        assert acquired.wait(timeout=60)
        assert holder.is_alive()  # the lock is held when the reader starts
        code, out, err = run_cli(
            capsys,
            "sql",
            "SELECT count(*) AS n FROM eval_runs",
            "--db",
            str(history),
            "--lock-timeout",
            "60",
            "--format",
            "json",
        )
    finally:
        release.set()
        holder.join(timeout=60)
    assert code == 0, err
    assert json.loads(out) == [{"n": 5}]


def test_locked_database_fails_with_holder_and_advice(
    history: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ctx = mp.get_context("spawn")
    acquired, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_writer, args=(str(history), acquired, release, 60))
    holder.start()
    try:
        assert acquired.wait(timeout=60)
        code, _, err = run_cli(
            capsys, "sql", "SELECT 1", "--db", str(history), "--lock-timeout", "0.3"
        )
        assert code == 3
        assert str(history) in err
        assert f"PID {holder.pid}" in err
        assert "--lock-timeout" in err and "history sync" in err
        with pytest.raises(ExecutionError, match=rf"PID {holder.pid}"):
            ingest_run(history, make_run("PPPP", day(9), run_id="late"), lock_timeout=0.3)
    finally:
        release.set()
        holder.join(timeout=60)
    assert query(history, "SELECT count(*) FROM eval_runs WHERE run_id = 'late'") == [(0,)]


def test_same_process_writer_blocks_a_reader_like_a_lock(history: Path) -> None:
    with store.writer(history), pytest.raises(ExecutionError) as caught:  # noqa: SIM117
        with store.reader(history, timeout_s=0.2):
            pass
    assert f"this process (PID {os.getpid()})" in str(caught.value)
    with store.reader(history, timeout_s=0.2) as con:  # released: readable again
        assert con.execute("SELECT count(*) FROM eval_runs").fetchall() == [(5,)]


def test_lock_holder_is_parsed_from_duckdb_text() -> None:
    text = (
        'IO Error: Could not set lock on file "/x/h.duckdb": Conflicting lock is held in '
        "/usr/bin/python3.11 (PID 4242) by user ana. See also https://duckdb.org/docs"
    )
    holder = store.parse_lock_holder(text)
    assert (holder.process, holder.pid, holder.user) == ("/usr/bin/python3.11", 4242, "ana")
    assert holder.describe() == "/usr/bin/python3.11 (PID 4242, user ana)"
    bare = store.parse_lock_holder("Could not set lock on file x")
    assert (bare.pid, bare.describe()) == (None, "another process")


def test_prompt_body_is_copied_from_the_snapshot_store(db: Path, tmp_path: Path) -> None:
    from holodeck_core.config.prompts import Prompt, PromptStore

    prompts = tmp_path / "prompts"
    snapshots = PromptStore(prompts, AGENT)

    def prompt(body: str) -> Prompt:
        digest = hashlib.sha256(body.encode()).hexdigest()
        version = PromptVersion(version="v1", source="inline", body_hash=digest)
        return Prompt(version=version, body=body)

    assert snapshots.register(prompt("Be brief.")).key == "v1"
    reused = snapshots.register(prompt("Be very brief."))  # same label, another body
    assert reused.key.startswith("v1+")
    run = make_run("PPPP", day(0), run_id="p1", prompt_body="Be very brief.", partitioned=False)
    assert ingest_run(db, run, prompts_dir=prompts)
    assert query(db, "SELECT prompt_version, prompt_label FROM eval_runs") == [(reused.key, "v1")]
    body, path, first = query(db, "SELECT body, snapshot_path, first_run_id FROM prompt_versions")[
        0
    ]
    assert (body, Path(path).name, first) == ("Be very brief.", f"{reused.key}.json", "p1")


# --------------------------------------------------------------------------- views


def test_pass_rate_trend(history: Path) -> None:
    rows = query(
        history,
        "SELECT prompt_version, day, runs, total_tests, passed, failed, errored, pass_rate "
        "FROM v_pass_rate_trend ORDER BY day, prompt_version",
    )
    d = [day(i).date() for i in range(4)]
    assert rows == [
        ("v2", d[0], 2, 8, 5, 3, 0, pytest.approx(5 / 8)),
        ("v2", d[1], 1, 4, 3, 0, 1, pytest.approx(3 / 4)),
        ("v3", d[2], 1, 4, 3, 1, 0, pytest.approx(3 / 4)),
        ("v3", d[3], 1, 4, 2, 2, 0, pytest.approx(2 / 4)),
    ]


def test_regressions_between_runs_and_prompt_versions(history: Path) -> None:
    rows = query(
        history,
        "SELECT comparison, base_run_id, head_run_id, case_id, base_status, head_status, flip "
        "FROM v_regressions ORDER BY comparison, head_run_id, case_id",
    )
    assert rows == [
        ("previous_run", "r1", "r2", "order-status", "PASS", "FAIL", "regression"),
        ("previous_run", "r2", "r3", "order-status", "FAIL", "PASS", "fix"),
        ("previous_run", "r2", "r3", "weather-paris", "FAIL", "ERROR", "change"),
        ("previous_run", "r4", "r5", "order-status", "PASS", "FAIL", "regression"),
        ("prompt_version", "r3", "r5", "escalation", "PASS", "FAIL", "regression"),
        ("prompt_version", "r3", "r5", "order-status", "PASS", "FAIL", "regression"),
        ("prompt_version", "r3", "r5", "weather-paris", "ERROR", "PASS", "fix"),
    ]


def test_flaky_cases(history: Path) -> None:
    rows = query(
        history,
        "SELECT prompt_version, case_id, runs, passes, fails, errors, flips, history, "
        "last_status FROM v_flaky_cases ORDER BY prompt_version, case_id",
    )
    assert rows == [
        ("v2", "order-status", 3, 2, 1, 0, 2, "PFP", "PASS"),
        ("v2", "weather-paris", 3, 0, 2, 1, 1, "FFE", "ERROR"),
        ("v3", "order-status", 2, 1, 1, 0, 1, "PF", "FAIL"),
    ]
    assert query(history, "SELECT count(*) FROM flaky_cases(1)") == [(0,)]


def test_metric_trend_interval_runs_and_errors(history: Path) -> None:
    mean, sd, n, low, high, errors = query(
        history,
        "SELECT mean, stddev, n, ci95_low, ci95_high, errors FROM v_metric_trend "
        "WHERE run_id = 'r3' AND metric_name = 'faithfulness'",
    )[0]
    scores = [0.9, 0.9, 0.9]  # weather-paris errored: excluded from n
    assert (n, errors) == (3, 1)
    assert mean == pytest.approx(statistics.mean(scores))
    assert sd == pytest.approx(0.0, abs=1e-12)
    r1 = query(
        history,
        "SELECT mean, stddev, ci95_low, ci95_high FROM v_metric_trend "
        "WHERE run_id = 'r1' AND metric_name = 'faithfulness'",
    )[0]
    values = [0.9, 0.9, 0.2, 0.9]
    half = 3.182 * statistics.stdev(values) / 2  # t(0.975, df=3) * s / sqrt(4)
    assert r1 == pytest.approx(
        (statistics.mean(values), statistics.stdev(values), 0.725 - half, 0.725 + half)
    )
    assert (low, high) == (pytest.approx(mean), pytest.approx(mean))
    runs = query(
        history,
        "SELECT run_id, run_seq, previous_run_id, pass_rate_change, cost_per_pass "
        "FROM v_runs WHERE prompt_version = 'v2' ORDER BY run_seq",
    )
    assert runs == [
        ("r1", 1, None, None, pytest.approx(0.01 / 3)),
        ("r2", 2, "r1", pytest.approx(-0.25), pytest.approx(0.01 / 2)),
        ("r3", 3, "r2", pytest.approx(0.25), pytest.approx(0.01 / 3)),
    ]
    errs = query(
        history,
        "SELECT run_id, case_id, source, name, message FROM v_errors ORDER BY run_id, source",
    )
    assert errs == [
        ("r3", "weather-paris", "case", None, "model timeout"),
        ("r3", "weather-paris", "metric", "faithfulness", "judge timeout"),
        ("r5", "weather-paris", "tool", "get_weather", "upstream 503"),
    ]


def doc_queries() -> list[str]:
    text = DOCS.read_text(encoding="utf-8")
    examples = text.split("## Example queries", 1)[1]
    return re.findall(r"```sql\n(.*?)```", examples, flags=re.DOTALL)


def test_the_ten_doc_queries_run_and_answer(
    history: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = doc_queries()
    assert len(queries) == 10
    for number, sql in enumerate(queries, start=1):
        code, out, err = run_cli(capsys, "sql", sql, "--db", str(history), "--format", "json")
        assert code == 0, f"query {number}: {err}"
        assert json.loads(out), f"query {number} returned no rows on the sample history"
    code, out, _ = run_cli(capsys, "sql", queries[4], "--db", str(history), "--format", "json")
    assert [r["case_id"] for r in json.loads(out)] == ["order-status"]  # r5 broke it


def test_docs_describe_every_column(history: Path) -> None:
    text = DOCS.read_text(encoding="utf-8")
    for relation in (
        *schema.TABLES,
        "schema_version",
        "v_pass_rate_trend",
        "v_metric_trend",
        "v_regressions",
        "v_flaky_cases",
        "v_errors",
    ):
        columns = [r[0] for r in query(history, f"DESCRIBE {relation}")]
        missing = [c for c in columns if f"`{c}`" not in text]
        assert missing == [], f"{relation}: undocumented columns {missing}"


# --------------------------------------------------------------------------- CLI


def test_compare_flags_a_planted_regression(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ingest_runs(
        db,
        [
            make_run("PPPP", day(0), run_id="base-aaaa"),
            make_run("PPFP", day(1), run_id="cand-bbbb", cost=0.02),
        ],
    )
    code, out, _ = run_cli(capsys, "compare", "base", "cand", "--db", str(db), "--format", "json")
    assert code == 0  # one flip of four cases is no evidence of a drop (McNemar p = 1)
    paired = json.loads(out)
    assert paired["verdict"] == "no significant change" and paired["regression"] is False
    assert paired["paired"]["test"] == "mcnemar_exact" and paired["paired"]["p_value"] == 1.0
    code, out, _ = run_cli(
        capsys, "compare", "base", "cand", "--db", str(db), "--format", "json", "--strict"
    )
    assert code == 1  # --strict keeps the any-flip rule
    result = json.loads(out)
    assert result["regression"] is True
    assert [(f["case_id"], f["status_a"], f["status_b"]) for f in result["flips"]] == [
        ("weather-paris", "PASS", "FAIL")
    ]
    assert result["pass_rate_drop"] == pytest.approx(0.25)
    assert result["cost_delta"] == pytest.approx(0.01)
    assert result["tokens_delta"] == 0
    faith = next(m for m in result["metrics"] if m["metric_name"] == "faithfulness")
    assert faith["delta"] == pytest.approx((0.9 * 3 + 0.2) / 4 - 0.9)
    assert faith["worse"] is True
    code, out, _ = run_cli(capsys, "compare", "base-aaaa", "cand-bbbb", "--db", str(db), "--strict")
    assert code == 1 and "REGRESSION" in out and "weather-paris" in out
    assert run_cli(capsys, "compare", "base", "base", "--db", str(db))[0] == 0


def test_compare_different_test_sets_uses_common_cases(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    more = (*CASES, "new-one", "new-two")
    ingest_runs(
        db,
        [
            make_run("PPPP", day(0), run_id="small-run"),
            make_run("PPPPFF", day(1), run_id="large-run", cases=more),
        ],
    )
    code, out, err = run_cli(
        capsys,
        "compare",
        "small-run",
        "large-run",
        "--db",
        str(db),
        "--format",
        "json",
        "--strict",
    )
    assert code == 1  # no flip, but the pass rate fell from 100% to 67%
    result = json.loads(out)
    assert result["flips"] == [] and result["common_cases"] == 4
    assert result["only_in_b"] == ["new-one", "new-two"]
    assert "different test sets" in err
    assert result["pass_rate_drop"] == pytest.approx(1 / 3)
    assert result["paired"]["n"] == 4 and result["paired"]["mean_diff"] == 0.0
    args = ("compare", "small-run", "large-run", "--db", str(db), "--max-drop", "0.5", "--strict")
    assert run_cli(capsys, *args)[0] == 0


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        ("DROP TABLE eval_runs", "refused a statement of type DROP"),
        ("SELECT 1; DROP TABLE eval_runs", "exactly one"),
        ("DELETE FROM eval_runs", "refused a statement of type DELETE"),
        ("UPDATE eval_runs SET pass_rate = 1", "refused a statement of type UPDATE"),
        ("WITH x AS (SELECT 1) INSERT INTO schema_version SELECT 5, 'x', now()", "INSERT"),
        ("COPY eval_runs TO 'leak.csv'", "refused a statement of type COPY"),
        ("ATTACH 'other.duckdb' AS other", "refused a statement of type ATTACH"),
        ("SET enable_external_access = true", "refused a statement of type SET"),
        ("SELECT * FROM read_csv('/etc/passwd')", "disabled by configuration"),
        ("", "empty"),
    ],
)
def test_sql_refuses_anything_but_one_select(
    history: Path, statement: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = hashlib.sha256(history.read_bytes()).hexdigest()
    code, out, err = run_cli(capsys, "sql", statement, "--db", str(history))
    assert code == 2
    assert out == ""
    assert reason in err
    assert hashlib.sha256(history.read_bytes()).hexdigest() == before
    assert query(history, "SELECT count(*) FROM eval_runs") == [(5,)]


def test_runs_show_and_run_lookup(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "runs", "--db", str(history), "--format", "json")
    assert code == 0
    assert [r["run_id"] for r in json.loads(out)] == ["r5", "r4", "r3", "r2", "r1"]
    code, out, _ = run_cli(capsys, "runs", "--db", str(history), "--prompt-version", "v3")
    assert code == 0 and "r5" in out and "r1" not in out
    code, out, _ = run_cli(capsys, "show", "r3", "--db", str(history))
    assert code == 0
    assert "weather-paris" in out and "ERROR" in out and "model timeout" in out
    code, out, _ = run_cli(capsys, "show", "r3", "--db", str(history), "--format", "json")
    detail = json.loads(out)
    assert detail["run"]["errored"] == 1 and len(detail["cases"]) == 4
    code, _, err = run_cli(capsys, "show", "nope-nope", "--db", str(history))
    assert code == 2 and "not found" in err
    code, _, err = run_cli(capsys, "runs", "--db", str(history.with_name("absent.duckdb")))
    assert code == 2 and "no history database" in err


def test_default_database_comes_from_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOLODECK_HISTORY_DB", str(tmp_path / "env.duckdb"))
    path = write_run(tmp_path / "results", make_run("PPPP", day(0), run_id="env-run"))
    code, _, err = run_cli(capsys, "import", str(path))
    assert code == 0, err
    assert query(tmp_path / "env.duckdb", "SELECT run_id FROM eval_runs") == [("env-run",)]


# --------------------------------------------------------------------------- HoloDeck


def test_holodeck_corpus_files_import(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need_corpus()
    code, _, err = run_cli(capsys, "import", str(GENERATED), "--db", str(db))
    assert code == 0, err
    files = sorted(GENERATED.glob("*/evalrun_example.json"))
    expected_ids = {hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
    rows = query(
        db,
        "SELECT run_id, agent_name, trigger, total_tests, passed, failed, errored, pass_rate "
        "FROM eval_runs ORDER BY agent_name",
    )
    assert {r[0] for r in rows} == expected_ids and len(rows) == 3
    assert {r[2] for r in rows} == {"import"}
    by_agent = {r[1]: r[3:] for r in rows}
    assert by_agent["fake-bench-agent"] == (20, 16, 4, 0, pytest.approx(0.8))
    assert by_agent["geval-probe"] == (10, 10, 0, 0, pytest.approx(1.0))
    assert by_agent["tools-probe"] == (3, 2, 1, 0, pytest.approx(2 / 3))
    kinds = dict(query(db, "SELECT DISTINCT metric_name, kind FROM metric_results"))
    assert kinds == {"bleu": "standard", "Correctness": "geval", "equality": "standard"}
    assert query(db, "SELECT count(*) FROM tool_invocations") == [(3,)]
    before = counts(db)
    assert run_cli(capsys, "import", str(GENERATED), "--db", str(db))[0] == 0
    assert counts(db) == before


def test_import_infers_what_holodeck_does_not_record(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = holodeck_export.to_holodeck(make_run("PFEP", day(0), run_id="ours"))
    for result in document["report"]["results"]:
        for metric in result["metric_results"]:
            del metric["kind"]
    document["report"]["results"][0]["metric_results"].append(
        {
            "metric_name": "exact_grader",
            "score": 1.0,
            "threshold": None,
            "passed": True,
            "scale": None,
            "error": None,
            "retry_count": 0,
            "evaluation_time_ms": 0,
            "model_used": None,
            "reasoning": None,
        }
    )
    path = tmp_path / "hd.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    code, _, err = run_cli(capsys, "import", str(path), "--db", str(db))
    assert code == 0, err
    run = query(db, "SELECT run_id, trigger, passed, failed, errored, dataset_hash FROM eval_runs")
    assert run[0][:5] == (hashlib.sha256(path.read_bytes()).hexdigest(), "import", 2, 1, 1)
    assert run[0][5] is not None
    kinds = dict(query(db, "SELECT DISTINCT metric_name, kind FROM metric_results"))
    assert kinds == {"faithfulness": "rag", "latency": "standard", "exact_grader": "code"}
    assert query(
        db, "SELECT DISTINCT unit, direction FROM metric_results WHERE metric_name = 'latency'"
    ) == [("ms", "lower_is_better")]
    statuses = query(db, "SELECT case_id, status FROM test_results ORDER BY case_index")
    assert statuses == [
        ("refund-policy", "PASS"),
        ("order-status", "FAIL"),
        ("weather-paris", "ERROR"),
        ("escalation", "PASS"),
    ]
    summary = holodeck_import.load_run_file(path).run.report.summary
    assert (summary.passed, summary.failed, summary.errored) == (2, 1, 1)  # ERROR unfolded
    assert holodeck_import.infer_metric_kind("contextual_recall", None) == "rag"
    assert holodeck_import.infer_metric_kind("Helpfulness", None) == "geval"


def holodeck_validators() -> tuple[
    jsonschema.Draft202012Validator, jsonschema.Draft202012Validator
]:
    contracts = HOLODECK / "specs" / "031-eval-runs-dashboard" / "contracts"
    eval_run = json.loads((contracts / "eval_run.schema.json").read_text())
    prompt = json.loads((contracts / "prompt_version.schema.json").read_text())
    agent = json.loads((HOLODECK / "schemas" / "agent.schema.json").read_text())
    registry: Registry[Any] = Registry().with_resources(
        [(s["$id"], Resource.from_contents(s)) for s in (eval_run, prompt)]
    )
    return (
        jsonschema.Draft202012Validator(eval_run, registry=registry),
        jsonschema.Draft202012Validator(agent),
    )


def test_exports_validate_against_holodeck_schemas(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    need_corpus()
    ours = make_run("PFEP", day(0), run_id="ours-with-error")
    write_run(tmp_path / "results", ours)
    assert (
        run_cli(capsys, "import", str(GENERATED), str(tmp_path / "results"), "--db", str(db))[0]
        == 0
    )
    out = tmp_path / "export"
    code, _, err = run_cli(
        capsys, "export", "--format", "holodeck", "--out", str(out), "--db", str(db)
    )
    assert code == 0, err
    files = sorted(out.rglob("*.json"))
    assert len(files) == 4
    run_validator, agent_validator = holodeck_validators()
    for file in files:
        text = file.read_text(encoding="utf-8")
        assert CANARY not in text
        document = json.loads(text)
        run_validator.validate(document)
        agent_validator.validate(document["metadata"]["agent_config"])
        report = document["report"]
        assert set(report) == HD_REPORT_KEYS
        assert set(report["summary"]) == HD_SUMMARY_KEYS
        summary = report["summary"]
        assert summary["passed"] + summary["failed"] == summary["total_tests"]
        assert all(isinstance(v, str) for v in report["environment"].values())
        for result in report["results"]:
            assert set(result) == HD_RESULT_KEYS
            assert all(set(m) == HD_METRIC_KEYS for m in result["metric_results"])
            assert all(isinstance(m["passed"], bool) for m in result["metric_results"])
            # HoloDeck 0.7.1's MetricResult requires a number (latency: ms, errors: 0.0)
            assert all(isinstance(m["score"], float) for m in result["metric_results"])
    mine = json.loads((out / AGENT).joinpath(holodeck_export.holodeck_file_name(ours)).read_text())
    assert mine["report"]["summary"]["failed"] == 2  # FAIL + ERROR folded
    assert [r["passed"] for r in mine["report"]["results"]] == [True, False, False, True]
    config = mine["metadata"]["agent_config"]
    assert config["instructions"] == {"file": "prompts/system.md", "inline": None}
    assert [m["type"] for m in config["evaluations"]["metrics"]] == ["rag", "code"]
    assert "id" not in config["test_cases"][0] and "mock" not in config["tools"][0]
    assert "test_cases_file" not in config  # HoloDeck 0.7.1's Agent model forbids it (issue 18)

    code, _, err = run_cli(
        capsys,
        "export",
        "--format",
        "json",
        "--out",
        str(tmp_path / "json"),
        "--run",
        "ours-with-error",
        "--db",
        str(db),
    )
    assert code == 0, err
    (exported,) = (tmp_path / "json").rglob("*.json")
    # Equal to the run as its file holds it (the secret was written as '***').
    assert EvalRun.model_validate_json(exported.read_text()) == EvalRun.model_validate_json(
        ours.to_json()
    )

    code, _, err = run_cli(
        capsys,
        "export",
        "--format",
        "parquet",
        "--out",
        str(tmp_path / "pq"),
        "--agent",
        AGENT,
        "--db",
        str(db),
    )
    assert code == 0, err
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "pq" / "test_results.parquet").num_rows == 4
    assert pq.read_table(tmp_path / "pq" / "eval_runs.parquet").num_rows == 1


def test_agent_config_export_validates_for_every_sample_agent() -> None:
    need_corpus()
    import yaml

    _, agent_validator = holodeck_validators()
    configs = sorted(HOLODECK.glob("**/agent.yaml"))
    assert len(configs) >= 10
    for config in configs:
        agent = Agent.model_validate(yaml.safe_load(config.read_text(encoding="utf-8")))
        exported = holodeck_export.to_holodeck(
            make_run("P", day(0), run_id="x", agent=agent, cases=("only-case",))
        )
        agent_validator.validate(exported["metadata"]["agent_config"])


def test_export_names_runs_whose_file_is_gone(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = write_run(tmp_path / "results", make_run("PPPP", day(0), run_id="kept"))
    gone = write_run(tmp_path / "results", make_run("PPFP", day(1), run_id="gone"))
    assert run_cli(capsys, "sync", str(tmp_path / "results"), "--db", str(db))[0] == 0
    gone.unlink()
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "export", "--format", "json", "--out", str(out), "--db", str(db))
    assert code == 3
    assert str(gone.resolve()) in err and "gone" in err
    assert [p.name for p in out.rglob("*.json")] == [
        holodeck_export.holodeck_file_name(EvalRun.model_validate_json(kept.read_text()))
    ]
