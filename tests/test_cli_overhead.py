"""The CLI's fixed cost (docs/architecture.md): a small run loads only what it uses, and a run's
history rows reach DuckDB the same whichever way they are inserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from holodeck_core.history import schema, store, tabular
from holodeck_core.history.ingest import ingest_run, prepare_run
from holodeck_core.history.tabular import TableRows
from holodeck_core.models import EvalRun
from holodeck_core.testing import run_model_server
from tests.history_helpers import day, ingest_runs, make_run

RULES: dict[str, Any] = {
    "rules": [
        {"match": {"user": "capital of France"}, "reply": "Paris"},
        {"match": {"user": "capital of Italy"}, "reply": "Rome"},
    ]
}

HEAVY = ("pandas", "scipy", "pyarrow")
"""What a one-trial run never needs: pandas and pyarrow only for bulk history writes, scipy
only for t-quantiles over trials."""


def small_agent(folder: Path, base_url: str) -> Path:
    """Two cases, so the run's metric mean gets a t interval."""
    agent = folder / "agent.yaml"
    agent.write_text(
        "name: overhead-test\n"
        f'model: {{provider: openai, name: test-model, endpoint: "{base_url}", '
        "api_key: sk-test-key-1234}\n"
        'instructions: {inline: "Answer."}\n'
        "evaluations: {metrics: [{type: standard, metric: equality}]}\n"
        "test_cases:\n"
        "  - {name: france, input: capital of France?, ground_truth: Paris}\n"
        "  - {name: italy, input: capital of Italy?, ground_truth: Rome}\n"
    )
    return agent


def test_a_small_run_writes_its_history_and_intervals_without_pandas_scipy_or_pyarrow(
    tmp_path: Path,
) -> None:
    code = (
        "import sys; from holodeck_core.cli.main import main; "
        "code = main(['test', sys.argv[1], '-q']); "
        f"print([m for m in {HEAVY!r} if m in sys.modules]); sys.exit(code)"
    )
    with run_model_server(RULES) as server:
        agent = small_agent(tmp_path, server.openai_base_url)
        proc = subprocess.run(
            [sys.executable, "-c", code, str(agent)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"
    db = Path(os.environ["HOLODECK_HOME"]) / "history.duckdb"
    with store.reader(db) as con:
        rows = con.execute(
            "SELECT r.total_tests, r.passed, t.agent_response, m.metric_name, m.passed "
            "FROM eval_runs r JOIN test_results t USING (run_id) "
            "JOIN metric_results m USING (run_id, case_id) ORDER BY t.case_index"
        ).fetchall()
    assert rows == [(2, 2, "Paris", "equality", True), (2, 2, "Rome", "equality", True)]
    [path] = (tmp_path / "results").glob("*/holodeck-pipelines/*.json")
    statistics = EvalRun.model_validate_json(path.read_text()).report.summary.statistics
    assert statistics is not None
    assert statistics.metrics["equality"].method == "wilson_cc_effective_n"


def every_table(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Each history table's rows, without the columns that record when they were written."""
    written_at = {"eval_runs": "ingested_at", "judge_control_scores": "recorded_at"}
    with store.reader(db) as con:
        return {
            table: con.execute(
                f"SELECT * EXCLUDE ({written_at[table]}) FROM {table} ORDER BY ALL"
                if table in written_at
                else f"SELECT * FROM {table} ORDER BY ALL"
            ).fetchall()
            for table in schema.TABLES
        }


def test_parameter_and_arrow_inserts_write_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = [
        make_run("PPFE", day(0), run_id="run-a", tool_error="boom"),
        make_run("PFPP", day(1), run_id="run-b", prompt="v2"),
    ]
    ingest_runs(tmp_path / "params.duckdb", runs)  # two small runs: bound as parameters
    monkeypatch.setattr(tabular, "PARAMETER_INSERT_MAX_VALUES", 0)  # every insert via Arrow
    ingest_runs(tmp_path / "arrow.duckdb", runs)
    for run in runs:  # one run at a time, the CLI's call
        assert ingest_run(tmp_path / "arrow-one.duckdb", run) is True
    params = every_table(tmp_path / "params.duckdb")
    assert params["test_results"] and params["metric_results"] and params["tool_invocations"]
    assert params == every_table(tmp_path / "arrow.duckdb")
    assert params == every_table(tmp_path / "arrow-one.duckdb")


def test_a_runs_rows_fill_every_column_of_the_schema() -> None:
    """A bound-parameter insert would leave a column the rows lack NULL; the Arrow path
    refuses it (TableRows.to_arrow). Both hold only if the rows name every DDL column."""
    prepared = prepare_run(make_run("PPFE", day(0), run_id="run-a"))
    con = duckdb.connect()
    schema.create(con)
    for table in schema.TABLES:
        rows = prepared.tables[table]
        assert isinstance(rows, TableRows)
        if rows.rows:
            ddl = con.execute(f"SELECT name FROM pragma_table_info('{table}')").fetchall()
            assert set(rows.columns) == {name for (name,) in ddl}, table
