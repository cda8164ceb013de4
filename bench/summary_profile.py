"""Profile the Summary's first request on a large history, server side, in this process.

    .venv/bin/python bench/summary_profile.py --db H.duckdb       # a history of bench runs
    .venv/bin/python bench/summary_profile.py --db H.duckdb --explain   # and EXPLAIN ANALYZE

Each SQL query of the page is timed (the page's own code, its connection wrapped), then the
whole page uncached: the data (``summary``,
``costs``), the component tree, and its JSON as Dash sends it (the payload's size). The
browser's share is ``bench/dashboard_bench.py``'s first paint minus these.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import plotly  # noqa: E402

from holodeck_core.dashboard import cost_data, data, summary, summary_data  # noqa: E402


def timed(what: str, run: Callable[[], Any]) -> Any:
    """``run()``, its wall and CPU seconds printed (CPU: every thread of this process, which
    a loaded machine moves less than the wall)."""
    start, cpu = time.perf_counter(), time.process_time()
    value = run()
    took, used = time.perf_counter() - start, time.process_time() - cpu
    print(f"  {what:<34} {took:7.3f} s  (CPU {used:.3f} s)")
    return value


class Timed:
    """A connection that prints how long each query took (and its plan, ``explain``)."""

    def __init__(self, con: Any, explain: bool) -> None:
        self.con, self.explain = con, explain

    def execute(self, sql: str, params: Any = None) -> Any:
        start = time.perf_counter()
        self.con.execute(sql, params).fetchall()
        took = time.perf_counter() - start
        print(f"  {took:7.3f} s  {' '.join(sql.split())[:110]}")
        if self.explain:
            print(self.con.execute(f"EXPLAIN ANALYZE {sql}", params).fetchall()[0][1])
        return self.con.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


def timing(explain: bool) -> Callable[[Any], Any]:
    @contextmanager
    def connect(db: Any) -> Iterator[Any]:
        with data.connect(db) as con:
            yield Timed(con, explain)

    return connect


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--query", default="", help="the page's query string, e.g. ?prompt=v3")
    parser.add_argument("--explain", action="store_true", help="print EXPLAIN ANALYZE too")
    args = parser.parse_args(argv)
    filters = data.Filters.from_query(data.parse_query(args.query))
    load = " ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"summary profile: {args.db}{args.query} (load average {load})")
    print("SQL, each query of the page (run twice: timed, then for the page):")
    for module in (summary_data, cost_data):
        with mock.patch.object(module, "connect", timing(args.explain)):
            {summary_data: summary_data.summary, cost_data: cost_data.costs}[module](
                args.db, filters
            )
    print("the page, uncached:")
    found = timed("summary() (all its queries)", lambda: summary_data.summary(args.db, filters))
    timed("costs()", lambda: cost_data.costs(args.db, filters))
    tree = timed("page() (its queries included)", lambda: summary.page(args.db, {}))
    body = timed("JSON of the page (Dash's encoder)",
                 lambda: json.dumps(tree, cls=plotly.utils.PlotlyJSONEncoder))  # fmt: skip
    print(f"  payload {len(body) / 1e6:.2f} MB; {len(found.runs)} runs, "
          f"{len(found.metrics)} metric rows")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
