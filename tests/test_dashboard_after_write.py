"""The Summary after a run is written to the history an open dashboard shows (docs/dashboard.md):
the next request shows the new run, with the tiles, intervals and regression marks a cold
computation gives, on the DuckDB file and on a DuckLake (its catalog a local file); a page kept for
the history before the write is never served after it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.dashboard import app as dashboard_app
from holodeck_core.dashboard import cache, summary_data
from holodeck_core.dashboard.data import Filters
from holodeck_core.history.ducklake import DuckLake
from holodeck_core.history.store import History
from tests.history_helpers import ingest_runs, make_agent, make_run
from tests.test_summary_scale import CASES, seeded_history

RUNS_PER_AGENT = 12
CHARTED = 5
"""Runs an agent the charts draw here: the new run moves the window."""


@pytest.fixture(params=["file", "lake"])
def history(request: pytest.FixtureRequest, tmp_path: Path) -> History:
    if request.param == "file":
        return tmp_path / "history.duckdb"
    return DuckLake.parse(str(tmp_path / "lake"))


def newest(history: History, agent: str) -> Any:
    """The agent's newest run (a row of the Summary's runs)."""
    found = summary_data.summary(history, Filters())
    return found.runs[found.runs["agent_name"] == agent].iloc[-1]


def a_regression(history: History) -> str:
    """Alpha's next nightly run, on the UTC day of its last one (their tick's family grows),
    failing nearly every case its predecessor of the same prompt version passed."""
    last = newest(history, "alpha")
    run = make_run(
        "P" + "F" * (len(CASES) - 1), last["finished_at"].to_pydatetime() + timedelta(hours=1),
        run_id="alpha-new", agent=make_agent("alpha", cases=CASES), cases=CASES,
        prompt=last["prompt_version"], trigger="nightly",
    )  # fmt: skip
    assert ingest_runs(history, [run]).ingested
    return "alpha-new"


def cold(history: History, search: str = "") -> str:
    """The page computed from nothing kept."""
    cache.clear()
    return str(dashboard_app.render(history, "/", search))


def test_the_summary_after_a_write_is_the_cold_summary_with_the_new_run(
    history: History, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(summary_data, "CHART_RUNS", CHARTED)
    seeded_history(history, RUNS_PER_AGENT)
    client = dashboard_app.create_app(history).server.test_client()
    before = str(dashboard_app.render(history, "/", ""))
    before_filtered = str(dashboard_app.render(history, "/", "?agent=alpha"))
    listed = len(summary_data.summary(history, Filters()).runs)  # infrastructure failures out
    assert client.get("/runs.csv").get_data(as_text=True).count("\n") == 1 + listed
    assert str(dashboard_app.render(history, "/", "")) == before  # unchanged: kept

    new = a_regression(history)
    after = str(dashboard_app.render(history, "/", ""))
    after_filtered = str(dashboard_app.render(history, "/", "?agent=alpha"))
    csv = client.get("/runs.csv").get_data(as_text=True)
    assert new in after and new not in before and new in after_filtered
    assert csv.count("\n") == 1 + listed + 1 and new in csv
    assert after == cold(history) and after_filtered == cold(history, "?agent=alpha")
    assert before_filtered != after_filtered

    # what the page drew from: the new run charted with its interval and regression mark, the
    # window moved past alpha's oldest charted run, as a computation from nothing gives them
    found = summary_data.summary(history, Filters())
    charted = found.charted
    assert new in found.regressions and new in set(charted["run_id"])
    alpha = charted[charted["agent_name"] == "alpha"]
    assert len(alpha) == CHARTED and alpha["run_id"].iloc[-1] == new
    row = alpha.iloc[-1]
    assert row["passed"] == 1 and row["ci_low"] < 1 / len(CASES) < row["ci_high"]


def test_a_page_kept_before_a_write_is_not_served_after_it(
    history: History, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a local lake's catalog file is stamped as a DuckDB file is: no time decides what is kept
    monkeypatch.setattr(cache, "LAKE_STAMP_S", 3600.0)
    seeded_history(history, RUNS_PER_AGENT)
    pages = [str(dashboard_app.render(history, "/", ""))]
    for i in range(3):  # writes one after another, each page read between them
        run = make_run("P" * len(CASES), newest(history, "beta")["finished_at"].to_pydatetime()
                       + timedelta(minutes=1), run_id=f"beta-next-{i}",
                       agent=make_agent("beta", cases=CASES), cases=CASES)  # fmt: skip
        ingest_runs(history, [run])
        pages.append(str(dashboard_app.render(history, "/", "")))
        assert f"beta-next-{i}" in pages[-1] and pages[-1] == cold(history)
    assert len(set(pages)) == len(pages)
