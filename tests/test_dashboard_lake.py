"""The dashboard on a DuckLake history (docs/scale-out.md: "the dashboard ... work[s]
unchanged on both"), in a real browser: ``holodeck dashboard --lake URL`` over a local
catalog file and data folder shows the same runs, cases and comparison as on the DuckDB file."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from holodeck_core.history.ducklake import DuckLake
from tests.dashboard_harness import chromium, need_chromium, new_page, serving
from tests.history_helpers import HISTORY, build_history

if TYPE_CHECKING:
    from playwright.sync_api import Page


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    need_chromium()
    folder = tmp_path_factory.mktemp("dashboard-lake")
    lake = DuckLake.parse(f"ducklake:{folder / 'catalog.ducklake'}?data={folder / 'data'}")
    build_history(lake)  # type: ignore[arg-type]  # every writer takes a lake as a history
    with serving(lake.url, folder / "server.log", lake=True) as url:
        yield url


@pytest.fixture
def page(base: str) -> Iterator[Page]:
    with chromium() as browser, new_page(browser) as opened:
        yield opened


def test_summary_explorer_and_compare_read_a_lake(page: Page, base: str) -> None:
    page.goto(base + "/")
    page.wait_for_selector("#kpi-runs .value")
    assert page.inner_text("#kpi-runs .value") == str(len(HISTORY))
    assert "support-bot" in page.inner_text("#runs-table")
    page.goto(f"{base}/explorer?run=r5&case=weather-paris")
    page.wait_for_selector(".tool-call")
    assert "holodeck-pipelines 0.1.0" in page.inner_text("#run-summary")
    assert "tool call: get_weather" in page.inner_text(".tool-call summary")
    page.goto(f"{base}/compare?runs=r1,r2")
    page.wait_for_selector("#case-matrix")
    assert page.inner_text("#flip-counts").startswith("0 fixed · 1 regressed")
