"""The dashboard in a real browser, II (docs/dashboard.md): what a link asks for that does not
exist, the presentation of the Summary, Compare and Explorer, and ``--seed``'s clean-up.

The history holds real CLI runs of the example (v1, v2 and a rescore of v2) and a hand-made
agent whose runs change prompt version at the same moment as the example's (so their labels
would collide), regress significantly (paired), and end in a run whose every case ERRORs.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from holodeck_core.cli.main import main
from holodeck_core.models import EvalRun, ToolInvocation
from holodeck_core.testing import load_rules, run_model_server
from tests.conftest import REPO
from tests.dashboard_harness import chromium, free_port, need_chromium, serving
from tests.history_helpers import ingest_runs, make_run, query

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

EXAMPLE = REPO / "examples" / "acme-support"
CASES = tuple(f"case-{i}" for i in range(8))


@dataclass(frozen=True)
class History:
    db: Path
    v1: str
    v2: str
    rescore: str
    regressed: str
    errored: str
    fine: str


def _bot_runs(at: datetime) -> list[EvalRun]:
    """support-bot: v2 all pass, v2 six cases worse (a paired regression), v3 (with a 0 ms
    tool call) at the moment the example turns to v2, then v3 with every case ERROR (the first
    case without metric results)."""
    runs = [
        make_run("P" * 8, at - timedelta(hours=2), run_id="bot-v2-good", prompt="v2", cases=CASES),
        make_run("FFFFFFPP", at - timedelta(hours=1), run_id="bot-v2-worse", prompt="v2",
                 cases=CASES),
        make_run("P" * 8, at, run_id="bot-v3-fine", prompt="v3", cases=CASES),
        make_run("E" * 8, at + timedelta(minutes=1), run_id="bot-v3-errored", prompt="v3",
                 cases=CASES, cost=0.0),
    ]  # fmt: skip
    errored = runs[-1].report.results
    errored[0] = errored[0].model_copy(update={"metric_results": []})
    fine = runs[2].report.results
    call = ToolInvocation.of("lookup", {"id": 1}, {"ok": True}, duration_ms=0)
    fine[1] = fine[1].model_copy(update={"tool_invocations": [call], "tool_calls": ["lookup"]})
    return runs


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    need_chromium()
    root = tmp_path_factory.mktemp("dashboard-ii")
    agent_dir = root / "acme-support"
    shutil.copytree(EXAMPLE, agent_dir, ignore=shutil.ignore_patterns(".holodeck", "results"))
    db = root / "history.duckdb"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOLODECK_HOME", str(root / "home"))
        patch.setenv("HOLODECK_HISTORY_DB", str(db))
        patch.delenv("HOLODECK_AGENTS", raising=False)
        patch.chdir(root)
        with run_model_server(load_rules(agent_dir / "model-rules.yaml")) as server:
            patch.setenv("HOLODECK_MODEL_ENDPOINT", server.openai_base_url)
            agent = str(agent_dir / "agent.yaml")
            assert main(["test", agent, "-q"]) == 1
            assert main(["test", agent, "-q", "--prompt-version", "v2"]) == 0
            newest = max((agent_dir / "results" / "acme-support").glob("holodeck-pipelines/*.json"),
                         key=lambda p: p.stat().st_mtime_ns)  # fmt: skip
            assert main(["rescore", str(newest)]) == 0
    ids = dict(query(db, "SELECT trigger || '-' || prompt_version, run_id FROM eval_runs"))
    ((v2_at,),) = query(db, "SELECT finished_at FROM eval_runs WHERE run_id = ?", [ids["cli-v2"]])
    assert ingest_runs(db, _bot_runs(v2_at.replace(tzinfo=UTC))).ingested
    return History(db, ids["cli-v1"], ids["cli-v2"], ids["rescore-v2"], "bot-v2-worse",
                   "bot-v3-errored", "bot-v3-fine")  # fmt: skip


@pytest.fixture(scope="module")
def browser(history: History) -> Iterator[Browser]:
    with chromium() as launched:  # after the history (dashboard_harness.chromium)
        yield launched


@pytest.fixture(scope="module")
def base(history: History, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log_path = tmp_path_factory.mktemp("dashboard-ii-log") / "server.log"
    with serving(history.db, log_path) as url:
        yield url


def visit(page: Page, url: str, selector: str) -> None:
    page.goto(url)
    page.wait_for_selector(selector)


# --------------------------------------------------------------------------- item 7


@pytest.mark.parametrize(
    ("link", "note"),
    [("/?prompt=v99", "no run in the history has prompt version 'v99'"),
     ("/?agent=nobody", "no run in the history has agent 'nobody'")],
)  # fmt: skip
def test_an_unknown_filter_value_is_named_and_kept_in_the_link(
    page: Page, base: str, link: str, note: str
) -> None:
    visit(page, base + link, "#filter-notes")
    assert note in page.inner_text("#filter-notes")
    assert "No runs match" in page.inner_text("#summary-page")
    page.wait_for_timeout(1000)  # a dropdown that drops the value rewrites the link after mount
    assert page.url == base + link


def test_a_bad_threshold_is_a_note_on_the_summary_not_an_error_page(page: Page, base: str) -> None:
    visit(page, base + "/?min_rate=abc&failed=1", "#summary-page #filter-notes")
    assert "min_rate='abc' is not a percentage" in page.inner_text("#filter-notes")
    assert page.inner_text("#kpi-runs .value") == "7"  # ignored: all runs, failures too
    visit(page, base + "/?from=yesterday", "#summary-page #filter-notes")
    assert "from='yesterday' is not a date" in page.inner_text("#filter-notes")


def test_from_after_to_says_so_and_draws_no_empty_chart(page: Page, base: str) -> None:
    visit(page, base + "/?from=2026-12-05&to=2026-12-01", "#filter-notes")
    assert "is after to=2026-12-01" in page.inner_text("#filter-notes")
    assert page.locator(".js-plotly-plot").count() == 0


def test_compare_says_why_it_shows_the_picker(page: Page, base: str, history: History) -> None:
    visit(page, f"{base}/compare?runs={history.v1}", "#compare-help")
    assert f"names one run ({history.v1[:12]})" in page.inner_text("#compare-help")
    visit(page, f"{base}/compare?runs={history.v1},{history.v1}", "#compare-help")
    assert f"names run {history.v1[:12]} 2 times" in page.inner_text("#compare-help")


# --------------------------------------------------------------------------- items 8, 8b


def test_pass_rate_chart_series_per_configuration_with_bands_and_regressions(
    page: Page, base: str, history: History
) -> None:
    visit(page, base + "/?failed=1", "#pass-rate-chart .js-plotly-plot .scatterlayer")
    texts = page.locator("#pass-rate-chart .infolayer").text_content() or ""
    assert "prompt v2" not in texts  # a new prompt version is its own series, not a change
    traces = page.evaluate(
        "() => document.querySelector('#pass-rate-chart .js-plotly-plot').data"
        ".map(t => [t.name, t.fill || '', (t.customdata || []).map(c => c[c.length - 1])])"
    )
    assert any(name == "acme-support · v2 · default 95% CI" and fill == "tonexty"
               for name, fill, _ in traces)  # fmt: skip
    assert [ids for name, _, ids in traces if name == "regression"] == [[history.regressed]]
    failures = [ids for name, _, ids in traces if name == "infrastructure failure"]
    assert failures == [[history.errored]]  # not a regression: nothing was evaluated


def test_tiles_have_sparklines_and_a_delta_not_praising_an_all_error_run(
    page: Page, base: str
) -> None:
    visit(page, base + "/?agent=support-bot&failed=1", "#kpi-latest-pass-rate")
    tile = page.locator("#kpi-latest-pass-rate")
    assert "▼ -100.0 pp vs prior" in tile.inner_text()
    assert "95% CI 0.0%-" in tile.inner_text()
    assert "(n = 8)" in tile.inner_text()
    methods = page.inner_text("#interval-methods")  # named once per page
    assert "Wilson score with continuity correction (pass rate" in methods
    assert "worse" in (tile.locator(".delta").get_attribute("class") or "")
    # its configuration's runs (support-bot · v3 · default), not the agent's v2 runs too
    assert page.locator("#kpi-latest-pass-rate-spark").get_attribute("alt") == "2 runs"
    cost = page.locator("#kpi-cost .delta")
    assert cost.inner_text() == "▼ -$0.0100 USD vs prior"  # nothing ran: that is not "better"
    assert (cost.get_attribute("class") or "").split() == ["delta"]


def test_runs_table_pills_and_formats_and_a_rescores_cost(
    page: Page, base: str, history: History
) -> None:
    visit(page, base + "/?agent=acme-support", "#runs-table .pill")
    row = page.locator("#runs-table tr", has_text=history.v1[:12])
    assert row.locator(".pill.low, .pill.mid").inner_text() == "68.0%"
    tokens = row.locator("td[data-dash-column=total_tokens]").inner_text()
    assert "," in tokens and tokens.replace(",", "").isdigit()
    # a rescore's cost is what it paid, its judge calls (docs/cost.md): the same number the
    # history holds for it, unknown only when a judge had no price
    ((cost,),) = query(history.db, "SELECT cost_usd FROM eval_runs WHERE run_id = ?",
                       [history.rescore])  # fmt: skip
    rescored = page.locator("#runs-table tr", has_text=history.rescore[:12])
    shown = rescored.locator("td[data-dash-column=cost_usd]").inner_text()
    assert (shown == "unknown") == (cost is None), (shown, cost)
    if cost is not None:
        assert shown.startswith("$") and float(shown[1:].replace(",", "")) == pytest.approx(
            cost, rel=0.01, abs=0.005
        )


def test_metric_trends_in_tabs_with_thresholds_and_a_breakdown_per_kind(
    page: Page, base: str, history: History
) -> None:
    visit(page, base + "/?agent=support-bot&prompt=v2", "#metric-tabs")
    tabs = page.locator("#metric-tabs .tab").all_inner_texts()
    assert tabs == ["standard · ms", "rag"]
    plot = "#metric-trends .js-plotly-plot"
    page.wait_for_selector(plot)
    assert "threshold 5000 (max)" in (page.locator(plot).text_content() or "")
    page.locator("#metric-tabs .tab", has_text="rag").click()
    page.wait_for_function(
        f"document.querySelector('{plot}').textContent.includes('threshold 0.5')"
    )
    dashes = page.evaluate(f"() => document.querySelector('{plot}').layout.shapes"
                           ".map(s => [s.y0, s.line.dash])")  # fmt: skip
    assert dashes == [[0.5, "dash"]]
    rag = page.inner_text("#breakdown-rag")
    assert "faithfulness" in rag and "0.375" in rag and "2/8 passed" in rag
    # every mean with the views' interval and its n, the methods once per page (docs/cli.md)
    stats = dict(query(history.db, "SELECT metric_name, [n, ci95_low, ci95_high] FROM "
                       "v_metric_stats WHERE run_id = ?", [history.regressed]))  # fmt: skip
    n, low, high = stats["faithfulness"]
    assert f"95% CI {low:.3g}-{high:.3g} (n = {int(n)})" in rag
    units = page.inner_text("#breakdown-standard")
    n, low, high = stats["latency"]
    assert f"95% CI {low:,.0f} ms-{high:,.0f} ms (n = {int(n)})" in units
    methods = page.inner_text("#interval-methods")
    assert "Wilson score with continuity correction on the effective n (0-1 scores)" in methods
    assert "Student t with Hall's skewness correction, at least 0 (ms and USD)" in methods


def test_compare_labels_wall_time_and_does_not_praise_an_all_error_run(
    page: Page, base: str, history: History
) -> None:
    visit(page, f"{base}/compare?runs={history.fine},{history.errored}", "#headline")
    rows = {r.split("\t")[0]: r for r in page.locator("#headline tr").all_inner_texts()}
    assert "wall time (s)" in rows and "sum of case times (s)" in rows
    for label in ("failed", "tokens", "cost", "wall time (s)"):
        cell = page.locator("#headline tr", has_text=label).locator("td").nth(2)
        assert cell.locator(".better").count() == 0, label
    passed = page.locator("#headline tr", has_text="pass rate").locator("td").nth(2)
    assert passed.locator(".worse").count() == 1


def test_explorer_shows_versions_bytes_0ms_calls_and_why_no_metrics(
    page: Page, base: str, history: History
) -> None:
    visit(page, f"{base}/explorer?run={history.errored}&case=case-0", "#case-detail")
    assert "holodeck-pipelines 0.1.0" in page.inner_text("#run-summary")
    assert "the case is ERROR and was not scored" in page.inner_text("#metrics-none")
    visit(page, f"{base}/explorer?run={history.fine}&case=case-1", ".tool-call")
    ((size,),) = query(history.db, "SELECT bytes FROM tool_invocations WHERE run_id = ?",
                       [history.fine])  # fmt: skip
    assert f"tool call: lookup · 0 ms · {size} bytes" in page.inner_text(".tool-call summary")


# --------------------------------------------------------------------------- --seed


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_seed_leaves_no_temporary_folder(tmp_path: Path, stop: signal.Signals) -> None:
    port = free_port()
    env = os.environ | {"TMPDIR": str(tmp_path), "HOLODECK_MODEL_ENDPOINT": ""}
    command = [sys.executable, "-m", "holodeck_core.cli", "dashboard", "--seed", "--port",
               str(port)]  # fmt: skip
    with (tmp_path / "out.log").open("w") as log:
        # as from a terminal: a pytest-xdist worker ignores SIGINT, and a child inherits that
        process = subprocess.Popen(command, env=env, stdout=log, stderr=log, cwd=tmp_path,
                                   preexec_fn=_default_sigint)  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_dash-layout", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        seeded = list(tmp_path.glob("holodeck-dashboard-seed-*"))
        assert len(seeded) == 1 and (seeded[0] / "history.duckdb").is_file()
        process.send_signal(stop)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert list(tmp_path.glob("holodeck-dashboard-seed-*")) == []
