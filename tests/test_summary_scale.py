"""The Summary at 10,000 runs (docs/dashboard.md): schema 10's comparison macros give schema 5's
rows, and the charts draw each agent's newest runs with the verdicts, intervals and metric means the
whole history gives them."""

from __future__ import annotations

import math
import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd  # type: ignore[import-untyped]
import pytest

from holodeck_core.dashboard import summary, summary_data
from holodeck_core.dashboard.data import Filters
from holodeck_core.dashboard.stats import INFRASTRUCTURE_ERROR_SHARE
from tests.history_helpers import day, ingest_runs, make_agent, make_run, query

CASES = tuple(f"case-{i:02d}" for i in range(12))

SCHEMA_5 = dict(
    zip(
        ("v_run_comparisons_raw", "v_run_comparisons"),
        duckdb.extract_statements(
            (Path(__file__).parent / "fixtures" / "schema_5_comparisons.sql").read_text()
        ),
        strict=True,
    )
)
"""The SQL of the two views before their macros (tests/fixtures/schema_5_comparisons.sql)."""


def seeded_history(db: Path, runs_per_agent: int = 24) -> None:
    """Two agents, two prompt versions; nightly runs several to a UTC day (ticks of several
    comparisons), manual runs (a tick each), infrastructure failures, and runs that skip a
    case (pairs over the cases both ran)."""
    rng = random.Random(28)
    runs = []
    for agent_name in ("alpha", "beta"):
        agent = make_agent(agent_name, cases=CASES)
        for i in range(runs_per_agent):
            when = day(i // 3, hour=2 + 5 * (i % 3)) + timedelta(minutes=agent_name == "beta")
            cases = CASES if i % 7 else CASES[:-1]
            rate = 0.15 if i % 6 == 3 else 0.9  # some runs drop: regressions to find
            statuses = "".join("P" if rng.random() < rate else "F" for _ in cases)
            if i % 11 == 5:
                statuses = "E" * len(cases)  # an infrastructure failure
            runs.append(make_run(
                statuses, when, run_id=f"{agent_name}-{i:02d}", agent=agent, cases=cases,
                prompt="v1" if i % 4 else "v2", trigger="manual" if i % 5 == 0 else "nightly",
            ))  # fmt: skip
    ingest_runs(db, runs)


def same(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    """Equal rows; floats to 1e-12 (a parallel sum may end in another last digit)."""
    return len(a) == len(b) and all(
        len(x) == len(y)
        and all(
            math.isclose(u, v, rel_tol=1e-12, abs_tol=1e-15)
            if isinstance(u, float) and isinstance(v, float)
            else u == v
            for u, v in zip(x, y, strict=True)
        )
        for x, y in zip(a, b, strict=True)
    )


def test_schema_10s_views_and_macros_give_schema_5s_rows(tmp_path: Path) -> None:
    db = tmp_path / "history.duckdb"
    seeded_history(db)
    con = duckdb.connect(str(db))
    try:
        for view, statement in SCHEMA_5.items():  # schema 5's views beside schema 10's
            old = statement.query.replace(f"VIEW {view} AS", f"VIEW old_{view} AS")
            con.execute(
                old.replace("FROM v_run_comparisons_raw c", "FROM old_v_run_comparisons_raw c")
            )
        order = " ORDER BY head_run_id"
        for view in SCHEMA_5:  # its columns (a configuration's candidate came later)
            old_rows = con.execute(f"SELECT * FROM old_{view}{order}")
            columns = ", ".join(f'"{d[0]}"' for d in old_rows.description)
            old = old_rows.fetchall()
            assert same(con.execute(f"SELECT {columns} FROM {view}{order}").fetchall(), old)
        full = con.execute(f"SELECT * FROM old_v_run_comparisons{order}").fetchall()
        verdicts = {r[-1] for r in full}
        assert len(full) > 30 and {"regression", "no significant change"} <= verdicts
        assert max(r[-3] for r in full) > 1  # a tick of several comparisons (BH over it)
        heads = con.execute("SELECT run_id, finished_at FROM eval_runs ORDER BY 2").fetchall()
        for _, since in [*heads[::5], (None, heads[20][1] + timedelta(hours=3))]:
            bound = since.replace(hour=0, minute=0)  # the UTC day of since: whole ticks
            kept = {run for run, when in heads if when >= bound}
            rows = con.execute(
                f"SELECT {columns} FROM holodeck_run_comparisons(?){order}", [since]
            ).fetchall()
            assert same(rows, [r for r in full if r[3] in kept])
            assert (rows and len(rows) < len(full)) or bound <= heads[0][1]
    finally:
        con.close()


def test_the_charts_draw_each_agents_newest_runs_and_the_table_lists_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "history.duckdb"
    seeded_history(db)
    everything = summary_data.summary(db, Filters())
    monkeypatch.setattr(summary_data, "CHART_RUNS", 5)
    found = summary_data.summary(db, Filters())
    runs, charted = found.runs, found.charted
    assert list(runs["run_id"]) == list(everything.runs["run_id"])  # every run, oldest first
    newest = everything.runs.groupby("agent_name").tail(5)
    assert list(charted["run_id"]) == list(newest["run_id"])
    assert runs[~runs["charted"]]["ci_low"].isna().all()
    columns = ["run_id", "ci_low", "ci_high", "ci_n", "ci_method"]
    assert charted[columns].values.tolist() == newest[columns].values.tolist()
    assert found.regressions == everything.regressions & set(charted["run_id"])
    assert set(found.metrics["run_id"]) == set(charted["run_id"])
    metrics = everything.metrics[everything.metrics["run_id"].isin(charted["run_id"])]
    pd.testing.assert_frame_equal(found.metrics, metrics.reset_index(drop=True))
    # the whole history's regressions among the charted runs: the view says the same
    marked = {r[0] for r in query(db, "SELECT head_run_id FROM v_run_comparisons c JOIN "
                                      "eval_runs e ON e.run_id = c.head_run_id WHERE verdict = "
                                      "'regression' AND e.errored <= ? * e.total_tests",
                                  [INFRASTRUCTURE_ERROR_SHARE])}  # fmt: skip
    assert everything.regressions == marked and everything.regressions

    page = str(summary.page(db, {}))
    assert "each agent's newest 5 runs (10 of " in page and "chart-window" in page
    figure = summary.pass_rate_figure(charted, found.regressions, found.colours)
    lines = [t for t in figure["data"] if "95% CI" not in t["name"] and "mode" in t
             and t["name"].split(" · ")[0] in ("alpha", "beta")]  # fmt: skip
    assert sum(len(t["x"]) for t in lines) == 10
    last_day = str(runs["finished_at"].max().date())  # 3 runs an agent: every one charted
    assert "chart-window" not in str(summary.page(db, {"from": [last_day]}))
