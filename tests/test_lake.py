"""The DuckLake history (docs/scale-out.md, docs/history.md), its catalog a local file and its data
a folder: the same tables, views and macros as the DuckDB file, every ``history`` command on
``--lake`` / ``HOLODECK_HISTORY_URL``, ``sync --to/--from``, ``maintain``, the Dagster checks, and
many writers at once. PostgreSQL and S3: tests/test_ducklake_servers.py."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest

from holodeck_core.history import schema, store
from holodeck_core.history.ducklake import ALIAS, DuckLake
from holodeck_core.history.failures import FailedCell, record_failed_run
from holodeck_core.history.ingest import prepare_run
from holodeck_core.history.tabular import as_arrow
from tests.dagster_helpers import by_check
from tests.history_helpers import HISTORY, build_history, ingest_runs, make_run, run_cli

WRITERS = 3
RUNS_PER_WRITER = 5
"""A local catalog file takes one writing process at a time (the others wait for its lock):
a few writers here; 8 x 25 at once on PostgreSQL in tests/test_ducklake_servers.py."""


def said(text: str) -> str:
    """Console text with rich's line wrapping undone."""
    return " ".join(text.split())


def rows(target: store.History, sql: str) -> list[tuple[Any, ...]]:
    with store.reader(target) as con:
        return con.execute(sql).fetchall()


def _digits(value: Any) -> Any:
    """A float to 12 significant digits: sums over rows in another order (a lake's files, the
    file's row groups) differ in the last bits."""
    return float(f"{value:.12g}") if isinstance(value, float) else value


def snapshot(target: store.History) -> dict[str, Any]:
    """Every table (but the ingest clock) and view, sorted, with its column types."""
    found: dict[str, Any] = {}
    with store.reader(target) as con:
        for name in (*schema.TABLES, "failed_runs", *schema.MAIN_VIEWS, "flaky_cases(3)"):
            select = (
                f"SELECT * EXCLUDE (ingested_at) FROM {name}"
                if name == "eval_runs"
                else (f"SELECT * FROM {name}")
            )
            types = [row[:2] for row in con.execute(f"DESCRIBE {select}").fetchall()]
            found[name] = (
                types,
                sorted(repr(tuple(map(_digits, row))) for row in con.execute(select).fetchall()),
            )
    return found


def fill(target: store.History) -> None:
    build_history(target)  # type: ignore[arg-type]
    record_failed_run(
        target,
        dagster_run_id="d-1",
        job_name="Support_bot_eval",
        agent_slug="support-bot",
        cells=[FailedCell("v3", "v3", "default"), FailedCell("v3", "v3", "large")],
        trigger="nightly",
        failed_at=datetime(2026, 1, 9, 2, tzinfo=UTC),
        error="boom",
    )


@pytest.fixture
def lake(tmp_path: Path) -> DuckLake:
    target = DuckLake.parse(str(tmp_path / "lake"))
    fill(target)
    return target


def test_the_lake_serves_the_same_tables_and_views_as_the_file(
    lake: DuckLake, tmp_path: Path
) -> None:
    db = tmp_path / "history.duckdb"
    fill(db)
    assert snapshot(lake) == snapshot(db)
    assert (tmp_path / "lake" / "catalog.ducklake").is_file()
    assert list((tmp_path / "lake" / "data").rglob("*.parquet"))


def test_every_history_command_works_on_a_lake(
    lake: DuckLake,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, _ = run_cli(capsys, "runs", "--lake", lake.url, "--format", "csv")
    assert code == 0 and len(out.strip().splitlines()) == 1 + len(HISTORY)
    monkeypatch.setenv("HOLODECK_HISTORY_URL", lake.url)  # the same without the flag
    code, out, _ = run_cli(capsys, "show", "r2")
    assert code == 0 and "order-status" in out
    code, out, _ = run_cli(capsys, "compare", "r1", "r2", "--strict")
    assert code == 1 and "REGRESSION" in out  # order-status passed in r1, fails in r2
    code, out, _ = run_cli(
        capsys, "sql", "SELECT count(*) AS n FROM v_regressions", "--format", "csv"
    )
    assert code == 0 and out.splitlines()[1] != "0"
    code, _, err = run_cli(capsys, "sql", "SELECT * FROM read_csv('/etc/passwd')")
    assert code == 2, err  # user SQL reads no files, on a lake too
    code, _, err = run_cli(capsys, "sql", "DELETE FROM eval_runs")
    assert code == 2
    code, _, _ = run_cli(capsys, "export", "--format", "parquet", "--out", str(tmp_path / "x"))
    assert code == 0 and (tmp_path / "x" / "test_results.parquet").is_file()
    folder = tmp_path / "results"
    from tests.history_helpers import write_run

    write_run(folder, make_run("PPPP", datetime(2026, 2, 1, tzinfo=UTC), run_id="r9"))
    code, _, err = run_cli(capsys, "sync", str(folder))
    assert code == 0 and "synced 1 run(s)" in said(err)
    code, _, err = run_cli(capsys, "sync", str(folder))
    assert code == 0 and "synced 0 run(s); 1 already" in said(err)
    assert rows(lake, "SELECT count(*) FROM eval_runs") == [(len(HISTORY) + 1,)]


def test_sync_moves_a_history_to_a_lake_and_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "history.duckdb"
    fill(db)
    url = str(tmp_path / "lake")
    code, _, err = run_cli(capsys, "sync", "--db", str(db), "--to-lake", url)
    assert code == 0 and f"{len(HISTORY)} run(s)" in said(err)
    code, _, err = run_cli(capsys, "sync", "--db", str(db), "--to", url)
    assert code == 0 and f"0 run(s); {len(HISTORY)} already" in said(err)
    back = tmp_path / "back.duckdb"
    code, _, err = run_cli(capsys, "sync", "--lake", url, "--to", str(back))
    assert code == 0 and f"{len(HISTORY)} run(s)" in said(err)
    assert snapshot(DuckLake.parse(url)) == snapshot(db) == snapshot(back)
    code, _, err = run_cli(capsys, "sync", "--db", str(db))
    assert code == 2 and "RESULTS_DIR" in said(err)


# --- many writers, one polling reader ----------------------------------------------------------


def _writer(url: str, worker: int, start: Any) -> None:
    runs = [
        make_run(
            "PPFP" if i % 2 else "PFPE",
            datetime(2026, 1, 1, worker, i, tzinfo=UTC),
            run_id=f"w{worker}-{i:02d}",
            prompt=f"v{worker % 3}",
        )
        for i in range(RUNS_PER_WRITER)
    ]
    start.wait()
    lake = DuckLake.parse(url)
    for run in runs:  # one run at a time, as workers finish them, with time between runs in
        # which readers come in (a local catalog admits one process at a time)
        assert ingest_runs(lake, [run]).ingested == [run.metadata.run_id]
        time.sleep(0.05)


PARTIAL = """
SELECT r.run_id FROM eval_runs r
LEFT JOIN (SELECT run_id, count(*) AS n FROM test_results GROUP BY run_id) t USING (run_id)
LEFT JOIN (SELECT run_id, count(*) AS n FROM metric_results GROUP BY run_id) m USING (run_id)
WHERE coalesce(t.n, 0) <> r.total_tests OR coalesce(m.n, 0) <> 2 * r.total_tests - r.errored
"""


def _poller(url: str, start: Any, stop: Any, out: Any) -> None:
    lake = DuckLake.parse(url)
    start.wait()
    polls, partial, seen = 0, [], 0
    while not stop.is_set():
        with store.reader(lake) as con:
            partial += [row[0] for row in con.execute(PARTIAL).fetchall()]
            seen = max(seen, con.execute("SELECT count(*) FROM eval_runs").fetchall()[0][0])
        polls += 1
        time.sleep(0.05)
    out.put((polls, partial, seen))


def test_writers_into_one_lake_lose_nothing_and_a_reader_never_sees_half_a_run(
    tmp_path: Path,
) -> None:
    url = str(tmp_path / "lake")
    with store.writer(DuckLake.parse(url)):
        pass  # the schema, before the writers race
    context = mp.get_context("spawn")
    start, stop, out = context.Barrier(WRITERS + 1), context.Event(), context.Queue()
    writers = [context.Process(target=_writer, args=(url, w, start)) for w in range(WRITERS)]
    poller = context.Process(target=_poller, args=(url, start, stop, out))
    for process in (*writers, poller):
        process.start()
    for process in writers:
        process.join(timeout=300)
    stop.set()
    polls, partial, seen = out.get(timeout=60)
    poller.join(timeout=60)
    assert [p.exitcode for p in writers] == [0] * WRITERS  # no lock error, no failure
    assert partial == [] and polls > 1, (polls, partial)
    total = WRITERS * RUNS_PER_WRITER
    assert rows(DuckLake.parse(url), "SELECT count(*), count(DISTINCT run_id) FROM eval_runs") == [
        (total, total)
    ]
    assert rows(DuckLake.parse(url), PARTIAL) == []
    assert rows(DuckLake.parse(url), "SELECT count(*) FROM test_results") == [(4 * total,)]
    assert 0 < seen <= total


def test_a_new_lake_gets_its_whole_schema_in_one_commit(tmp_path: Path) -> None:
    """One schema version for every table: a reader of a table's inlined rows then loads no
    older catalog (docs/benchmarks.md: a quarter of a writer's catalog round trips)."""
    lake = DuckLake.parse(str(tmp_path / "lake"))
    for _ in range(2):  # created, then opened again at the latest version: nothing committed
        with store.writer(lake) as con:
            snapshots = con.execute(
                f"SELECT schema_version FROM ducklake_snapshots('{ALIAS}')"
            ).fetchall()
        assert snapshots == [(0,), (1,)]  # the lake's creation, then its schema
    assert rows(lake, "SELECT max(version) FROM schema_version") == [(schema.SCHEMA_VERSION,)]


def test_a_lake_reader_needs_no_lock_and_reads_nothing_but_parquet(lake: DuckLake) -> None:
    with store.reader(lake) as one, store.reader(lake, safe=True) as two:
        assert (
            one.execute("SELECT count(*) FROM v_runs").fetchall()
            == two.execute("SELECT count(*) FROM v_runs").fetchall()
        )
        with pytest.raises(duckdb.Error):
            two.execute("SET enable_external_access = true")


def test_dagster_writes_and_checks_against_a_lake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dagster as dg

    from holodeck_core.testing import run_model_server
    from holodeck_pipelines.builder import build_definitions
    from tests.dagster_helpers import materialize, register
    from tests.test_pipelines import RULES, make_project

    url = str(tmp_path / "lake")
    monkeypatch.setenv("HOLODECK_HISTORY_URL", url)
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path / "project", server.openai_base_url)
        defs = build_definitions(project)
        register(defs, instance)
        first = materialize(defs, instance, "v2")
        second = materialize(defs, instance, "v2")
    assert first.success and second.success
    assert not project.history_db.exists()  # everything went to the lake
    assert rows(DuckLake.parse(url), "SELECT count(*), min(partition_key) FROM eval_runs") == [
        (2, "v2")
    ]
    checks = by_check(second)
    assert checks["pass_rate_gate"].passed and checks["no_regression"].passed
    previous = checks["no_regression"].metadata["previous_run_id"].value
    [(first_run,)] = rows(
        DuckLake.parse(url), f"SELECT run_id FROM eval_runs WHERE dagster_run_id = '{first.run_id}'"
    )
    assert previous == first_run


def _killed_mid_commit(url: str) -> None:
    """A writer that has written a run's data files and dies before its commit."""
    lake = DuckLake.parse(url)
    prepared = prepare_run(make_run("PPFP", datetime(2026, 3, 1, tzinfo=UTC), run_id="killed"))
    with store.writer(lake) as con:
        con.execute("SET ducklake_default_data_inlining_row_limit = 0")  # rows go to files
        con.execute("BEGIN TRANSACTION")
        for table in schema.TABLES:
            rows = as_arrow(prepared.tables[table])  # noqa: F841 (read by the SQL)
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM rows")
        os._exit(9)  # no COMMIT, no cleanup


def test_a_writer_killed_mid_commit_leaves_nothing_visible_and_maintain_removes_its_files(
    lake: DuckLake, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "lake" / "data"
    counted = "SELECT count(*) FROM read_parquet('{}/**/test_results/*.parquet')"
    before = rows(lake, "SELECT count(*) FROM test_results")
    committed = duckdb.sql(counted.format(data)).fetchall()
    files = set(data.rglob("*.parquet"))
    killed = mp.get_context("spawn").Process(target=_killed_mid_commit, args=(lake.url,))
    killed.start()
    killed.join(timeout=120)
    assert killed.exitcode == 9
    assert set(data.rglob("*.parquet")) > files  # it wrote files, never committed them
    assert rows(lake, "SELECT count(*) FROM test_results") == before
    assert rows(lake, "SELECT count(*) FROM eval_runs WHERE run_id = 'killed'") == [(0,)]
    leftover = duckdb.sql(counted.format(data)).fetchall()
    assert leftover != committed  # a direct read counts the killed writer's rows
    # by default what is younger than an hour stays (it may be a live writer's, uncommitted)
    code, _, err = run_cli(capsys, "maintain", "--lake", lake.url)
    assert code == 0 and ", 0 unreferenced file(s) deleted" in said(err), err
    assert duckdb.sql(counted.format(data)).fetchall() == leftover
    code, _, err = run_cli(capsys, "maintain", "--lake", lake.url, "--grace", "0")
    assert code == 0 and "unreferenced file(s) deleted" in said(err), err
    assert duckdb.sql(counted.format(data)).fetchall() == committed  # no leftover counted
    assert rows(lake, "SELECT count(*) FROM test_results") == before
