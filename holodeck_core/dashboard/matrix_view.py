"""The Matrix page: one agent's configurations as a grid, prompt versions by model candidates.
Each cell is its configuration's newest healthy run: pass rate with its 95% interval, cost per
passing case, median case latency and the run's age; the best cell and those not
significantly different from it are marked; a cost-quality scatter draws the Pareto frontier.
A cell opens its configuration's runs in Explorer, and Compare with the best cell."""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from holodeck_core.dashboard import agent_filter, configs, ui
from holodeck_core.dashboard.charts import Figure
from holodeck_core.dashboard.data import first
from holodeck_core.dashboard.links import compare_href
from holodeck_core.dashboard.matrix_data import Matrix, matrix
from holodeck_core.defaults import ALPHA
from holodeck_core.history.store import History

FRONTIER_COLOR = "#2f9e44"


def page(db: History, query: dict[str, list[str]]) -> html.Div:
    data = matrix(db, first(query, "agent"))
    parts: list[Any] = [
        html.H2("Matrix"),
        html.Div([agent_filter.dropdown("matrix", data.agents, data.agent)], className="filters"),
    ]
    if not data.cells:
        parts.append(html.P(f"{data.agent} has no healthy run yet.", className="muted",
                            id="matrix-empty"))  # fmt: skip
    else:
        parts += [
            html.Div([html.H3("Configurations"), html.P(
                "Each cell: the configuration's newest healthy run. ★ best pass rate; ≈ not "
                "significantly different from it (paired on the shared cases, p adjusted over "
                f"the cells by Benjamini-Hochberg, alpha = {ALPHA:g}).", className="muted"),
                _grid(data)], className="card"),
            html.Div([html.H3("Cost and quality"), html.P(
                "A point per cell of known cost; the line joins the cells no other beats on "
                "both cost per case and pass rate (the Pareto frontier).", className="muted"),
                dcc.Graph(id="matrix-scatter", figure=scatter(data))], className="card"),
        ]  # fmt: skip
    return html.Div(parts, className="page", id="matrix-page")


def _grid(data: Matrix) -> html.Table:
    header = ["prompt \\ candidate", *data.candidates]
    body = [
        html.Tr([html.Th(prompt), *(html.Td(_cell(data, prompt, candidate))
                                    for candidate in data.candidates)])
        for prompt in data.prompts
    ]  # fmt: skip
    return html.Table([html.Thead(html.Tr([html.Th(h) for h in header])), html.Tbody(body)],
                      className="grid", id="matrix-grid")  # fmt: skip


def _cell(data: Matrix, prompt: str, candidate: str) -> Any:
    cell = data.cell(prompt, candidate)
    if cell is None:
        return html.Span("no run", className="muted")
    best = next(c for c in data.cells if c["best"])
    mark = "★ best" if cell["best"] else "≈ tie" if cell["tie"] else ""
    p = cell.get("p_adjusted")
    lines: list[Any] = [
        html.Div([html.B(ui.pct(cell["pass_rate"])), f" {mark}" if mark else ""],
                 className="cell-rate"),
        html.Div(ui.interval({"ci_low": cell["ci95_low"], "ci_high": cell["ci95_high"],
                              "ci_n": cell["cases"]}, ui.pct), className="muted"),
        html.Div(f"{ui.usd(cell['cost_per_pass'])} per passing case", className="muted"),
        html.Div(f"latency p50 {ui.seconds(cell['latency_p50_ms'])}", className="muted"),
        html.Div(f"{ui.age(cell['finished_at'])} ago"
                 + ("" if p is None else f" · adjusted p = {p:.3g} vs best"), className="muted"),
        dcc.Link("runs", href=agent_filter.href("explorer", data.agent, prompt=prompt,
                                                candidate=candidate)),
    ]  # fmt: skip
    if not cell["best"]:
        lines += [" · ", dcc.Link("compare with best",
                                  href=compare_href([best["run_id"], cell["run_id"]]))]  # fmt: skip
    return html.Div(lines, className="cell" + (" tie" if cell["tie"] else ""),
                    title=configs.label((data.agent, prompt, candidate)))  # fmt: skip


def scatter(data: Matrix) -> Figure:
    """Cost per case against pass rate, a point per cell of known cost (a shade of the agent's
    hue per configuration), the Pareto frontier as a line."""
    known = [c for c in data.cells if c["cost_per_case"] is not None]
    colours = configs.palette((data.agent, str(c["prompt_version"]), str(c["model_candidate"]))
                              for c in data.cells)  # fmt: skip
    traces: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "markers", "x": [c["cost_per_case"]], "name":
         configs.text(configs.label((data.agent, c["prompt_version"], c["model_candidate"]))),
         "y": [round(100 * c["pass_rate"], 2)],
         "marker": {"size": 12, "color": colours[(data.agent, str(c["prompt_version"]),
                                                  str(c["model_candidate"]))]},
         "hovertemplate": "$%{x:.5f} a case · %{y:.1f}%<extra>%{fullData.name}</extra>"}
        for c in known
    ]  # fmt: skip
    frontier = sorted((c for c in known if c["frontier"]), key=lambda c: c["cost_per_case"])
    if frontier:
        traces.append({
            "type": "scatter", "mode": "lines", "name": "Pareto frontier",
            "x": [c["cost_per_case"] for c in frontier],
            "y": [round(100 * c["pass_rate"], 2) for c in frontier],
            "line": {"color": FRONTIER_COLOR, "dash": "dash"}, "hoverinfo": "skip",
        })  # fmt: skip
    layout = {
        "height": 360, "margin": {"t": 20, "b": 50},
        "xaxis": {"title": {"text": "cost per case (USD)"}, "rangemode": "tozero"},
        "yaxis": {"title": {"text": "pass rate (%)"}, "range": [0, 105]},
    }  # fmt: skip
    return {"data": traces, "layout": layout}
