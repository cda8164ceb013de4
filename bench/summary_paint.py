"""The Summary's first paint, two servers alternated, with the browser's own work beside it.

    .venv/bin/python bench/summary_paint.py --db H.duckdb --baseline fccea4f   # before/after
    .venv/bin/python bench/summary_paint.py --db H1.duckdb --against H2.duckdb  # two histories

Each load is a fresh browser context (nothing cached) from navigation to the pass-rate chart
drawn; beside its wall time, the renderer's main-thread work from Chrome's own counters
(CDP ``Performance.getMetrics``: ``TaskDuration``, ``ScriptDuration``). On a loaded machine the
two move together, and their ratio after / before is what holds. Each server reads its own
copy of its history, migrated by its own commit (``dashboard_bench.migrated``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import common  # noqa: E402
from dashboard_bench import VIEWS, checkout, migrated  # noqa: E402
from playwright.sync_api import Browser, sync_playwright  # noqa: E402

from tests.dashboard_harness import launch, running  # noqa: E402

SELECTOR = VIEWS[0][2]


def load(browser: Browser, url: str) -> tuple[float, float, float]:
    """(wall, renderer task, script) seconds of one cold load of ``url``."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cdp.send("Performance.enable")
        start = time.perf_counter()
        page.goto(url)
        page.wait_for_selector(SELECTOR, timeout=180_000)
        wall = time.perf_counter() - start
        found = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        return wall, found["TaskDuration"], found["ScriptDuration"]
    finally:
        context.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="the history (before and after)")
    parser.add_argument("--baseline", metavar="REF", help="before: this commit's dashboard")
    parser.add_argument("--against", type=Path, help="before: this history, this checkout")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    if bool(args.baseline) == bool(args.against):
        parser.error("give --baseline REF or --against HISTORY")
    tmp = Path(tempfile.mkdtemp(prefix="summary-paint-"))
    source = checkout(args.baseline, tmp / "baseline") if args.baseline else None
    sides = {"before": (args.against or args.db, source), "after": (args.db, None)}
    loads: dict[str, list[tuple[float, float, float]]] = {label: [] for label in sides}
    with ExitStack() as stack, sync_playwright() as playwright:
        bases = {
            label: stack.enter_context(running(migrated(db, tmp / label, src),
                stack.enter_context((tmp / f"server-{label}.log").open("w")), source=src))
            for label, (db, src) in sides.items()
        }  # fmt: skip
        browser = launch(playwright)
        for base in bases.values():
            load(browser, base + "/")  # the server's imports and its page cache
        for _ in range(args.repeat):
            for label, base in bases.items():
                loads[label].append(load(browser, base + "/"))
        browser.close()
    average = " ".join(f"{v:.1f}" for v in os.getloadavg())
    print(common.machine_line())
    print(f"summary paint: before {sides['before'][0]} ({args.baseline or 'this checkout'}), "
          f"after {args.db}; load average {average}")  # fmt: skip
    medians = {label: [statistics.median(t[i] for t in rows) for i in range(3)]
               for label, rows in loads.items()}  # fmt: skip
    for label, rows in loads.items():
        wall, task, script = medians[label]
        print(f"{label}: wall {wall:.2f} s, renderer task {task:.2f} s (script {script:.2f} s); "
              "loads " + " ".join(f"{w:.2f}/{t:.2f}" for w, t, _ in rows))  # fmt: skip
    wall = medians["after"][0] / medians["before"][0]
    task = medians["after"][1] / medians["before"][1]
    print(f"RATIOS wall_after_over_before={wall:.2f} renderer_task_after_over_before={task:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
