"""The DuckDB run history, written: the schema, created once (a newer database refused),
idempotent ingest with ERROR in the denominator, ``history sync`` ingesting only what is
missing, four processes ingesting at once, readers waiting for a writer and the lock holder
named when they cannot, and prompt bodies copied from the snapshot store. Every test uses a
real DuckDB file in tmp_path and EvalRuns built with the real models."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
from pathlib import Path
from typing import Any

import duckdb
import pytest

from holodeck_core import defaults
from holodeck_core.errors import ExecutionError
from holodeck_core.history import schema, store
from holodeck_core.history.ingest import ingest_run
from holodeck_core.models import PromptVersion
from tests import history_helpers
from tests.history_helpers import AGENT, counts, day, make_run, query, run_cli, write_run

# Shared fixtures: pytest finds a fixture by its name in the test module.
db = history_helpers.db
history = history_helpers.history

# --------------------------------------------------------------------------- schema & ingest


def test_schema_is_created_once_and_refuses_newer(db: Path) -> None:
    with store.writer(db) as con:  # a new history gets the whole schema
        versions = con.execute("SELECT version, description FROM schema_version").fetchall()
        views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
        assert schema.create(con) is False  # there already: one query, nothing run
    assert versions == [(schema.SCHEMA_VERSION, schema.SCHEMA_DESCRIPTION)] == [(1, versions[0][1])]
    assert {"v_runs", "v_pass_rate_trend", "v_metric_trend", "v_regressions"} <= views
    assert {"v_flaky_cases", "v_errors", "v_run_comparisons", "v_judge_agreement"} <= views
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO schema_version (version, description) VALUES (99, 'future')")
    con.close()
    with pytest.raises(ExecutionError, match="newer than this release"), store.writer(db):
        pass


def test_the_schema_is_created_whole_or_not_at_all(db: Path) -> None:
    con = duckdb.connect(str(db))
    last = schema.statements()[-1]

    def failing_at_the_end(statement: str) -> str:  # the last statement fails
        return "SELECT error('disk full')" if statement == last else statement

    with pytest.raises(duckdb.Error, match="disk full"):
        schema.create(con, db_label=str(db), translate=failing_at_the_end)
    assert schema.installed_version(con, str(db)) == 0  # nothing of it
    assert query_con(con, "SELECT count(*) FROM duckdb_tables()") == 0
    assert schema.create(con) is True
    assert schema.installed_version(con, str(db)) == schema.SCHEMA_VERSION
    con.close()


def test_placeholders_are_filled_from_defaults_and_checked() -> None:
    values = {"alpha": "0.05", "flaky_window": "10"}
    assert schema.render("p < {{ alpha }} AND n = {{flaky_window}}", values, "x.sql") == (
        "p < 0.05 AND n = 10"
    )
    for text, problem in (
        ("p < {{ beta }}", "no value for placeholder"),
        ("p < {{ Alpha }}", "malformed placeholder"),
        ("p < {{ alpha }", "malformed placeholder"),
        ("p < {{alpha}} }}", "malformed placeholder"),
    ):
        with pytest.raises(ValueError, match=problem):
            schema.render(text, values, "x.sql")
    assert "{{" not in "".join(schema.statements()) and "}}" not in "".join(schema.statements())
    assert f"p_value < {defaults.ALPHA}" in "".join(schema.statements())


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
            "call_costs": 0,  # an imported HoloDeck run has no cost data
            "run_costs": 0,
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
        "call_costs": 0,
        "run_costs": 0,
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
        return Prompt(version=version, body=body, text=body)

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


@pytest.mark.parametrize(
    "files",
    [
        {},  # an empty folder
        {"notes.txt": "no JSON here", "sub/readme.md": "# nothing"},  # files, none JSON
        {"report.json": '{"agent_name": "a", "results": []}', "sub/x.json": "[1, 2]"},
    ],
    ids=["empty", "no-json", "only-other-json"],
)
def test_sync_of_a_folder_without_evalruns_says_it_found_none(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, str]
) -> None:
    folder = tmp_path / "wrong-folder"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    code, _, err = run_cli(capsys, "sync", str(folder), "--db", str(db))
    said = " ".join(err.split())
    assert code == 0, err
    assert f"found no EvalRun under {folder}" in said, said
    assert "synced 0 run(s)" not in said
    if any(name.endswith(".json") for name in files):
        assert f"{len(files)} non-EvalRun JSON file(s) ignored" in said


def test_sync_of_runs_all_in_the_history_says_so(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results" / AGENT
    write_run(results, make_run("PPPP", day(0), run_id="a0"))
    run_cli(capsys, "sync", str(tmp_path / "results"), "--db", str(db))
    code, _, err = run_cli(capsys, "sync", str(tmp_path / "results"), "--db", str(db))
    said = " ".join(err.split())
    assert code == 0 and "synced 0 run(s); 1 already in the history" in said, said
    assert "found no EvalRun" not in said
