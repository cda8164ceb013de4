"""The Summary page: KPI tiles per agent with sparklines and the change against the previous
run of the same configuration, the pass-rate trend per configuration (interval bands, model
changes, paired regressions), the cost per run and configuration (with the runs a budget
stopped), metric trends in a tab per kind (a panel per metric with its threshold), a breakdown
of the latest run per metric kind, filters (their notes say what a link asked for that does
not exist or is not valid) and the runs table."""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any

from dash import Dash, Input, Output, State, dcc, html, no_update

from holodeck_core.dashboard import cache, runs_table, summary_data, tiles, ui
from holodeck_core.dashboard.charts import Palette, metric_figure, pass_rate_figure
from holodeck_core.dashboard.cost_data import costs
from holodeck_core.dashboard.cost_view import cost_card
from holodeck_core.dashboard.data import Filters, Options
from holodeck_core.dashboard.failures_view import failed_runs_card, failures_card
from holodeck_core.dashboard.summary_data import SummaryData, summary
from holodeck_core.history.store import History

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]

FILTER_IDS = ("f-agent", "f-prompt", "f-model", "f-candidate", "f-trigger", "f-tag")
KIND_ORDER = tiles.KIND_ORDER


def filtered(db: History, filters: Filters) -> SummaryData:
    """The Summary's data, shared by the page, the table's pages and the CSV export."""
    return cache.cached(db, ("summary", filters.to_query()), lambda: summary(db, filters))


def page(db: History, query: dict[str, list[str]]) -> html.Div:
    filters, problems = Filters.parse(query)
    data = filtered(db, filters)
    problems += filters.unknown(data.options)
    parts: list[Any] = [html.H2("Summary"), _filters(filters, data.options)]
    if problems:
        parts.append(html.Ul([html.Li([html.B(title + ": "), message])
                              for title, message in problems],
                             className="notes", id="filter-notes"))  # fmt: skip
    if data.runs.empty:
        parts.append(
            ui.notice(
                "No runs match",
                "No run matches these filters"
                + (" (see the notes above)" if problems else "")
                + "; clear some.",
            )
        )
    else:
        parts += [
            tiles.kpis(data.runs),
            *_interval_methods(data),
            html.Div([html.H3("Pass rate per configuration"), html.P(
                "A line per configuration (agent · prompt version · model candidate). Band: 95% "
                "interval. Dotted lines: a configuration's model changed. ✕: a run "
                "significantly worse than the previous run of its configuration (paired test). "
                "▼: most cases ERROR (an infrastructure failure, not a regression).",
                className="muted"),
                *_window(data),
                dcc.Graph(id="pass-rate-chart",
                          figure=pass_rate_figure(data.charted, data.regressions,
                                                   data.colours))],
                className="card"),
            cost_card(cache.cached(db, ("costs", filters.to_query()),
                                   lambda: costs(db, filters)), set(data.charted["run_id"]),
                      data.colours),
            html.Div(_metric_tabs(data.metrics, data.colours), className="card",
                     id="metric-trends"),
            tiles.breakdown(data.metrics, str(data.runs.iloc[-1]["run_id"])),
            html.Div(runs_table.runs_table(data.runs, filters.to_query()), className="card"),
        ]  # fmt: skip
    parts += failures_card(data.failures, filters)
    parts += failed_runs_card(data.failed_runs)
    return html.Div(parts, className="page", id="summary-page")


def _interval_methods(data: SummaryData) -> list[html.P]:
    """The interval methods of the tiles, the band and the breakdown, named once."""
    latest = data.metrics[data.metrics["run_id"] == data.runs.iloc[-1]["run_id"]]
    used = [(method, "pass rate") for method in data.charted["ci_method"].unique()]
    used += [
        (method, "ms and USD" if isinstance(unit, str) else "0-1 scores")
        for method, unit in zip(latest.get("ci_method", []), latest["unit"], strict=True)
    ]
    return ui.interval_methods(used, "interval-methods")


def _window(data: SummaryData) -> list[html.P]:
    """What the charts leave out: runs past each agent's newest
    :data:`~holodeck_core.dashboard.summary_data.CHART_RUNS`."""
    shown, total = len(data.charted), len(data.runs)
    if shown == total:
        return []
    return [html.P(
        f"The charts show each agent's newest {summary_data.CHART_RUNS:,} runs ({shown:,} of "
        f"{total:,}); the runs table below lists them all. Narrow the date range to chart "
        "older runs.",
        className="notes", id="chart-window")]  # fmt: skip


def _dropdown(dom_id: str, label: str, choices: list[str], chosen: list[str]) -> html.Div:
    """A value the link names that no run has stays chosen (and a note says so): a dropdown
    drops a value it has no option for, which would rewrite the link without a word."""
    options = [{"label": c, "value": c} for c in choices] + [
        {"label": f"{c} (no runs)", "value": c} for c in chosen if c not in choices
    ]
    return html.Div(
        [html.Label(label, htmlFor=dom_id),
         dcc.Dropdown(id=dom_id, options=options, value=chosen, multi=True,
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
            _dropdown("f-candidate", "Candidate", options.candidates, filters.candidates),
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


def _metric_tabs(metrics: pd.DataFrame, colours: Palette) -> list[Any]:
    """A tab per kind (and unit: ms and USD metrics get their own); only the open tab's
    figure is drawn."""
    if metrics.empty:
        return [html.P("No metric results in these runs.", className="muted")]
    metrics = metrics.assign(group=[
        kind if not isinstance(unit, str) else f"{kind} · {unit}"
        for kind, unit in zip(metrics["kind"], metrics["unit"], strict=True)
    ])  # fmt: skip
    order = {kind: i for i, kind in enumerate(KIND_ORDER)}
    groups = sorted(metrics["group"].unique(), key=lambda g: (order.get(g.split(" ")[0], 9), g))
    tabs = [
        dcc.Tab(label=group, value=group, children=dcc.Graph(
            id=f"metric-chart-{i}",
            figure=metric_figure(metrics[metrics["group"] == group], colours)))
        for i, group in enumerate(groups)
    ]  # fmt: skip
    return [html.H3("Metric trends by kind"),
            dcc.Tabs(tabs, value=groups[0], id="metric-tabs")]  # fmt: skip


def register(app: Dash, db: History) -> None:
    runs_table.register(app, lambda filters: filtered(db, filters))

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
        candidates: list[str] | None, triggers: list[str] | None, tags: list[str] | None,
        start: str | None, end: str | None, min_rate: float | None, shown: str | None,
    ) -> Any:  # fmt: skip
        query = Filters(
            agents=agents or [], prompt_versions=prompts or [], models=models or [],
            candidates=candidates or [], triggers=triggers or [], tags=tags or [],
            start=date.fromisoformat(start[:10]) if start else None,
            end=date.fromisoformat(end[:10]) if end else None,
            min_pass_rate=None if min_rate is None else float(min_rate),
        ).to_query()  # fmt: skip
        return no_update if query == shown else query
