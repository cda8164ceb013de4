"""Shared pieces of the pages: formatting, status badges, notices and the stylesheet."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from dash import dcc, html

from holodeck_core.dashboard.stats import INFRASTRUCTURE_ERROR_SHARE
from holodeck_core.stats.display import money
from holodeck_core.stats.intervals import METHOD_NAMES

CSS = """
body { font-family: system-ui, sans-serif; margin: 0; color: #1f2933; background: #f7f8fa; }
.nav { display: flex; gap: 1.5rem; align-items: center; padding: .6rem 1.2rem;
       background: #1f2933; color: #fff; }
.nav a { color: #cbd2d9; text-decoration: none; font-weight: 600; }
.nav a:hover { color: #fff; }
.nav .db { margin-left: auto; font-size: .8rem; color: #9aa5b1; }
.page { padding: 1rem 1.2rem; }
.filters { display: grid; grid-template-columns: repeat(4, minmax(180px, 1fr)); gap: .6rem;
           margin-bottom: 1rem; }
.filters label { font-size: .75rem; color: #52606d; display: block; }
.kpis { display: flex; gap: .8rem; margin-bottom: 1rem; flex-wrap: wrap; }
.kpi { background: #fff; border: 1px solid #e4e7eb; border-radius: 6px; padding: .6rem 1rem;
       min-width: 150px; }
.kpi .label { font-size: .75rem; color: #52606d; }
.kpi .value { font-size: 1.5rem; font-weight: 700; }
.kpi .sub { font-size: .75rem; color: #7b8794; }
.card { background: #fff; border: 1px solid #e4e7eb; border-radius: 6px; padding: .8rem;
        margin-bottom: 1rem; }
.cols { display: grid; grid-template-columns: 260px 300px 1fr; gap: .8rem; }
.list a { display: block; padding: .3rem .4rem; border-radius: 4px; color: inherit;
          text-decoration: none; font-size: .85rem; }
.list a:hover { background: #eef2f7; }
.list a.current { background: #dbe7ff; font-weight: 600; }
.badge { display: inline-block; padding: 0 .4rem; border-radius: 3px; font-size: .75rem;
         font-weight: 700; color: #fff; margin-right: .3rem; }
.PASS { background: #2f9e44; } .FAIL { background: #e03131; } .ERROR { background: #f08c00; }
.none { background: #adb5bd; }
.bubble { padding: .5rem .7rem; border-radius: 8px; margin: .3rem 0; white-space: pre-wrap; }
.user { background: #e7f0ff; } .agent { background: #f1f3f5; }
.turn { border-left: 3px solid #c1c7d0; padding-left: .6rem; margin-bottom: .8rem; }
pre { background: #f8f9fa; padding: .5rem; overflow-x: auto; font-size: .8rem; margin: .3rem 0; }
table.grid { border-collapse: collapse; font-size: .85rem; }
table.grid td, table.grid th { border: 1px solid #e4e7eb; padding: .25rem .5rem; text-align: left; }
table.grid tr.differs td { background: #fff4e6; }
td.regression { outline: 3px solid #c92a2a; outline-offset: -3px; }
td.fixed::after { content: " fixed"; color: #2f9e44; font-size: .7rem; font-weight: 700; }
.flaky { color: #9c36b5; font-size: .7rem; font-weight: 700; margin-left: .3rem; }
.better { color: #2f9e44; } .worse { color: #c92a2a; }
.notice { max-width: 720px; margin: 3rem auto; background: #fff; border: 1px solid #f0c36d;
          border-radius: 6px; padding: 1rem 1.4rem; }
.muted { color: #7b8794; font-size: .8rem; }
.kpi .delta { font-size: .75rem; color: #7b8794; } .kpi .spark { display: block; margin: .2rem 0; }
#matrix-grid td { vertical-align: top; min-width: 170px; }
#matrix-grid .cell.tie { background: #ebfbee; } .cell-rate { font-size: 1.1rem; }
.kpi-row h4 { margin: .2rem 0 .4rem; } .kpi .prior { font-size: .72rem; color: #52606d; }
.kpi .delta.better { color: #2f9e44; } .kpi .delta.worse { color: #c92a2a; }
.notes { background: #fff4e6; border: 1px solid #f0c36d; border-radius: 6px;
         padding: .5rem 1rem; margin-bottom: 1rem; }
.notes li { margin: .2rem 0; }
.breakdowns { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr));
              gap: .8rem 2rem; }
.metric-row { display: grid; grid-template-columns: 9rem minmax(80px, 1fr) 4.5rem 7.5rem;
              gap: .5rem; align-items: center; font-size: .8rem; margin: .25rem 0; }
.metric-row .bar { position: relative; height: 8px; background: #e9ecef; border-radius: 4px; }
.metric-row .fill { height: 100%; background: #4c6ef5; border-radius: 4px; }
.metric-row .thresh { position: absolute; top: -3px; width: 2px; height: 14px;
                      background: #c92a2a; }
.metric-name { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.metric-value { font-weight: 700; text-align: right; }
.pill { display: inline-block; min-width: 3.6rem; padding: 0 .5rem; border-radius: 999px;
        font-weight: 700; text-align: center; color: #fff; }
.pill.high { background: #2f9e44; } .pill.mid { background: #f08c00; }
.pill.low { background: #e03131; }
.dash-cell .pill p, .dash-cell p { margin: 0; }
"""

INDEX = (
    """<!DOCTYPE html>
<html><head>{%metas%}<title>{%title%}</title>{%favicon%}{%css%}<style>"""
    + CSS
    + """</style>
</head><body>{%app_entry%}<footer>{%config%}{%scripts%}{%renderer%}</footer></body></html>"""
)


def notice(title: str, message: str) -> html.Div:
    return html.Div(
        [html.H2(title), html.P(message), dcc.Link("Back to the Summary", href="/")],
        className="notice",
        id="notice",
    )


def pct(value: Any) -> str:
    return "-" if missing(value) else f"{100 * float(value):.1f}%"


def num(value: Any) -> str:
    return "-" if missing(value) else f"{int(value):,}"


def usd(value: Any) -> str:
    """``$0.00120``, ``$0.000286`` (:func:`~holodeck_core.stats.display.money`); an unknown
    cost (a model without a price) is ``unknown``, never 0."""
    return money(None if missing(value) else float(value))


def usd_change(value: float) -> str:
    """A difference of costs: ``+$0.000286 USD``."""
    return f"{money(value, sign=True)} USD"


def seconds(ms: Any) -> str:
    return "-" if missing(ms) else f"{float(ms) / 1000:,.1f} s"


def score(value: Any) -> str:
    return "-" if missing(value) else f"{float(value):.3g}"


def with_unit(value: Any, unit: str | None) -> str:
    """A score (``0.545``), or a value in its unit (``1,310 ms``, ``$0.0012``)."""
    if missing(value) or not unit:
        return score(value)
    return usd(value) if unit == "USD" else f"{float(value):,.0f} {unit}"


def interval(row: Any, fmt: Any) -> str:
    """``95% CI 0.41-0.79 (n = 12)`` from a row's ``ci_low``, ``ci_high`` and ``ci_n`` (the
    views' numbers); empty without an interval. The method is named once per page
    (:func:`interval_methods`)."""
    low, high = row["ci_low"], row["ci_high"]
    if missing(low) or missing(high):
        return ""
    return f"95% CI {fmt(low)}-{fmt(high)} (n = {int(row['ci_n'])})"


def interval_methods(used: list[tuple[Any, str]], dom_id: str) -> list[html.P]:
    """Once per page: ``Intervals (95%): Wilson … (pass rate, 0-1 scores); Student t … (ms
    and USD)`` from (``ci_method``, what it is used for) pairs; nothing without an interval."""
    kinds: dict[str, list[str]] = {}
    for method, what in used:
        if missing(method):
            continue
        named = kinds.setdefault(METHOD_NAMES.get(str(method), str(method)), [])
        named += [] if what in named else [what]
    if not kinds:
        return []
    methods = "; ".join(f"{name} ({', '.join(what)})" for name, what in kinds.items())
    return [html.P(f"Intervals (95%): {methods}.", className="muted", id=dom_id)]


def infrastructure_failure(run: Any) -> bool:
    total = int(run["total_tests"] or 0)
    return total > 0 and int(run["errored"] or 0) / total > INFRASTRUCTURE_ERROR_SHARE


def tone(change: float, higher_better: bool | None, comparable: bool = True) -> str:
    """``better``/``worse`` for a change, or no colour: nothing changed, no direction, or a
    run that mostly errored (its fewer failures, tokens and cost are no improvement)."""
    if higher_better is None or change == 0 or not comparable:
        return ""
    return "better" if (change > 0) == higher_better else "worse"


def short(run_id: str) -> str:
    return run_id[:12]


def when(value: Any) -> str:
    return "-" if missing(value) else str(value)[:19].replace("T", " ")


def age(value: Any, now: datetime | None = None) -> str:
    """How long ago a (UTC) time was: ``40 s``, ``12 min``, ``2 h``, ``3 d``."""
    if missing(value):
        return "-"
    seen = value.to_pydatetime() if hasattr(value, "to_pydatetime") else value
    now = now or datetime.now(UTC).replace(tzinfo=None)
    seconds = max(0.0, (now - seen.replace(tzinfo=None)).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f} {unit}"
    return f"{seconds:.0f} s"


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def badge(status: str | None) -> html.Span:
    return html.Span(status or "-", className=f"badge {status or 'none'}")


def kpi(label: str, value: str, sub: str = "", kpi_id: str = "") -> html.Div:
    return html.Div(
        [html.Div(label, className="label"), html.Div(value, className="value"),
         html.Div(sub, className="sub")],
        className="kpi",
        id=kpi_id or f"kpi-{label.lower().replace(' ', '-')}",
    )  # fmt: skip


def grid(header: list[Any], body: list[list[Any]], table_id: str = "") -> html.Table:
    children = [html.Thead(html.Tr([html.Th(h) for h in header])),
                html.Tbody([html.Tr([html.Td(c) for c in row]) for row in body])]  # fmt: skip
    if table_id:
        return html.Table(children, className="grid", id=table_id)
    return html.Table(children, className="grid")
