"""The dashboard's data layer, statistics, links, CLI wiring and Dagster deep links (no
browser: those are in test_dashboard_browser.py)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.cli.main import build_parser, main
from holodeck_core.dashboard import app as dashboard_app
from holodeck_core.dashboard import compare_data, data, explorer_data, stats, summary_data
from holodeck_core.dashboard.charts import LABEL_ROWS, MAX_MARKERS, change_points, label_rows
from holodeck_core.dashboard.links import compare_href, dashboard_links, explorer_href
from holodeck_core.dashboard.runs_table import PAGE_SIZE, table_page
from holodeck_core.history import store
from tests.history_before import before_file
from tests.history_helpers import (
    HISTORY,
    build_history,
    day,
    ingest_runs,
    make_run,
    query,
    write_run,
)


@pytest.fixture
def history(tmp_path: Path) -> Path:
    db = tmp_path / "history.duckdb"
    build_history(db)
    return db


def test_filters_round_trip_through_the_url() -> None:
    filters = data.Filters(
        agents=["support-bot"], start=date(2026, 5, 1), end=date(2026, 5, 3),
        prompt_versions=["v2", "v3"], triggers=["nightly"], tags=["support"], min_pass_rate=50,
    )  # fmt: skip
    query = filters.to_query()
    assert query.startswith("?agent=support-bot&prompt=v2%2Cv3")
    assert data.Filters.from_query(data.parse_query(query)) == filters
    assert data.Filters().to_query() == ""


@pytest.mark.parametrize(
    ("query", "title"),
    [("min_rate=abc", "pass-rate threshold"), ("min_rate=120", "pass-rate threshold"),
     ("from=2026-13-01", "Bad date")],
)  # fmt: skip
def test_bad_filters_are_page_errors(query: str, title: str) -> None:
    with pytest.raises(data.PageError) as caught:
        data.Filters.from_query(data.parse_query(query))
    assert title in caught.value.title


def test_summary_filters_runs(history: Path) -> None:
    def run_ids(**kwargs: Any) -> list[str]:
        return list(summary_data.summary(history, data.Filters(**kwargs)).runs["run_id"])

    assert run_ids() == [r[0] for r in HISTORY]  # oldest first
    assert run_ids(prompt_versions=["v3"]) == ["r4", "r5"]
    assert run_ids(triggers=["manual"]) == ["r2"]
    assert run_ids(min_pass_rate=75) == ["r1", "r3", "r4"]
    assert run_ids(start=day(1).date(), end=day(2).date()) == ["r3", "r4"]
    assert run_ids(tags=["support"]) == [r[0] for r in HISTORY]
    assert run_ids(tags=["other"]) == []
    result = summary_data.summary(history, data.Filters(prompt_versions=["v3"]))
    assert set(result.metrics["run_id"]) == {"r4", "r5"}
    assert result.options.prompt_versions == ["v2", "v3"]
    assert result.options.tags == ["support"]


def test_change_markers_where_a_configurations_model_changes_then_first_appearances(
    history: Path,
) -> None:
    runs = summary_data.summary(history, data.Filters()).runs
    assert change_points(runs) == []  # a new prompt version is a new series, not a change
    alternating = runs.iloc[[i % len(runs) for i in range(2 * MAX_MARKERS)]].copy()
    alternating[["agent_name", "prompt_version"]] = ["bot", "v1"]
    models = ["a" if i % 2 else "b" for i in range(len(alternating) - 1)] + ["c"]
    alternating["model_name"] = models  # an edited model, back and forth: too many to mark each
    alternating["finished_at"] = range(len(alternating))
    labels = [label for _, label in change_points(alternating)]
    assert labels == ["bot · v1 · default: model a", "bot · v1 · default: model c"]


def test_model_change_labels_close_together_take_rows_apart_and_the_rest_are_left_out() -> None:
    start = datetime(2026, 1, 1)
    marks = [(start + timedelta(seconds=i), f"agent · v{i} · default: model m{i}")
             for i in range(LABEL_ROWS + 1)]  # fmt: skip
    rows = label_rows(marks, start, start + timedelta(hours=1))
    assert rows == [*range(LABEL_ROWS), None]  # a row each, then no room
    assert label_rows(marks[:1], start, start) == [0]


def test_connect_explains_missing_empty_old_and_foreign_files(tmp_path: Path) -> None:
    db = tmp_path / "history.duckdb"

    def title() -> str:
        with pytest.raises(data.PageError) as caught, data.connect(db) as con:
            data.require_runs(con, db)
        return caught.value.title

    assert title() == "No history database"
    con = store.connect_with_retry(db, read_only=False)
    con.execute("CREATE TABLE other (x INTEGER)")
    con.close()
    assert title() == "Not a history database"
    db.unlink()
    before_file(tmp_path)  # an earlier release's history (tests/test_history_rebuild.py)
    assert title() == data.BEFORE_SCHEMA
    db.unlink()
    with store.writer(db):
        pass
    assert title() == "The history is empty"
    con = store.connect_with_retry(db, read_only=False)
    con.execute("INSERT INTO schema_version (version, description) VALUES (99, 'future')")
    con.close()
    assert title() == "Newer history schema"


def test_pages_hold_no_connection_between_requests(history: Path) -> None:
    dashboard_app.render(history, "/", "")
    dashboard_app.render(history, "/explorer", "?run=r5&case=weather-paris")
    dashboard_app.render(history, "/compare", "?runs=r4,r5")
    with store.writer(history, timeout_s=0):  # a writer gets the file at once
        pass


def test_explorer_reads_the_eval_run_file_when_it_is_there(tmp_path: Path) -> None:
    db = tmp_path / "history.duckdb"
    run = make_run("PPFP", day(0), run_id="with-file")
    path = write_run(tmp_path / "results", run)
    from holodeck_core.history.ingest import ingest_run

    assert ingest_run(db, run, source_path=path)
    found = explorer_data.explorer(db, "with-file", "weather-paris")
    assert found.detail is not None and found.detail.result is not None
    assert found.detail.result.test_id == "weather-paris"
    assert found.config["name"] == "support-bot" and found.run_file.problem is None
    path.unlink()
    gone = explorer_data.explorer(db, "with-f", "weather-paris")  # a unique prefix resolves
    assert gone.detail is not None and gone.detail.result is None
    assert gone.run_file.problem and "is gone" in gone.run_file.problem
    assert gone.config == {}


def test_explorer_defaults_to_the_latest_run_and_names_missing_ones(history: Path) -> None:
    assert explorer_data.explorer(history, None, None).run["run_id"] == "r5"
    with pytest.raises(data.PageError, match="not found"):
        explorer_data.explorer(history, "zzzz-missing", None)
    with pytest.raises(data.PageError, match="has no case"):
        explorer_data.explorer(history, "r5", "no-such-case")


def test_compare_matrix_flips_flaky_and_config(history: Path) -> None:
    result = compare_data.compare(history, ["r1", "r3"], None)
    assert [r["run_id"] for r in result.runs] == ["r1", "r3"] and result.baseline == 0
    statuses = {row.case_id: row.statuses for row in result.matrix}
    assert statuses["weather-paris"] == ["FAIL", "ERROR"]
    assert statuses["refund-policy"] == ["PASS", "PASS"]
    # v_flaky_cases: order-status went P, F, P across v2's runs; weather-paris went F, F, E,
    # and an ERROR is no verdict (docs/cli.md): not flaky
    assert {row.case_id for row in result.matrix if row.flaky} == {"order-status"}
    other = result.comparisons[1]
    assert other is not None and other.common_cases == 4
    # Compare's verdict is history compare's: raw and adjusted p over its family
    assert other.paired is not None and other.paired.pass_fraction.discordant == (0, 0)
    assert other.paired.pass_fraction.p_adjusted is not None
    rows = {row.label: row for row in result.config}
    assert not rows["prompt version"].differs and rows["temperature"].values == ["?", "?"]
    across = compare_data.compare(history, ["r3", "r4"], "r4")
    assert across.baseline == 1
    assert {row.label for row in across.config if row.differs} >= {"prompt version", "prompt body"}
    previous = compare_data.compare(history, [], None, previous="r5")
    assert [r["run_id"] for r in previous.runs] == ["r4", "r5"]


@pytest.mark.parametrize(
    ("refs", "baseline", "previous", "title"),
    [(["r1", "r2", "r3", "r4"], None, None, "Too many runs"),
     (["r1", "r2"], "r5", None, "Baseline not among the runs"),
     (["r1", "nope"], None, None, "Run not found"),
     ([], None, "r1", "No previous run")],
)  # fmt: skip
def test_compare_bad_input(
    history: Path, refs: list[str], baseline: str | None, previous: str | None, title: str
) -> None:
    with pytest.raises(data.PageError) as caught:
        compare_data.compare(history, refs, baseline, previous)
    assert caught.value.title == title


def test_compare_with_one_run_returns_only_the_picker(history: Path) -> None:
    result = compare_data.compare(history, ["r1"], None)
    assert result.runs == [] and {r["run_id"] for r in result.picker} == {r[0] for r in HISTORY}


def test_wilson_interval() -> None:
    low, high = stats.wilson(17, 25) or (0.0, 0.0)
    # scipy's binomtest(17, 25).proportion_ci(method="wilsoncc")
    assert low == pytest.approx(0.46450, abs=1e-4) and high == pytest.approx(0.84271, abs=1e-4)
    assert stats.wilson(0, 0) is None


def test_links() -> None:
    assert explorer_href("r1", "case a") == "/explorer?run=r1&case=case+a"
    assert compare_href(["a", "b"]) == "/compare?runs=a%2Cb"
    assert compare_href(["a", "b"], "a") == "/compare?runs=a%2Cb"
    assert (
        compare_href(["a", "b"], "b", base="http://h/") == "http://h/compare?runs=a%2Cb&baseline=b"
    )
    assert dashboard_links("http://127.0.0.1:8501", "r9") == {
        "dashboard_run": "http://127.0.0.1:8501/explorer?run=r9",
        "dashboard_compare_previous": "http://127.0.0.1:8501/compare?previous_of=r9",
    }


def test_report_summary_metadata_links_to_the_dashboard_when_configured() -> None:
    from holodeck_pipelines.metadata import report_metadata

    run = make_run("PPFP", day(0), run_id="r-linked")
    assert "dashboard" not in report_metadata(run, "x.json")
    linked = report_metadata(run, "x.json", "http://dash.local:8501/")["dashboard"].value
    assert "[this run](http://dash.local:8501/explorer?run=r-linked)" in linked
    assert linked.endswith("(http://dash.local:8501/compare?previous_of=r-linked)")


def test_dashboard_command_and_holodeck_alias(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    served: list[dict[str, Any]] = []
    monkeypatch.setattr("dash.Dash.run", lambda self, **kwargs: served.append(kwargs))
    assert main(["test", "view", "--db", str(tmp_path / "h.duckdb"), "--port", "9999"]) == 0
    assert main(["dashboard"]) == 0
    assert served == [
        {"host": "127.0.0.1", "port": 9999, "debug": False},
        {"host": "127.0.0.1", "port": 8501, "debug": False},
    ]
    args = build_parser().parse_args(["dashboard", "examples/acme-support/agent.yaml"])
    assert isinstance(args, argparse.Namespace) and args.agent.endswith("agent.yaml")


def test_help_does_not_import_dash() -> None:
    code = (
        "import sys; from holodeck_core.cli.main import build_parser; build_parser(); "
        "print(sorted(m for m in ('dash', 'plotly', 'duckdb') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_many_runs_summary_is_one_query_per_part(tmp_path: Path) -> None:
    db = tmp_path / "history.duckdb"
    runs = [make_run("PPPF", day(i % 20, 8 + i // 20), run_id=f"m{i:03d}") for i in range(60)]
    assert len(ingest_runs(db, runs).ingested) == 60
    result = summary_data.summary(db, data.Filters())
    assert len(result.runs) == 60 and result.runs["run_id"].is_unique


@pytest.mark.slow
def test_seed_fills_a_history_with_the_examples_two_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from holodeck_core.cli.dashboard import seed_history

    for name in ("HOLODECK_HOME", "HOLODECK_HISTORY_DB", "HOLODECK_MODEL_ENDPOINT"):
        monkeypatch.setenv(name, "")  # seed_history sets them; these restore them afterwards
    db = seed_history(tmp_path)
    assert query(
        db,
        "SELECT prompt_version, passed, total_tests, trigger FROM eval_runs ORDER BY finished_at",
    ) == [("v1", 17, 25, "cli"), ("v2", 25, 25, "cli")]


def test_runs_table_is_sorted_and_paged_on_the_server_and_csv_has_every_run(
    tmp_path: Path,
) -> None:
    db = tmp_path / "history.duckdb"
    runs = [make_run("PPPF" if i % 2 else "PFFF", day(i % 20, 8 + i // 20), run_id=f"m{i:03d}")
            for i in range(45)]  # fmt: skip
    assert len(ingest_runs(db, runs).ingested) == 45
    frame = summary_data.summary(db, data.Filters()).runs
    first = table_page(frame, None, 0)
    assert len(first) == PAGE_SIZE and first[0]["id"] == frame["run_id"].iloc[-1]  # newest
    assert len(table_page(frame, None, 2)) == 45 - 2 * PAGE_SIZE
    lowest = table_page(frame, [{"column_id": "pass_rate_pct", "direction": "asc"}], 0)
    assert {r["pass_rate_pct"] for r in lowest} == {'<span class="pill low">25.0%</span>'}
    client = dashboard_app.create_app(db).server.test_client()
    lines = client.get("/runs.csv").get_data(as_text=True).splitlines()
    assert "pass rate %" in lines[0] and len(lines) == 1 + 45  # every run, not one page
    filtered = client.get("/runs.csv?min_rate=50").get_data(as_text=True).splitlines()
    assert len(filtered) == 1 + 22
    bad = client.get("/runs.csv?min_rate=abc")
    assert bad.status_code == 400 and "pass-rate threshold" in bad.get_data(as_text=True)


def test_a_cached_page_is_redone_once_the_history_changes(tmp_path: Path) -> None:
    db = tmp_path / "history.duckdb"
    ingest_runs(db, [make_run("PPPF", day(1), run_id="c1")])
    before = str(dashboard_app.render(db, "/", ""))
    assert str(dashboard_app.render(db, "/", "")) == before  # same file: same page
    ingest_runs(db, [make_run("PPPP", day(2), run_id="c2")])
    assert "c2" in str(dashboard_app.render(db, "/", "")) and "c2" not in before
