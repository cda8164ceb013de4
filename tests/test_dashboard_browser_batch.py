"""Batch spend on the dashboard in a real browser (docs/cost.md, Playwright driving Debian's
Chromium): the Summary's cost card says, per configuration, what of its spend batches answered
at the batch prices, and each run's hover says it (or that it had no batches). The history
holds two real CLI runs of one agent against the loopback server: one plain, one with
``--batch on``."""

from __future__ import annotations

from pathlib import Path

import pytest

from holodeck_core.cli.main import main
from holodeck_core.stats.display import money as dollars
from holodeck_core.testing import run_model_server
from tests.dashboard_harness import chromium, need_chromium, new_page, serving
from tests.history_helpers import query
from tests.test_batch_runs import RULES, openai_model, write_agent


def test_the_cost_card_shows_batch_spend_as_such(tmp_path: Path) -> None:
    need_chromium()
    db = tmp_path / "history.duckdb"
    with pytest.MonkeyPatch.context() as patch, run_model_server(RULES) as server:
        patch.setenv("HOLODECK_HOME", str(tmp_path / "home"))
        patch.setenv("HOLODECK_HISTORY_DB", str(db))
        agent = write_agent(tmp_path / "agent", openai_model(server))
        assert main(["test", str(agent), "-q"]) == 0
        assert main(["test", str(agent), "-q", "--batch", "on", "--fresh"]) == 0
    [(plain, _), (batched, batch_usd)] = query(
        db, "SELECT run_id, batch_usd FROM v_cost_by_run ORDER BY finished_at"
    )
    assert batch_usd
    with (
        serving(db, tmp_path / "server.log") as base,
        chromium() as browser,
        new_page(browser) as page,
    ):
        page.goto(base + "/")
        page.wait_for_selector("#cost-card #cost-chart .js-plotly-plot")
        header = page.locator("#cost-by-version thead").inner_text()
        row = page.locator("#cost-by-version tbody tr").inner_text()
        hovers = page.evaluate(
            "() => document.querySelector('#cost-chart .js-plotly-plot').data"
            ".flatMap(t => t.customdata.map(c => [c[2], c[1]]))"
        )
    assert "of it in batches" in header
    assert f"{dollars(batch_usd)} (1 run(s))" in row
    assert dict(hovers) == {plain: "no batches", batched: f"{dollars(batch_usd)} of it in batches"}
