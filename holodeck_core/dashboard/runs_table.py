"""The Summary's runs table (sorted and paged on the server, pass rates as pills, tokens and
cost formatted as the tiles are) and its CSV export (every filtered run, raw numbers)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import flask
from dash import Dash, Input, Output, State, dash_table, dcc, html, no_update

from holodeck_core.dashboard import ui
from holodeck_core.dashboard.data import Filters, PageError, parse_query
from holodeck_core.dashboard.links import compare_href, explorer_href
from holodeck_core.dashboard.summary_data import SummaryData
from holodeck_core.history.csv_cells import csv_text

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]

PAGE_SIZE = 20
"""Rows of the runs table sent to the browser at a time (sorted and paged on the server)."""
COLUMNS = (
    ("finished", "finished"), ("agent_name", "agent"), ("prompt_version", "prompt"),
    ("model_name", "model"), ("trigger", "trigger"), ("model_candidate", "candidate"),
    ("total_tests", "tests"),
    ("passed", "passed"), ("failed", "failed"), ("errored", "errored"),
    ("pass_rate_pct", "pass rate %"), ("total_tokens", "tokens"), ("cost_usd", "cost USD"),
    ("git_commit", "commit"), ("run", "run"),
)  # fmt: skip
SORT_KEYS = {"finished": "finished_at", "pass_rate_pct": "pass_rate", "run": "run_id"}
"""Table columns sorted by another column of the runs frame (the rest by their own)."""
MARKDOWN = {"run", "pass_rate_pct"}
FORMATS = {"total_tokens": {"specifier": ","},
           "cost_usd": {"specifier": "$,.3r", "nully": "unknown"}}  # fmt: skip
"""d3-format specifiers: ``7,066`` and ``$0.000286`` (three significant digits, as
:func:`~holodeck_core.stats.display.money` writes it for the tiles); an unknown cost reads
``unknown``, never a blank or 0."""
PILL_TIERS = ((0.9, "high"), (0.6, "mid"), (0.0, "low"))
"""Pass-rate pills: green from 90%, amber from 60%, red below."""


def pill(rate: float) -> str:
    tier = next(name for floor, name in PILL_TIERS if rate >= floor)
    return f'<span class="pill {tier}">{100 * rate:.1f}%</span>'


def records(runs: pd.DataFrame, *, shown: bool = True) -> list[dict[str, Any]]:
    """Rows of the table (``shown``: pills and links) or of the CSV (plain values)."""
    return [
        {
            "id": row["run_id"], "finished": ui.when(row["finished_at"]),
            "agent_name": row["agent_name"], "prompt_version": row["prompt_version"],
            "model_name": row["model_name"], "model_candidate": row["model_candidate"],
            "trigger": row["trigger"],
            "total_tests": row["total_tests"], "passed": row["passed"], "failed": row["failed"],
            "errored": row["errored"],
            "pass_rate_pct": pill(row["pass_rate"]) if shown else round(100 * row["pass_rate"], 1),
            "total_tokens": row["total_tokens"], "cost_usd": row["cost_usd"],
            "git_commit": (row["git_commit"] or "")[:8],
            "run": f"[{ui.short(row['run_id'])}]({explorer_href(row['run_id'])})" if shown
            else row["run_id"],
        }
        for row in runs.astype(object).where(runs.notna(), None).to_dict("records")
    ]  # fmt: skip


def ordered(runs: pd.DataFrame, sort_by: list[dict[str, str]] | None) -> pd.DataFrame:
    """Runs in the table's order: newest first, or by the clicked column (stable, blanks
    last)."""
    if not sort_by:
        return runs.iloc[::-1]
    column = sort_by[0]["column_id"]
    return runs.sort_values(SORT_KEYS.get(column, column), kind="stable", na_position="last",
                            ascending=sort_by[0].get("direction") != "desc")  # fmt: skip


def table_page(runs: pd.DataFrame, sort_by: list[dict[str, str]] | None, current: int) -> Any:
    start = current * PAGE_SIZE
    return records(ordered(runs, sort_by).iloc[start : start + PAGE_SIZE])


def _column(column: str, name: str) -> dict[str, Any]:
    if column in MARKDOWN:
        return {"id": column, "name": name, "presentation": "markdown"}
    if column in FORMATS:
        return {"id": column, "name": name, "type": "numeric", "format": FORMATS[column]}
    return {"id": column, "name": name}


def runs_table(runs: pd.DataFrame, query: str) -> list[Any]:
    return [
        html.H3("Runs"),
        html.Button("Compare selected runs (2-3)", id="compare-selected", disabled=True),
        dcc.Store(id="runs-chosen", data=[]),  # ticked runs on every page of the table
        html.A(html.Button("Export"), href=f"/runs.csv{query}", download="runs.csv",
               className="export"),
        dash_table.DataTable(  # type: ignore[attr-defined]
            id="runs-table", data=table_page(runs, None, 0), page_size=PAGE_SIZE,
            page_action="custom", page_current=0,
            page_count=max(1, math.ceil(len(runs) / PAGE_SIZE)), sort_action="custom",
            sort_by=[], row_selectable="multi", columns=[_column(c, n) for c, n in COLUMNS],
            style_cell={"fontSize": "0.8rem", "padding": "4px"},
            markdown_options={"link_target": "_self", "html": True},
        ),
    ]  # fmt: skip


def runs_csv(filtered: Callable[[Filters], SummaryData], search: str) -> flask.Response:
    """Every filtered run (not one page of the table) as CSV, newest first."""
    try:
        runs = filtered(Filters.from_query(parse_query(search))).runs
    except PageError as exc:
        return flask.Response(f"{exc.title}: {exc.message}\n", status=400, mimetype="text/plain")
    rows = ([record[c] for c, _ in COLUMNS] for record in records(ordered(runs, None), shown=False))
    return flask.Response(
        csv_text([name for _, name in COLUMNS], rows),
        mimetype="text/csv",
        headers={"Content-Disposition": "attachment; filename=runs.csv"},
    )


def register(app: Dash, filtered: Callable[[Filters], SummaryData]) -> None:
    app.server.add_url_rule(
        "/runs.csv", "runs_csv", lambda: runs_csv(filtered, flask.request.query_string.decode())
    )

    @app.callback(
        Output("runs-table", "data"),
        Output("runs-table", "selected_rows"),
        Input("runs-table", "page_current"),
        Input("runs-table", "sort_by"),
        State("runs-chosen", "data"),
        State("summary-state", "data"),
        prevent_initial_call=True,
    )
    def _table(
        current: int | None, sort_by: list[dict[str, str]] | None,
        chosen: list[str] | None, shown: str | None,
    ) -> Any:  # fmt: skip
        runs = filtered(Filters.parse(parse_query(shown))[0]).runs
        page = table_page(runs, sort_by, current or 0)
        return page, [i for i, r in enumerate(page) if r["id"] in (chosen or [])]

    @app.callback(
        Output("runs-chosen", "data"),
        Output("compare-selected", "disabled"),
        Input("runs-table", "selected_rows"),
        State("runs-table", "data"),
        State("runs-chosen", "data"),
        prevent_initial_call=True,
    )
    def _choose(ticked: list[int] | None, shown: list[dict[str, Any]], chosen: list[str]) -> Any:
        """The table knows the ticks of its current page only; the other pages' are kept."""
        on_page = [row["id"] for row in shown or []]
        kept = [r for r in chosen or [] if r not in on_page]
        now = kept + [on_page[i] for i in ticked or [] if i < len(on_page)]
        return now, not 2 <= len(now) <= 3  # the button waits for the ticks to be counted

    @app.callback(
        Output("url", "href", allow_duplicate=True),
        Input("compare-selected", "n_clicks"),
        State("runs-chosen", "data"),
        prevent_initial_call=True,
    )
    def _compare(_: int | None, selected: list[str] | None) -> Any:
        chosen = list(selected or [])
        if not 2 <= len(chosen) <= 3:
            return no_update
        return compare_href(chosen)
