"""A history an earlier release wrote (schema 13 of its numbered migrations, committed under
tests/fixtures/history_before/ by its ``make_fixture.py``, which says how it was made) is
refused by every reader and writer with the command that rebuilds it, exit 2, and left as it
was; ``holodeck history rebuild`` keeps it aside and builds a history of this schema from the
EvalRun files, carrying over the run no file holds any more, the human labels, the failed run
and the budget ledger, on the DuckDB file and on a DuckLake."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest

from holodeck_core.cli.main import main
from holodeck_core.history import rebuild as rebuild_module
from holodeck_core.history import schema, store
from holodeck_core.history.ducklake import DuckLake
from holodeck_core.history.failures import FailedCell, record_failed_run
from holodeck_core.testing import run_model_server
from holodeck_pipelines.builder import build_definitions
from tests.conftest import REPO
from tests.dagster_helpers import materialize, register
from tests.history_before import FILE_ONLY_IN_HISTORY, RESULTS, RUNS, before_file, before_lake
from tests.test_pipelines import RULES, make_project

CARRIED = {
    "human_labels": "SELECT * FROM human_labels ORDER BY ALL",
    "failed_runs": "SELECT * FROM failed_runs ORDER BY ALL",
    "budget_ledger": "SELECT * FROM budget_ledger ORDER BY ALL",
    "r4": "SELECT * EXCLUDE (ingested_at) FROM eval_runs WHERE run_id = 'r4'",
    "r4 cases": "SELECT * FROM test_results WHERE run_id = 'r4' ORDER BY ALL",
    "r4 metrics": "SELECT * FROM metric_results WHERE run_id = 'r4' ORDER BY ALL",
    "r4 trials": "SELECT * FROM case_trials WHERE run_id = 'r4' ORDER BY ALL",
}
"""What only the old history holds, and must come over as it was."""


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


NEW_COLUMNS = "model_candidate, model_fingerprint"
"""eval_runs columns the fixture's history lacks (a rebuild carries them as ``default``, NULL)."""
NEW_FAILED_COLUMNS = "agent_slug, prompt_version, model_candidate"
"""failed_runs columns the fixture's history lacks (NULL, NULL, ``default`` once rebuilt)."""


def rows_of(
    con: duckdb.DuckDBPyConnection, *, rebuilt: bool = False
) -> dict[str, list[tuple[Any, ...]]]:
    sqls = dict(CARRIED)
    if rebuilt:
        sqls["r4"] = sqls["r4"].replace("(ingested_at)", f"(ingested_at, {NEW_COLUMNS})")
        sqls["failed_runs"] = (
            f"SELECT * EXCLUDE ({NEW_FAILED_COLUMNS}) FROM failed_runs ORDER BY ALL"
        )
    return {name: con.execute(sql).fetchall() for name, sql in sqls.items()}


def cli(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "holodeck_core.cli", *argv],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        timeout=120,
        check=False,
    )


def said(result: subprocess.CompletedProcess[str]) -> str:
    """What the command printed on stderr, as one line (rich wraps it to the terminal)."""
    return " ".join(result.stderr.split()).replace("/ ", "/")


def refused(result: subprocess.CompletedProcess[str], where: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "earlier release" in said(result) and "`holodeck history rebuild`" in said(result)
    assert where in said(result) and "Traceback" not in result.stderr + result.stdout


def test_every_reader_and_writer_refuses_an_earlier_history_and_leaves_it(
    tmp_path: Path,
) -> None:
    db = before_file(tmp_path)
    was = digest(db)
    labels = tmp_path / "labels.csv"
    labels.write_text("run_id,case_id,metric_name,human_passed\nr1,refund-policy,faithfulness,1\n")
    for argv in (
        ("history", "runs"),
        ("history", "sql", "SELECT 1"),
        ("history", "sync", str(RESULTS)),
        ("history", "import", str(RESULTS / "r1.json")),
        ("history", "export", "--out", str(tmp_path / "out"), "--format", "json"),
        ("history", "maintain"),
        ("labels", "import", str(labels), "--labeler", "ann"),
        ("dashboard", "--port", "0"),  # stops before it serves
    ):
        refused(cli(*argv, "--db", str(db)), str(db))
    with pytest.raises(schema.HistoryBeforeSchemaError, match="holodeck history rebuild"):
        record_failed_run(
            db, dagster_run_id="x", job_name="j", agent_slug=None, cells=[], trigger=None,
            failed_at=datetime(2026, 1, 8), error="e",
        )  # fmt: skip
    assert digest(db) == was and sorted(p.name for p in tmp_path.iterdir()) == [
        "history.duckdb",
        "labels.csv",
    ]


def test_a_dagster_run_fails_naming_the_rebuild_and_leaves_the_history(tmp_path: Path) -> None:
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path, server.openai_base_url)
        before_file(project.history_db.parent, project.history_db.name)
        was = digest(project.history_db)
        defs = build_definitions(project)
        register(defs, instance)
        result = materialize(defs, instance, "v2")
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    message = failure.step_failure_data.error.message if failure.step_failure_data.error else ""
    assert "earlier release" in message and "`holodeck history rebuild`" in message
    assert "Traceback" not in message and digest(project.history_db) == was


def test_rebuild_keeps_the_file_aside_and_carries_over_what_only_it_holds(
    tmp_path: Path,
) -> None:
    db = before_file(tmp_path)
    was = digest(db)
    with duckdb.connect(str(db), read_only=True) as old:
        expected = rows_of(old)
    assert all(expected.values())
    done = cli("history", "rebuild", "--db", str(db), str(RESULTS))
    assert done.returncode == 0, done.stderr
    assert "3 run(s) from 1 results folder(s), 1 run(s) with no EvalRun file" in said(done)
    assert "2 human_labels" in said(done) and "2 budget_ledger" in said(done)
    [aside] = [p for p in tmp_path.iterdir() if p.name.startswith("history.duckdb.before-rebuild")]
    assert digest(aside) == was and aside.name in done.stderr.replace("\n", "")
    with store.reader(db) as con:
        assert rows_of(con, rebuilt=True) == expected
        assert con.execute(
            f"SELECT run_id, {NEW_COLUMNS} FROM eval_runs ORDER BY run_id"
        ).fetchall() == [(run, "default", None) for run in RUNS]
        assert con.execute("SELECT version, description FROM schema_version").fetchall() == [
            (schema.SCHEMA_VERSION, schema.SCHEMA_DESCRIPTION)
        ]
        assert [r[0] for r in con.execute("SELECT run_id FROM v_runs ORDER BY 1").fetchall()] == (
            list(RUNS)
        )
        ingested = con.execute("SELECT run_id FROM eval_runs WHERE file_sha256 IS NOT NULL")
        assert {r[0] for r in ingested.fetchall()} >= set(RUNS) - {FILE_ONLY_IN_HISTORY}
        assert con.execute("SELECT n FROM v_judge_agreement").fetchall()  # the labels count
    again = cli("history", "sync", str(RESULTS), "--db", str(db))
    assert again.returncode == 0 and "synced 0 run(s); 3 already in the history" in said(again)


def test_rebuild_carries_each_failed_cell_with_its_configuration(tmp_path: Path) -> None:
    """A failed run of two cells in a history of this schema: two rows, each naming its
    configuration, and a rebuild carries them as they were."""
    db = tmp_path / "history.duckdb"
    record_failed_run(
        db, dagster_run_id="d-1", job_name="Geo_agent_eval", agent_slug="geo-agent",
        cells=[FailedCell("v1", "v1", "mini"), FailedCell("v1", "v1", "large")],
        trigger="backfill", failed_at=datetime(2026, 1, 8), error="e",
    )  # fmt: skip
    select = f"SELECT dagster_run_id, {NEW_FAILED_COLUMNS}, partition_key FROM failed_runs"
    expected = [("d-1", "geo-agent", "v1", m, "v1") for m in ("large", "mini")]
    with store.reader(db) as con:
        assert con.execute(f"{select} ORDER BY ALL").fetchall() == expected
    (tmp_path / "results").mkdir()
    done = cli("history", "rebuild", "--db", str(db), str(tmp_path / "results"))
    assert done.returncode == 0, done.stderr
    assert "2 failed_runs" in said(done)
    with store.reader(db) as con:
        assert con.execute(f"{select} ORDER BY ALL").fetchall() == expected


def test_rebuild_finds_the_projects_results_folders(tmp_path: Path) -> None:
    project = make_project(tmp_path, "http://127.0.0.1:9/v1")
    before_file(project.history_db.parent, project.history_db.name)
    shutil.copytree(RESULTS, tmp_path / "agents" / "geo" / "results" / "alpha")
    done = cli("history", "rebuild", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "3 run(s) from 1 results folder(s)" in said(done)
    with store.reader(project.history_db) as con:
        assert con.execute("SELECT count(*) FROM eval_runs").fetchall() == [(len(RUNS),)]


def disk_full(*_: object) -> None:
    raise OSError(28, "No space left on device")


def test_a_failed_rebuild_leaves_the_old_file_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = before_file(tmp_path)
    was = digest(db)
    monkeypatch.setattr(rebuild_module, "_carry_history_only", disk_full)
    assert main(["history", "rebuild", "--db", str(db), str(RESULTS)]) == 3
    assert "No space left" in capsys.readouterr().err
    assert digest(db) == was and [p.name for p in tmp_path.iterdir()] == ["history.duckdb"]


def test_a_failed_rebuild_puts_the_old_lake_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = before_lake(tmp_path)
    folder = tmp_path / "lake"
    was = {p.relative_to(folder): digest(p) for p in folder.rglob("*") if p.is_file()}
    monkeypatch.setattr(rebuild_module, "_carry_history_only", disk_full)
    assert main(["history", "rebuild", "--lake", lake.url, str(RESULTS)]) == 3
    assert "No space left" in capsys.readouterr().err
    assert {p.relative_to(folder): digest(p) for p in folder.rglob("*") if p.is_file()} == was


def test_rebuild_on_a_lake_moves_it_aside_and_carries_over(tmp_path: Path) -> None:
    lake = before_lake(tmp_path)
    with lake.connect_as_written() as old:
        expected = rows_of(old)
    refused(cli("history", "runs", "--lake", lake.url), lake.url)
    done = cli("history", "rebuild", "--lake", lake.url, str(RESULTS))
    assert done.returncode == 0, done.stderr
    assert "1 run(s) with no EvalRun file" in said(done)
    folder = tmp_path / "lake"
    asides = sorted(p.name for p in folder.iterdir() if ".before-rebuild-" in p.name)
    assert [name.split(".before-rebuild-")[0] for name in asides] == ["catalog.ducklake", "data"]
    with store.reader(lake) as con:
        assert rows_of(con, rebuilt=True) == expected
        assert con.execute(
            f"SELECT run_id, {NEW_COLUMNS} FROM eval_runs ORDER BY run_id"
        ).fetchall() == [(run, "default", None) for run in RUNS]
    moved = DuckLake(lake.url, str(folder / asides[0]), f"{folder / asides[1]}/")
    with moved.connect_as_written() as old:  # the old lake is whole, beside the new one
        assert rows_of(old) == expected
        assert old.execute("SELECT max(version) FROM schema_version").fetchall() == [(13,)]
