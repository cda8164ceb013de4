"""The Summary page: KPI tiles, the pass-rate series per agent with prompt/model change
markers, per-metric trends grouped by kind, filters, and the sortable runs table."""

from __future__ import annotations

import csv
import io
import math
from datetime import date
from typing import TYPE_CHECKING, Any

import flask
from dash import Dash, Input, Output, State, dash_table, dcc, html, no_update

from holodeck_core.dashboard import cache, ui
from holodeck_core.dashboard.data import (
    Filters,
    Options,
    PageError,
    SummaryData,
    parse_query,
    summary,
)
from holodeck_core.dashboard.failures_view import failures_card
from holodeck_core.dashboard.links import compare_href, explorer_href
from holodeck_core.dashboard.stats import wilson
from holodeck_core.history.store import History

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]

MAX_MARKERS = 20
"""Past this many changes in view (A/B runs alternate versions), only each version's first
run is marked."""
LABELLED_POINTS = 30
"""Up to this many runs per agent, each point is labelled with its prompt version."""
MARKED_POINTS = 150
KIND_ORDER = ("standard", "rag", "geval", "code")
MARK_COLOR = "#9c36b5"
FILTER_IDS = ("f-agent", "f-prompt", "f-model", "f-trigger", "f-tag")
PAGE_SIZE = 20
"""Rows of the runs table sent to the browser at a time (sorted and paged on the server)."""


def filtered(db: History, filters: Filters) -> SummaryData:
    """The Summary's data, shared by the page, the table's pages and the CSV export."""
    return cache.cached(db, ("summary", filters.to_query()), lambda: summary(db, filters))


def page(db: History, query: dict[str, list[str]]) -> html.Div:
    filters = Filters.from_query(query)
    data = filtered(db, filters)
    return html.Div(
        [
            html.H2("Summary"),
            _filters(filters, data.options),
            _kpis(data.runs),
            html.Div(dcc.Graph(id="pass-rate-chart", figure=pass_rate_figure(data.runs)),
                     className="card"),
            html.Div(_metric_graphs(data.metrics), className="card", id="metric-trends"),
            html.Div(_runs_table(data.runs, filters.to_query()), className="card"),
            *failures_card(data.failures, filters),
        ],
        className="page",
        id="summary-page",
    )  # fmt: skip


def _dropdown(dom_id: str, label: str, choices: list[str], chosen: list[str]) -> html.Div:
    return html.Div(
        [html.Label(label, htmlFor=dom_id),
         dcc.Dropdown(id=dom_id, options=choices, value=chosen, multi=True,
                      placeholder=f"all {label.lower()}s")]
    )  # fmt: skip


def _filters(filters: Filters, options: Options) -> html.Div:
    return html.Div(
        [
            # what the page shows: a control that mounts with these values changes nothing
            dcc.Store(id="summary-state", data=filters.to_query()),
            _dropdown("f-agent", "Agent", options.agents, filters.agents),
            _dropdown("f-prompt", "Prompt version", options.prompt_versions,
                      filters.prompt_versions),
            _dropdown("f-model", "Model", options.models, filters.models),
            _dropdown("f-trigger", "Trigger", options.triggers, filters.triggers),
            _dropdown("f-tag", "Prompt tag", options.tags, filters.tags),
            html.Div([html.Label("Date range"),
                      dcc.DatePickerRange(id="f-dates", start_date=_iso(filters.start),
                                          end_date=_iso(filters.end),
                                          min_date_allowed=_iso(options.first_day),
                                          max_date_allowed=_iso(options.last_day),
                                          display_format="YYYY-MM-DD", clearable=True)]),
            html.Div([html.Label("Min pass rate (%)", htmlFor="f-min-rate"),
                      dcc.Input(id="f-min-rate", type="number", min=0, max=100, debounce=True,
                                value=filters.min_pass_rate)]),
            html.Div([html.Label("\u00a0"), dcc.Link("Clear filters", href="/")]),
        ],
        className="filters",
    )  # fmt: skip


def _iso(day: date | None) -> str | None:
    return day.isoformat() if day else None


def _kpis(runs: pd.DataFrame) -> html.Div:
    if runs.empty:
        return html.Div(ui.notice("No runs match", "No run matches these filters; clear some."),
                        className="kpis")  # fmt: skip
    latest = runs.iloc[-1]
    interval = wilson(int(latest["passed"]), int(latest["total_tests"]))
    sub = f"95% CI {ui.pct(interval[0])}-{ui.pct(interval[1])}" if interval else ""
    return html.Div(
        [
            ui.kpi("Runs", ui.num(len(runs)), f"{runs['agent_name'].nunique()} agent(s)"),
            ui.kpi("Latest pass rate", ui.pct(latest["pass_rate"]),
                   f"{latest['agent_name']} {latest['prompt_version']} · {sub}"),
            ui.kpi("Errored cases", ui.num(runs["errored"].sum())),
            ui.kpi("Tokens", ui.num(runs["total_tokens"].sum(min_count=1))),
            ui.kpi("Cost", ui.usd(runs["cost_usd"].sum(min_count=1))),
        ],
        className="kpis",
    )  # fmt: skip


def change_points(runs: pd.DataFrame) -> list[tuple[Any, str]]:
    """(x, label) wherever an agent's prompt version or model differs from its previous run;
    past :data:`MAX_MARKERS`, the first run of each new version or model only."""
    changes: list[tuple[Any, str]] = []
    firsts: list[tuple[Any, str]] = []
    several = runs["agent_name"].nunique() > 1
    for agent, group in runs.groupby("agent_name", sort=True):
        previous: tuple[str, str] | None = None
        seen: set[tuple[str, str]] = set()
        for row in group.itertuples():
            current = (str(row.prompt_version), str(row.model_name))
            if previous is not None and current != previous:
                what = (f"prompt {current[0]}" if current[0] != previous[0]
                        else f"model {current[1]}")  # fmt: skip
                label = f"{agent}: {what}" if several else what
                changes.append((row.finished_at, label))
                if current not in seen:
                    firsts.append((row.finished_at, label))
            seen.add(current)
            previous = current
    return changes if len(changes) <= MAX_MARKERS else firsts


Figure = dict[str, Any]
"""A Plotly figure as plain JSON: dcc.Graph takes it as is, and building it skips
``plotly.graph_objects`` validation (most of a page's render time on a large history)."""


def _mode(points: int, *, labelled: bool = False) -> str:
    """Markers (and version labels) while a line has few points; a bare line past that, so
    the browser draws one path instead of one node per run."""
    if labelled and points <= LABELLED_POINTS:
        return "lines+markers+text"
    return "lines+markers" if points <= MARKED_POINTS else "lines"


def _times(column: pd.Series) -> list[str]:
    return [str(t) for t in column]


def pass_rate_figure(runs: pd.DataFrame) -> Figure:
    traces = [
        {
            "type": "scatter", "name": str(agent), "x": _times(group["finished_at"]),
            "y": (group["pass_rate"] * 100).round(2).tolist(),
            "mode": _mode(len(group), labelled=True),
            "text": group["prompt_version"].tolist(), "textposition": "bottom center",
            "customdata": group[["prompt_version", "model_name", "run_id"]].values.tolist(),
            "hovertemplate": "%{x}<br>%{y:.1f}% · prompt %{customdata[0]} · %{customdata[1]}"
            "<br>run %{customdata[2]}<extra>%{fullData.name}</extra>",
        }
        for agent, group in runs.groupby("agent_name", sort=True)
    ]  # fmt: skip
    marks = change_points(runs)
    shapes = [
        {"type": "line", "xref": "x", "yref": "paper", "x0": str(x), "x1": str(x), "y0": 0,
         "y1": 1, "line": {"dash": "dot", "color": MARK_COLOR}}
        for x, _ in marks
    ]  # fmt: skip
    annotations = [
        {"x": str(x), "y": 1.0, "xref": "x", "yref": "paper", "text": label, "showarrow": False,
         "yanchor": "bottom", "font": {"color": MARK_COLOR, "size": 11}}
        for x, label in marks
    ]  # fmt: skip
    layout = {
        "title": {"text": "Pass rate per agent"}, "height": 340, "shapes": shapes,
        "annotations": annotations, "yaxis": {"title": {"text": "pass rate (%)"},
                                              "range": [0, 105]},
        "xaxis": {"type": "date"}, "margin": {"t": 60, "b": 40},
        "legend": {"title": {"text": "agent"}},
    }  # fmt: skip
    return {"data": traces, "layout": layout}


def _metric_graphs(metrics: pd.DataFrame) -> list[Any]:
    if metrics.empty:
        return [html.P("No metric results in these runs.", className="muted")]
    return [html.H3("Metric trends by kind"),
            dcc.Graph(id="metric-chart", figure=metric_figure(metrics))]  # fmt: skip


def metric_figure(metrics: pd.DataFrame) -> Figure:
    """One figure, one panel per kind (and unit) stacked on a shared time axis: one Plotly
    plot for the browser to draw instead of one per kind."""
    metrics = metrics.assign(group=[
        kind if unit is None or unit != unit else f"{kind} · {unit}"
        for kind, unit in zip(metrics["kind"], metrics["unit"], strict=True)
    ])  # fmt: skip
    several = metrics["agent_name"].nunique() > 1
    order = {kind: i for i, kind in enumerate(KIND_ORDER)}
    groups = sorted(metrics["group"].unique(), key=lambda g: (order.get(g.split(" ")[0], 9), g))
    gap = 0.08
    height = (1 - gap * (len(groups) - 1)) / len(groups)
    traces: list[dict[str, Any]] = []
    layout: dict[str, Any] = {"height": 80 + 220 * len(groups), "annotations": [],
                              "margin": {"t": 40, "b": 30}}  # fmt: skip
    for i, group in enumerate(groups):
        axis = "" if i == 0 else str(i + 1)
        part = metrics[metrics["group"] == group]
        traces += [
            {"type": "scatter", "mode": _mode(len(line)), "x": _times(line["finished_at"]),
             "y": [None if v != v else v for v in line["mean"].round(4).tolist()],
             "name": f"{agent} · {name}" if several else str(name),
             "xaxis": f"x{axis}", "yaxis": f"y{axis}"}
            for (agent, name), line in part.groupby(["agent_name", "metric_name"], sort=True)
        ]  # fmt: skip
        top = 1 - i * (height + gap)
        unit = group.split(" · ")[1] if " · " in group else "mean score (0-1)"
        layout[f"yaxis{axis}"] = {"title": {"text": unit}, "domain": [top - height, top],
                                  "anchor": f"x{axis}"} | (
            {} if " · " in group else {"range": [-0.02, 1.05]})  # fmt: skip
        layout[f"xaxis{axis}"] = {"type": "date", "anchor": f"y{axis}"} | (
            {"matches": "x"} if axis else {})  # fmt: skip
        layout["annotations"].append(
            {"text": f"<b>{group}</b>", "x": 0, "y": top, "xref": "paper", "yref": "paper",
             "xanchor": "left", "yanchor": "bottom", "showarrow": False}
        )  # fmt: skip
    return {"data": traces, "layout": layout}


COLUMNS = (
    ("finished", "finished"), ("agent_name", "agent"), ("prompt_version", "prompt"),
    ("model_name", "model"), ("trigger", "trigger"), ("total_tests", "tests"),
    ("passed", "passed"), ("failed", "failed"), ("errored", "errored"),
    ("pass_rate_pct", "pass rate %"), ("total_tokens", "tokens"), ("cost_usd", "cost USD"),
    ("git_commit", "commit"), ("run", "run"),
)  # fmt: skip
SORT_KEYS = {"finished": "finished_at", "pass_rate_pct": "pass_rate", "run": "run_id"}
"""Table columns sorted by another column of the runs frame (the rest by their own)."""


def _records(runs: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {
            "id": row["run_id"], "finished": ui.when(row["finished_at"]),
            "agent_name": row["agent_name"], "prompt_version": row["prompt_version"],
            "model_name": row["model_name"], "trigger": row["trigger"],
            "total_tests": row["total_tests"], "passed": row["passed"], "failed": row["failed"],
            "errored": row["errored"], "pass_rate_pct": round(100 * row["pass_rate"], 1),
            "total_tokens": row["total_tokens"], "cost_usd": row["cost_usd"],
            "git_commit": (row["git_commit"] or "")[:8],
            "run": f"[{ui.short(row['run_id'])}]({explorer_href(row['run_id'])})",
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
    return _records(ordered(runs, sort_by).iloc[start : start + PAGE_SIZE])


def _runs_table(runs: pd.DataFrame, query: str) -> list[Any]:
    return [
        html.H3("Runs"),
        html.Button("Compare selected runs (2-3)", id="compare-selected"),
        dcc.Store(id="runs-chosen", data=[]),  # ticked runs on every page of the table
        html.A(html.Button("Export"), href=f"/runs.csv{query}", download="runs.csv",
               className="export"),
        dash_table.DataTable(  # type: ignore[attr-defined]
            id="runs-table", data=table_page(runs, None, 0), page_size=PAGE_SIZE,
            page_action="custom", page_current=0,
            page_count=max(1, math.ceil(len(runs) / PAGE_SIZE)), sort_action="custom",
            sort_by=[], row_selectable="multi",
            columns=[{"id": c, "name": n, **({"presentation": "markdown"} if c == "run" else {})}
                     for c, n in COLUMNS],
            style_cell={"fontSize": "0.8rem", "padding": "4px"}, markdown_options={"link_target":
                                                                                   "_self"},
        ),
    ]  # fmt: skip


def runs_csv(db: History, search: str) -> flask.Response:
    """Every filtered run (not one page of the table) as CSV, newest first."""
    try:
        runs = filtered(db, Filters.from_query(parse_query(search))).runs
    except PageError as exc:
        return flask.Response(f"{exc.title}: {exc.message}\n", status=400, mimetype="text/plain")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([name for _, name in COLUMNS])
    for record in _records(ordered(runs, None)):
        writer.writerow([record["id"] if c == "run" else record[c] for c, _ in COLUMNS])
    return flask.Response(
        out.getvalue(),
        mimetype="text/csv",
        headers={"Content-Disposition": "attachment; filename=runs.csv"},
    )


def register(app: Dash, db: History) -> None:
    app.server.add_url_rule(
        "/runs.csv", "runs_csv", lambda: runs_csv(db, flask.request.query_string.decode())
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
        runs = filtered(db, Filters.from_query(parse_query(shown))).runs
        records = table_page(runs, sort_by, current or 0)
        return records, [i for i, r in enumerate(records) if r["id"] in (chosen or [])]

    @app.callback(
        Output("url", "search"),
        [Input(i, "value") for i in FILTER_IDS],
        Input("f-dates", "start_date"),
        Input("f-dates", "end_date"),
        Input("f-min-rate", "value"),
        State("summary-state", "data"),
        prevent_initial_call=True,
    )
    def _filter(
        agents: list[str] | None, prompts: list[str] | None, models: list[str] | None,
        triggers: list[str] | None, tags: list[str] | None, start: str | None,
        end: str | None, min_rate: float | None, shown: str | None,
    ) -> Any:  # fmt: skip
        query = Filters(
            agents=agents or [], prompt_versions=prompts or [], models=models or [],
            triggers=triggers or [], tags=tags or [],
            start=date.fromisoformat(start[:10]) if start else None,
            end=date.fromisoformat(end[:10]) if end else None,
            min_pass_rate=None if min_rate is None else float(min_rate),
        ).to_query()  # fmt: skip
        return no_update if query == shown else query

    @app.callback(
        Output("runs-chosen", "data"),
        Input("runs-table", "selected_rows"),
        State("runs-table", "data"),
        State("runs-chosen", "data"),
        prevent_initial_call=True,
    )
    def _choose(ticked: list[int] | None, shown: list[dict[str, Any]], chosen: list[str]) -> Any:
        """The table knows the ticks of its current page only; the other pages' are kept."""
        on_page = [row["id"] for row in shown or []]
        kept = [r for r in chosen or [] if r not in on_page]
        return kept + [on_page[i] for i in ticked or [] if i < len(on_page)]

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
