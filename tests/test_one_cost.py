"""One run, one cost, everywhere (docs/cost.md, "A run's cost"): a fresh run, a run a budget
stopped, the rerun that resumed it and a rescore of that rerun, each recorded by the real CLI
against the loopback server, show the same cost in the EvalRun file, ``eval_runs``,
``holodeck history runs`` and ``history show`` (table and JSON), the Markdown report, the
dashboard's runs CSV, its Runs table and the Explorer (in Chromium); the rescore's cost is its
judge calls."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from holodeck_core.cli.main import main
from holodeck_core.models import EvalRun
from holodeck_core.reports.markdown import render_markdown
from holodeck_core.stats.display import money
from holodeck_core.testing import run_model_server
from tests.dashboard_harness import chromium, need_chromium, new_page, serving
from tests.history_helpers import query
from tests.test_budget import budget_block
from tests.test_cost import RULES, write_agent

CASES = [f"question {n}" for n in range(8)]
KINDS = ("fresh", "stopped", "resumed", "rescore")


@dataclass(frozen=True)
class Run:
    kind: str
    run: EvalRun
    markdown: str

    @property
    def run_id(self) -> str:
        run_id = self.run.metadata.run_id
        assert run_id, self.kind
        return run_id

    @property
    def cost(self) -> float:
        cost = self.run.report.summary.cost_usd
        assert cost is not None and cost > 0, self.kind
        return cost


def _newest(folder: Path, seen: set[Path]) -> Path:
    [path] = set((folder / "results" / "money").glob("holodeck-pipelines/*.json")) - seen
    seen.add(path)
    return path


def _recorded(kind: str, path: Path, report: Path | None) -> Run:
    run = EvalRun.model_validate_json(path.read_text())
    text = report.read_text() if report else render_markdown(run)
    return Run(kind, run, text)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Run]]:
    root = tmp_path_factory.mktemp("one-cost")
    db = root / "history.duckdb"
    fresh, budget = root / "fresh", root / "budget"
    fresh.mkdir()
    budget.mkdir()
    found: dict[str, Run] = {}
    seen: set[Path] = set()
    with pytest.MonkeyPatch.context() as patch, run_model_server(RULES) as server:
        patch.setenv("HOLODECK_HISTORY_DB", str(db))
        patch.chdir(root)
        url = server.openai_base_url
        patch.setenv("HOLODECK_HOME", str(fresh / "home"))
        agent = write_agent(fresh, url, CASES)
        assert main(["test", str(agent), "-q", "-o", str(root / "fresh.md")]) == 0
        found["fresh"] = _recorded("fresh", _newest(fresh, seen), root / "fresh.md")
        patch.setenv("HOLODECK_HOME", str(budget / "home"))
        agent = write_agent(budget, url, CASES, extra=budget_block(found["fresh"].cost / 2))
        assert main(["test", str(agent), "-q", "-o", str(root / "stopped.md")]) == 3
        found["stopped"] = _recorded("stopped", _newest(budget, seen), root / "stopped.md")
        agent = write_agent(budget, url, CASES, extra=budget_block(found["fresh"].cost * 10))
        assert main(["test", str(agent), "-q", "-o", str(root / "resumed.md")]) == 0
        resumed = _newest(budget, seen)
        found["resumed"] = _recorded("resumed", resumed, root / "resumed.md")
        shutil.rmtree(budget / "home" / "cache")  # the rescore asks its judge again
        assert main(["rescore", str(resumed), "--agent", str(agent)]) in (0, 1)
        found["rescore"] = _recorded("rescore", _newest(budget, seen), None)
    assert found["resumed"].run.report.summary.cost is not None
    assert found["resumed"].run.report.summary.cost.resumed  # it resumed the stopped attempt
    return db, found


def holodeck(*args: str) -> str:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "300"}
    proc = subprocess.run([sys.executable, "-m", "holodeck_core.cli", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_cli_the_report_and_the_history_show_one_cost_per_run(
    history: tuple[Path, dict[str, Run]],
) -> None:
    db, runs = history
    listed = {r["run_id"]: r for r in json.loads(holodeck("history", "runs", "--db", str(db),
                                                          "--format", "json"))}  # fmt: skip
    table = holodeck("history", "runs", "--db", str(db))
    for run in runs.values():
        ((stored,),) = query(db, "SELECT cost_usd FROM eval_runs WHERE run_id = ?", [run.run_id])
        assert stored == pytest.approx(run.cost, rel=1e-9), run.kind
        assert listed[run.run_id]["cost_usd"] == pytest.approx(run.cost, rel=1e-9), run.kind
        [line] = [line for line in table.splitlines() if run.run_id[:12] in line]
        assert money(run.cost) in line, (run.kind, line)
        shown = json.loads(holodeck("history", "show", run.run_id, "--db", str(db),
                                    "--format", "json"))  # fmt: skip
        assert shown["run"]["cost_usd"] == pytest.approx(run.cost, rel=1e-9), run.kind
        assert money(run.cost) in holodeck("history", "show", run.run_id, "--db", str(db))
        assert f"cost: {run.cost:.6f} USD" in run.markdown, run.kind
    assert len({round(r.cost, 12) for r in runs.values()}) == len(runs)  # four distinct costs


def test_a_rescore_costs_its_judge_calls(history: tuple[Path, dict[str, Run]]) -> None:
    db, runs = history
    rescore = runs["rescore"]
    cost = rescore.run.report.summary.cost
    assert cost is not None and set(cost.headings) == {"judge"} and not cost.resumed
    assert cost.headings["judge"].calls >= len(CASES)
    assert cost.headings["judge"].usd == pytest.approx(rescore.cost, rel=1e-9)
    ((judged, headings),) = query(
        db, "SELECT sum(cost_usd), list(DISTINCT heading) FROM call_costs WHERE run_id = ?",
        [rescore.run_id],
    )  # fmt: skip
    assert headings == ["judge"] and judged == pytest.approx(rescore.cost, rel=1e-9)
    assert rescore.cost != pytest.approx(runs["resumed"].cost)  # never the rescored run's


@pytest.fixture(scope="module")
def dashboard(
    history: tuple[Path, dict[str, Run]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    log_path = tmp_path_factory.mktemp("one-cost-log") / "server.log"
    with serving(history[0], log_path) as base:
        yield base


def test_the_dashboard_shows_one_cost_per_run(
    history: tuple[Path, dict[str, Run]], dashboard: str
) -> None:
    need_chromium()
    _, runs = history
    with urllib.request.urlopen(f"{dashboard}/runs.csv?failed=1", timeout=30) as answer:
        lines = answer.read().decode().splitlines()
    header = lines[0].split(",")
    rows = [dict(zip(header, line.split(","), strict=True)) for line in lines[1:]]
    by_id = {row["run"]: row for row in rows}
    with chromium() as browser, new_page(browser) as page:
        page.goto(f"{dashboard}/?failed=1")  # the stopped run mostly ERRORs: kept
        page.wait_for_selector("#runs-table td[data-dash-column=cost_usd]")
        for run in runs.values():
            row = page.locator("#runs-table tr", has_text=run.run_id[:12])
            cell = row.locator("td[data-dash-column=cost_usd]").inner_text()
            assert cell == money(run.cost), (run.kind, cell)
        for run in runs.values():
            assert float(by_id[run.run_id]["cost USD"]) == pytest.approx(run.cost, rel=1e-9)
            page.goto(f"{dashboard}/explorer?run={run.run_id}")
            page.wait_for_selector("#run-cost")
            line = page.inner_text("#run-cost")
            assert line.startswith(f"cost {money(run.cost)} ("), (run.kind, line)
