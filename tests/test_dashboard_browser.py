"""The dashboard in a real browser (Playwright driving Debian's Chromium).

The history is built from real runs: ``holodeck demo`` (Dagster, prompt v1 then v2) on a copy
of the project, one CLI run, and HoloDeck 0.7.1 files imported from the corpus. The dashboard
is the real ``holodeck dashboard`` command in a child process; each test reads what a person
would read on the page.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from holodeck_core.cli.main import main
from holodeck_core.dashboard import scripts
from holodeck_core.history import store
from holodeck_core.history.ingest import ingest_paths, ingest_run
from holodeck_core.history.queries import compare_runs
from holodeck_core.testing import load_rules, run_model_server
from tests.conftest import REPO
from tests.dashboard_harness import chromium, need_chromium, serving
from tests.history_before import before_file
from tests.history_helpers import GENERATED, ingest_runs, make_run, query

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

EXAMPLE = REPO / "examples" / "acme-support"
V2_FIXED = {
    "cancel-conversation", "return-window", "refund-timing", "shipping-cost", "price-match",
    "support-hours", "club-discount", "free-shipping-export",
}  # fmt: skip


def test_browser_tests_fail_instead_of_skipping_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="cannot skip under CI=true"):
        need_chromium(Path("/nonexistent/chromium"))
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="no Chromium"):
        need_chromium(Path("/nonexistent/chromium"))


@dataclass(frozen=True)
class History:
    root: Path
    db: Path
    v1: str
    v2: str
    imported: int
    """HoloDeck's own runs from the corpus beside the checkout (0 where it is absent)."""


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    need_chromium()
    from holodeck_pipelines.demo import run_demo

    root = tmp_path_factory.mktemp("dashboard-project")
    for name in ("holodeck.yaml", "dagster.yaml"):
        shutil.copy(REPO / name, root / name)
    agent_dir = root / "examples" / "acme-support"
    shutil.copytree(EXAMPLE, agent_dir, ignore=shutil.ignore_patterns(".holodeck", "results"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOLODECK_HOME", str(root / ".holodeck"))
        patch.setenv("DAGSTER_HOME", str(root))
        patch.setenv("HOLODECK_MODEL_ENDPOINT", "")
        for name in ("HOLODECK_HISTORY_DB", "HOLODECK_AGENTS", "OPENAI_API_KEY"):
            patch.delenv(name, raising=False)
        patch.chdir(root)
        assert run_demo(root) == 0
        with run_model_server(load_rules(agent_dir / "model-rules.yaml")) as server:
            patch.setenv("HOLODECK_MODEL_ENDPOINT", server.openai_base_url)
            assert (
                main(["test", str(agent_dir / "agent.yaml"), "-q", "--prompt-version", "v2"]) == 0
            )
    db = root / ".holodeck" / "history.duckdb"
    imported = len(ingest_paths(db, [GENERATED]).ingested) if GENERATED.is_dir() else 0
    assert imported or not GENERATED.is_dir()
    ((v1,),) = query(
        db,
        "SELECT run_id FROM eval_runs WHERE trigger = 'manual' AND prompt_version = 'v1' "
        "AND model_candidate = 'mini' ORDER BY finished_at DESC LIMIT 1",  # the demo's matrix
    )
    ((v2,),) = query(
        db,
        "SELECT run_id FROM eval_runs WHERE trigger = 'manual' AND prompt_version = 'v2' "
        "AND model_candidate = 'mini' ORDER BY finished_at DESC LIMIT 1",  # the demo's matrix
    )
    return History(root=root, db=db, v1=v1, v2=v2, imported=imported)


@pytest.fixture(scope="module")
def browser(history: History) -> Iterator[Browser]:
    """After the history: Playwright's sync API runs an event loop in this thread, and the
    runs behind the history call asyncio.run."""
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def server(
    history: History, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    log_path = tmp_path_factory.mktemp("dashboard-log") / "server.log"
    with serving(history.db, log_path) as base:
        yield base, log_path


def visit(page: Page, server: tuple[str, Path], path: str, selector: str) -> None:
    page.goto(server[0] + path)
    page.wait_for_selector(selector)


def chart_annotations(page: Page, chart: str) -> list[str]:
    texts = page.evaluate(
        f"() => document.querySelector('#{chart} .js-plotly-plot').layout.annotations"
        ".map(a => a.text)"
    )
    return [str(t) for t in texts]


def test_summary_shows_each_prompt_version_as_its_own_series(
    page: Page, server: tuple[str, Path], history: History
) -> None:
    visit(page, server, "/", "#summary-page #pass-rate-chart .js-plotly-plot")
    # a new prompt version is a new configuration: its own series, not a change in one line
    assert not [a for a in chart_annotations(page, "pass-rate-chart") if "prompt v2" in a]
    series = page.evaluate(
        "() => Object.fromEntries(document.querySelector('#pass-rate-chart .js-plotly-plot')"
        ".data.filter(t => t.name.startsWith('acme-support · ') && t.customdata)"
        ".map(t => [t.name, t.customdata.map(c => c[0])]))"
    )
    # the demo's grid (Dagster) and its matrix (holodeck matrix), then a CLI run of v2 with mini
    assert series == {"acme-support · v1 · mini": ["v1", "v1"],
                      "acme-support · v1 · large": ["v1", "v1"],
                      "acme-support · v2 · mini": ["v2", "v2", "v2"],
                      "acme-support · v2 · large": ["v2", "v2"]}  # fmt: skip
    table = page.inner_text("#runs-table")
    assert "v1" in table and "v2" in table
    assert ("fake-bench-agent" in table) == bool(history.imported)
    runs = 9 + history.imported  # 4 Dagster + 4 matrix + 1 CLI (+ HoloDeck's, 3 in the corpus)
    assert page.inner_text("#kpi-runs .value") == str(runs)
    kinds = page.inner_text("#metric-trends")
    expected = ("standard", "rag", "geval", *(("code",) if history.imported else ()))
    assert all(kind in kinds for kind in expected)
    header = page.locator("#runs-table th", has_text="pass rate %")
    header.locator(".column-header--sort").click()  # ascending
    ((lowest,),) = query(history.db, "SELECT round(100 * min(pass_rate), 1) FROM eval_runs")
    page.wait_for_function(  # the table redrawn in its new order
        "t => document.querySelector('#runs-table td[data-dash-column=pass_rate_pct]')"
        ".innerText === t",
        arg=f"{lowest:.1f}%",
    )
    with page.expect_download() as download:
        page.get_by_role("button", name="Export").click()
    csv = Path(download.value.path()).read_text(encoding="utf-8").splitlines()
    assert csv[0].startswith('"",finished,agent,prompt') or "pass rate %" in csv[0]
    assert len(csv) == 1 + runs and any(",v1," in line for line in csv)


def test_summary_filters_live_in_the_url(
    page: Page, server: tuple[str, Path], history: History
) -> None:
    acme = "SELECT count(*) FROM eval_runs WHERE agent_name = 'acme-support'"
    ((runs,),) = query(history.db, acme)
    ((at_least_90,),) = query(history.db, acme + " AND pass_rate >= 0.9")
    assert 0 < at_least_90 < runs
    visit(page, server, "/", "#summary-page")
    page.click("#f-agent")
    page.keyboard.type("acme-support")
    # Enter picks the highlighted option: wait until the open menu shows it (a busy machine
    # renders the menu after the keystrokes)
    page.get_by_role("option", name="acme-support").wait_for()
    page.keyboard.press("Enter")
    page.wait_for_url("**/?agent=acme-support")
    page.wait_for_function(f"document.querySelector('#kpi-runs .value').innerText === '{runs}'")
    page.fill("#f-min-rate", "90")
    page.keyboard.press("Enter")
    page.wait_for_url("**/?agent=acme-support&min_rate=90")
    page.wait_for_function(
        f"document.querySelector('#kpi-runs .value').innerText === '{at_least_90}'"
    )
    page.reload()  # the link is the whole state
    page.wait_for_selector("#summary-page")
    assert page.inner_text("#kpi-runs .value") == str(at_least_90)
    assert page.inner_text("#f-agent") == "acme-support"
    assert "fake-bench-agent" not in page.inner_text("#runs-table")


TRACES = "#pass-rate-chart .js-plotly-plot .scatterlayer .trace"


def wait_for_a_drawn_trace(page: Page) -> None:
    """Until one of the pass-rate chart's traces has an extent (the first may be a series of
    one point, which draws no line)."""
    page.wait_for_function(
        "s => [...document.querySelectorAll(s)].some(e => e.getBoundingClientRect().width > 0)",
        arg=TRACES,
    )


def test_charts_draw_with_plotly_js_basic_and_the_summary_fetches_each_script_once(
    page: Page, server: tuple[str, Path]
) -> None:
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))
    visit(page, server, "/explorer", "#explorer-page")
    assert not [url for url in fetched if "plotly" in url]  # no chart: not loaded
    page.locator(".nav").get_by_role("link", name="Summary").click()  # a chart mounts
    wait_for_a_drawn_trace(page)
    assert page.evaluate("() => window.Plotly.version") == scripts.VERSION
    assert [url for url in fetched if "plotly" in url] == [server[0] + scripts.URL]
    # the chunks a charted page fetches early are the ones Dash loads for the Summary
    assert {server[0] + chunk for chunk in scripts.CHUNKS} <= set(fetched)
    fetched.clear()
    # ... and there Plotly and the chunks are one request each (a preload that the page
    # cannot reuse, e.g. of another request mode, is fetched a second time)
    fresh = page.context.browser.new_context()  # type: ignore[union-attr]
    try:
        other = fresh.new_page()
        other.on("request", lambda request: fetched.append(request.url))
        visit(other, server, "/", "#runs-table .dash-cell")
        wait_for_a_drawn_trace(other)
        assert other.evaluate("() => window.Plotly.version") == scripts.VERSION
    finally:
        fresh.close()
    js = [url for url in fetched if url.endswith(".js")]
    assert len(js) == len(set(js)) and {server[0] + c for c in scripts.CHUNKS} <= set(js)
    assert [url for url in fetched if "plotly" in url] == [server[0] + scripts.URL]


def test_explorer_shows_a_multi_turn_case_and_a_tool_call(
    page: Page, server: tuple[str, Path], history: History
) -> None:
    visit(page, server, "/", "#runs-table")
    page.get_by_role("link", name=history.v1[:12]).click()
    page.wait_for_selector("#explorer-page")
    page.click("#case-cancel-conversation")
    page.wait_for_selector("#turn-2")
    assert "Hi! What's the status of order A-1002?" in page.inner_text("#turn-0")
    assert "Can I still cancel it before it ships?" in page.inner_text("#turn-1")
    turn3 = page.locator("#turn-2")
    assert "Please cancel order A-1002." in turn3.inner_text()
    turn3.get_by_text("tool call: cancel_order").click()
    call = turn3.locator(".tool-call")
    assert '"order_id": "A-1002"' in call.locator(".tool-args").inner_text()
    assert "cancelled" in call.locator(".tool-result").inner_text()
    assert "Expected tools: matched" in turn3.inner_text()
    metrics = page.inner_text("#metrics-table")
    assert "regex" in metrics and "no match" in metrics  # the failing turn's reason
    page.get_by_text("Config snapshot (redacted)").click()
    snapshot = page.inner_text("#config-snapshot")
    assert "gpt-4o-mini" in snapshot and "sk-offline-demo-key" not in snapshot
    assert "v1" in page.inner_text("#prompt-snapshot")
    page.click("#case-invoice-total")
    page.wait_for_selector("#processed-files")
    assert "invoice-1042.pdf" in page.inner_text("#processed-files")


def test_compare_v1_and_v2_shows_the_eight_cases_v2_fixed(
    page: Page, server: tuple[str, Path], history: History
) -> None:
    visit(page, server, "/?agent=acme-support", "#runs-table")
    for run_id in (history.v1, history.v2):
        row = page.locator("#runs-table tr", has_text=run_id[:12])
        row.locator("input[type=checkbox]").check()
    page.click("#compare-selected")
    page.wait_for_selector("#case-matrix")
    assert page.inner_text("#flip-counts").startswith("8 fixed · 0 regressed")
    fixed = page.locator("#case-matrix tr:has(td.fixed)")
    ids = {(fixed.nth(i).get_attribute("id") or "")[len("row-") :] for i in range(fixed.count())}
    assert ids == V2_FIXED
    # every verdict shows its raw and its adjusted p: the numbers of history compare
    with store.reader(history.db) as con:
        comparison = compare_runs(con, history.v1, history.v2)
    paired = comparison.paired
    assert paired is not None and paired.pass_fraction.p_adjusted is not None
    verdicts = page.inner_text("#paired-stats")
    assert paired.pass_fraction.render() in verdicts and "improvement" in verdicts
    test = {"mcnemar_midp": "McNemar mid-p", "paired_t": "paired t"}[paired.pass_fraction.test]
    assert f"p = {paired.pass_fraction.p_value:.3g} ({test}, n = 25)" in verdicts
    assert f"Benjamini-Hochberg-adjusted p = {paired.pass_fraction.p_adjusted:.3g} over" in verdicts
    assert paired.metrics and all(line in verdicts for line in comparison.paired_metric_lines())
    prompt_row = page.locator("#config-diff tr", has_text="prompt version")
    assert "differs" in (prompt_row.get_attribute("class") or "")
    assert "ACME policy" in page.inner_text(".prompt-diff")
    # the baseline can be switched: v1's fixes become v2's regressions
    compared = f"/compare?runs={history.v1},{history.v2}&baseline={history.v2}"
    visit(page, server, compared, "#case-matrix")
    assert page.locator("#case-matrix td.regression").count() == 8


def test_a_run_written_while_the_dashboard_is_open_appears_on_refresh(
    page: Page, server: tuple[str, Path], history: History
) -> None:
    visit(page, server, "/", "#summary-page")
    before = int(page.inner_text("#kpi-runs .value"))
    ((last,),) = query(history.db, "SELECT max(finished_at) FROM eval_runs")
    run = make_run("PPFP", last + timedelta(hours=1), run_id="written-while-open")
    # lock_timeout=0: the write may not wait at all, so a dashboard holding the file fails it
    assert ingest_run(history.db, run, lock_timeout=0)
    page.reload()
    page.wait_for_selector("#summary-page")
    assert int(page.inner_text("#kpi-runs .value")) == before + 1
    assert "support-bot" in page.inner_text("#runs-table")


@pytest.mark.parametrize(
    ("path", "title"),
    [
        ("/explorer?run=no-such-run", "Run not found"),
        ("/explorer?run={v1}&case=no-such-case", "Case not found"),
        ("/compare?runs=nope1,nope2", "Run not found"),
        ("/compare?runs=a,b,c,d", "Too many runs"),
        ("/nowhere", "Page not found"),
    ],
)
def test_bad_links_show_a_page_that_says_so(
    page: Page, server: tuple[str, Path], history: History, path: str, title: str
) -> None:
    visit(page, server, path.format(v1=history.v1), "#notice")
    log = server[1]
    assert page.inner_text("#notice h2") == title
    assert "Traceback" not in page.content()
    assert "Traceback" not in log.read_text()


def test_missing_empty_and_old_histories_show_their_fix(page: Page, tmp_path: Path) -> None:
    db = tmp_path / "history.duckdb"
    with serving(db, tmp_path / "server.log") as base:

        def notice() -> str:
            page.goto(base + "/")
            page.wait_for_selector("#notice")
            return page.inner_text("#notice")

        assert "No history database" in notice() and str(db) in notice()
        with store.writer(db):
            pass
        assert "The history is empty" in notice()
        db.unlink()
        before_file(db.parent, db.name)  # an earlier release's history
        text = notice()
        assert "History from an earlier release" in text and "holodeck history rebuild" in text
        assert query(db, "SELECT max(version) FROM schema_version") == [(13,)]  # untouched
        db.write_text("not a database")
        assert "Cannot open the history" in notice()


def test_runs_ticked_on_two_pages_of_the_runs_table_are_compared(
    page: Page, tmp_path: Path
) -> None:
    db = tmp_path / "history.duckdb"
    start = datetime(2026, 5, 1, 8, tzinfo=UTC)
    runs = [make_run("PPPF", start + timedelta(hours=i), run_id=f"page-run-{i:02d}")
            for i in range(25)]  # fmt: skip
    assert len(ingest_runs(db, runs).ingested) == 25
    with serving(db, tmp_path / "server.log") as base:
        page.goto(base + "/")
        page.locator("#runs-table tr", has_text="page-run-24").locator("input").check()
        page.locator("#runs-table .next-page").click()  # the server sends the second page
        row = page.locator("#runs-table tr", has_text="page-run-01")
        row.locator("input").check()
        page.click("#compare-selected")
        page.wait_for_selector("#case-matrix")
        assert "page-run-24" in page.url and "page-run-01" in page.url
