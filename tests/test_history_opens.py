"""A step of several prompt versions (a single-run backfill, docs/scale-out.md) opens the
history once, whatever the number of versions: ``eval_history`` writes every version on one
writer connection (one transaction per run) and asks its checks there; ``processed_files``
reads every version's estimate on one reader. Counted on the real store, on the DuckDB file
(every ``duckdb.connect`` of the file) and on a DuckLake (every ``DuckLake.connect``), by the
step that opened it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest

from holodeck_core.config.project import Project
from holodeck_core.engine.record import recording
from holodeck_core.errors import ConfigError
from holodeck_core.history import schema, store
from holodeck_core.history.backend import resolve_history
from holodeck_core.history.ducklake import DuckLake
from holodeck_core.testing import run_model_server
from holodeck_pipelines.builder import build_definitions
from tests.dagster_helpers import (
    check_evaluations,
    materialize,
    materialize_range,
    range_tags,
    register,
)
from tests.history_helpers import make_run
from tests.test_pipelines import RULES, make_project
from tests.test_single_run_backfill import ASSETS

VERSIONS = ("v1", "v2", "v3")
CELLS = tuple(f"default|{v}" for v in VERSIONS)
STEPS = frozenset(ASSETS)
ROOT_ENV = "HOLODECK_TEST_PROJECT_ROOT"


def opening_step() -> str:
    """The asset whose step is running (its function's frame on the stack), or ``other``."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name in STEPS and frame.f_code.co_filename.endswith(
            "holodeck_pipelines/assets.py"
        ):
            return frame.f_code.co_name
        frame = frame.f_back  # type: ignore[assignment]
    return "other"


def count_opens(monkeypatch: pytest.MonkeyPatch, history: store.History) -> Counter[str]:
    """Every open of ``history`` from now on, by step: the real connection is made and
    returned, only counted."""
    opens: Counter[str] = Counter()
    if isinstance(history, DuckLake):
        connect = DuckLake.connect

        def lake_connect(
            self: DuckLake, **kwargs: Any
        ) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
            opens[opening_step()] += 1
            return connect(self, **kwargs)

        monkeypatch.setattr(DuckLake, "connect", lake_connect)
        return opens
    real = duckdb.connect
    target = history.resolve()

    def file_connect(database: Any = ":memory:", *args: Any, **kwargs: Any) -> Any:
        if str(database) != ":memory:" and Path(str(database)).resolve() == target:
            opens[opening_step()] += 1
        return real(database, *args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", file_connect)
    return opens


@pytest.fixture(params=["duckdb", "ducklake"])
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "ducklake":
        monkeypatch.setenv("HOLODECK_HISTORY_URL", f"ducklake:{tmp_path / 'catalog.ducklake'}")
    return str(request.param)


def test_a_backfill_step_opens_the_history_once_for_all_its_versions(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path / "project", server.openai_base_url, extra_versions=1)
        defs = build_definitions(project)
        assert register(defs, instance) == list(VERSIONS)
        history = resolve_history(project)
        assert isinstance(history, DuckLake) == (backend == "ducklake")
        assert materialize(defs, instance, "v1").success  # the history exists, v1 recorded
        with monkeypatch.context() as patched:
            opens = count_opens(patched, history)
            result = materialize_range(defs, instance, range_tags("default|v1", "default|v3"))
        newly = {
            e.partition: e.materialization.metadata["newly_ingested"].value
            for e in result.get_asset_materialization_events()
            if e.asset_key.path[-1] == "eval_history"
        }
        checked = Counter(data.partition for data in check_evaluations(result))
        with store.reader(history) as con:
            recorded = con.execute(
                "SELECT partition_key, count(*) FROM eval_runs GROUP BY 1 ORDER BY 1"
            ).fetchall()
    assert result.success
    # once per step, not once per version: the estimates on one reader, the three writes and
    # their checks on one writer; the agent, metric and report steps never open it
    assert opens == {"processed_files": 1, "eval_history": 1}
    assert newly == {f"default|{v}": True for v in VERSIONS}
    # every check that can be evaluated, per version: v1's earlier run makes its no_regression
    # one; v2 and v3 have no previous run (skipped) but are compared with the baseline cell
    # (v1's, itself skipped), and no labels or control rows
    assert checked == {"default|v1": 3, "default|v2": 3, "default|v3": 3}
    assert recorded == [("v1", 2), ("v2", 1), ("v3", 1)]


def test_a_failing_write_rolls_back_its_run_alone(tmp_path: Path) -> None:
    """One connection, one transaction per run: the third version's run holds a value the
    schema refuses (a retry count beyond INTEGER); its write fails and rolls back, leaving the
    two written before it committed and whole, and nothing of its own in any table."""
    runs = {
        f"v{i}": make_run("PPFP", datetime(2026, 3, i, tzinfo=UTC), run_id=f"run-{i}")
        for i in (1, 2, 3)
    }
    runs["v3"].report.results[-1].metric_results[0].retry_count = 2**40
    history = tmp_path / "history.duckdb"
    seen = []
    with (
        pytest.raises(ConfigError, match="run-3: not ingested"),
        recording(history, {key: (run, None) for key, run in runs.items()}) as record,
    ):
        for key in runs:
            with record.run(key) as (written, con):
                seen.append(
                    (key, written, con.execute("SELECT count(*) FROM eval_runs").fetchone())
                )
    assert seen == [("v1", True, (1,)), ("v2", True, (2,))]
    with duckdb.connect(str(history), read_only=True) as con:
        for table in [t for t in schema.TABLES if t != "prompt_versions"]:  # by run
            ids = con.execute(f"SELECT DISTINCT run_id FROM {table} ORDER BY 1").fetchall()
            assert ids in ([], [("run-1",), ("run-2",)]), table
        assert con.execute("SELECT count(*) FROM test_results").fetchone() == (8,)


def geo_job() -> Any:
    """The job of the project at ``$HOLODECK_TEST_PROJECT_ROOT``, for a re-execution (which
    needs a job Dagster can rebuild)."""
    project = Project.discover(Path(os.environ[ROOT_ENV]))
    return build_definitions(project).resolve_job_def("Geo_agent_eval")


def newly_ingested(result: dg.ExecutionResult) -> dict[str | None, Any]:
    return {
        e.partition: e.materialization.metadata["newly_ingested"].value
        for e in result.get_asset_materialization_events()
        if e.asset_key.path[-1] == "eval_history"
    }


def test_a_backfill_whose_history_is_locked_fails_naming_every_version_and_reexecutes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the DuckDB file through the step: the one open fails after the
    lock timeout, naming the three versions and their EvalRuns; re-executed from failure, the
    step alone reruns and records them, and once more records nothing twice."""
    monkeypatch.setenv("HOLODECK_HISTORY_LOCK_TIMEOUT", "1")
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path, server.openai_base_url, extra_versions=1)
        monkeypatch.setenv(ROOT_ENV, str(project.root))
        defs = build_definitions(project)
        register(defs, instance)
        assert materialize(defs, instance, "v1").success  # the history exists
        job = dg.reconstructable(geo_job)
        holder = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
                "print('held', flush=True); sys.stdin.read()",
                str(project.history_db),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            with dg.execute_job(
                job, instance, tags=range_tags("default|v1", "default|v3")
            ) as failed:
                assert not failed.success
                [failure] = [e for e in failed.all_events if e.event_type_value == "STEP_FAILURE"]
        finally:
            holder.communicate(timeout=30)  # closing its stdin lets it exit
        calls = server.stats()["total_calls"]
        options = dg.ReexecutionOptions.from_failure(failed.run_id, instance)
        with dg.execute_job(
            job, instance, tags=range_tags("default|v1", "default|v3"), reexecution_options=options
        ) as first:
            assert first.success
            assert newly_ingested(first) == dict.fromkeys(CELLS, True)
            steps = {e.step_key for e in first.all_events if e.event_type_value == "STEP_SUCCESS"}
        with dg.execute_job(
            job, instance, tags=range_tags("default|v1", "default|v3"), reexecution_options=options
        ) as again:
            assert again.success
            assert newly_ingested(again) == dict.fromkeys(CELLS, False)
        assert server.stats()["total_calls"] == calls  # no model call after the failure
        with store.reader(project.history_db) as con:
            recorded = con.execute(
                "SELECT partition_key, count(*) FROM eval_runs GROUP BY 1 ORDER BY 1"
            ).fetchall()
    assert failure.step_key == "geo_agent__eval_history"
    data = failure.step_failure_data.user_failure_data
    assert data is not None and data.description is not None
    assert data.description.startswith(
        "prompt version v1, v2, v3 x model default: the run history could not be written or read: "
    )
    assert "is locked by" in data.description and "the EvalRuns are safe (" in data.description
    assert steps == {"geo_agent__eval_history"}
    assert recorded == [("v1", 2), ("v2", 1), ("v3", 1)]
