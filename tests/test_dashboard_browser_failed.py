"""The Summary in a real browser (docs/dashboard.md, Playwright driving Debian's Chromium): the
orchestrated runs that failed before writing an EvalRun (``failed_runs``), each with its reason
shown as text (markup, a script, terminal escapes and a formula stay inert), and the interval
methods named once per page, not in every tile and breakdown row."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from holodeck_core.history.failures import FailedCell, record_failed_run
from holodeck_core.stats.intervals import METHOD_NAMES
from tests.dashboard_harness import chromium, need_chromium, serving
from tests.history_helpers import build_history

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

REASONS = {
    "d-outage-0001": "step evaluate failed: model server refused the connection (127.0.0.1:9)",
    "d-markup-0002": "<b id='injected'>bold</b><script>window.pwned = 1</script> **md**",
    "d-escape-0003": "\x1b[31mred\x1b[0m\nsecond line\r\x07 [bold]rich[/bold]",
    "d-formula-004": '=HYPERLINK("http://evil.example", "click")',
    "d-empty-00005": None,
}


def _record(db: Path) -> None:
    for day, (run_id, reason) in enumerate(REASONS.items(), start=10):
        record_failed_run(
            db,
            dagster_run_id=run_id,
            job_name="Support_bot_eval",
            agent_slug="support-bot",
            cells=[FailedCell("v3", "v3", "default")],
            trigger="nightly",
            failed_at=datetime(2026, 6, day, 2, tzinfo=UTC),
            error=reason,
        )


@pytest.fixture(scope="module")
def dbs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A history with runs and failed runs; one with only failed runs."""
    need_chromium()
    root = tmp_path_factory.mktemp("dashboard-failed")
    full, only_failed = root / "history.duckdb", root / "only-failed.duckdb"
    build_history(full)
    _record(full)
    _record(only_failed)
    return full, only_failed


@pytest.fixture(scope="module")
def browser(dbs: tuple[Path, Path]) -> Iterator[Browser]:
    with chromium() as launched:  # after the histories (dashboard_harness.chromium)
        yield launched


@pytest.fixture(scope="module")
def servers(dbs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[
    tuple[str, str]
]:  # fmt: skip
    logs = tmp_path_factory.mktemp("dashboard-failed-log")
    with serving(dbs[0], logs / "full.log") as full, serving(dbs[1], logs / "bare.log") as bare:
        yield full, bare


def test_summary_lists_failed_runs_with_their_reason_as_text(
    page: Page, servers: tuple[str, str]
) -> None:
    page.goto(servers[0] + "/")
    page.wait_for_selector("#failed-runs #failed-runs-table")
    rows = page.locator("#failed-runs-table tbody tr").all_inner_texts()
    assert [r.split("\t")[0] for r in rows] == [run[:12] for run in reversed(REASONS)]
    reasons = page.locator("#failed-runs .failed-reason").all_inner_texts()
    assert reasons[-1] == "step evaluate failed: model server refused the connection (127.0.0.1:9)"
    assert reasons[0] == "no reason recorded"
    # outside text is data: no element, no script, escapes written out, one line
    assert reasons[3] == "<b id='injected'>bold</b><script>window.pwned = 1</script> **md**"
    assert page.locator("#injected").count() == 0
    assert page.evaluate("() => window.pwned") is None
    assert reasons[2] == "\\x1b[31mred\\x1b[0m second line \\x07 [bold]rich[/bold]"
    assert reasons[1] == '=HYPERLINK("http://evil.example", "click")'
    assert all("\x1b" not in r and "\n" not in r for r in rows)
    assert all("\tsupport-bot · v3 · default\t" in r for r in rows)  # its configuration
    # whatever the filters: a filter on an agent still shows them
    page.goto(servers[0] + "/?agent=support-bot&prompt=v1")
    page.wait_for_selector("#failed-runs-table")
    assert page.locator("#failed-runs-table tbody tr").count() == len(REASONS)


def test_a_history_of_only_failed_runs_says_so(page: Page, servers: tuple[str, str]) -> None:
    page.goto(servers[1] + "/")
    page.wait_for_selector("#notice")
    text = page.inner_text("#notice")
    assert "The history is empty" in text
    assert f"{len(REASONS)} orchestrated run(s) failed before writing one" in text
    assert "holodeck history runs --db" in text


def test_interval_methods_are_named_once_per_page(page: Page, servers: tuple[str, str]) -> None:
    page.goto(servers[0] + "/?agent=support-bot")
    page.wait_for_selector("#breakdown .metric-interval")
    text = page.inner_text("#summary-page")
    assert page.locator("#interval-methods").count() == 1
    methods = page.inner_text("#interval-methods")
    assert methods.startswith("Intervals (95%): ")
    assert "Wilson score with continuity correction (pass rate" in methods
    assert "interval method" not in text.lower().replace("intervals (95%)", "")
    for name in set(METHOD_NAMES.values()):
        assert text.count(f"{name} (") <= 1, name
    # the tiles and rows keep their numbers: the interval and its n
    tile = page.inner_text("#kpi-latest-pass-rate")
    assert "95% CI " in tile and "(n = " in tile
    assert page.locator("#breakdown .metric-interval").count() >= 2
    for row in page.locator("#breakdown .metric-interval").all_inner_texts():
        assert row.startswith("95% CI ") and row.endswith(")") and "method" not in row
