"""The Summary's cost card (docs/cost.md): the cost of each run over time, a line per
configuration, with its cost per passing case and the part batches answered in the hover; a
run whose cost is unknown (a model without a price) is marked "unknown" on the time axis, never
drawn at 0; a table per configuration (with what batches answered); and the runs a budget
stopped, with the verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dash import dcc, html

from holodeck_core.dashboard import configs, ui
from holodeck_core.dashboard.charts import Figure, Palette
from holodeck_core.dashboard.cost_data import CostData, budget_text
from holodeck_core.dashboard.links import explorer_href

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]

UNKNOWN_COLOR = "#868e96"


def cost_card(data: CostData, charted: set[str], colours: Palette) -> html.Div:
    """``charted``: the runs the chart draws (the Summary's, :data:`CHART_RUNS` per agent);
    the table per configuration counts every run."""
    runs = data.runs
    return html.Div(
        [
            html.H3("Cost per run"),
            html.P(
                "A line per configuration (agent · prompt · candidate); the hover gives the "
                "cost per passing case. \u201cunknown\u201d: a run that called a model "
                "without a "
                "price (give it one under pricing: in holodeck.yaml): its cost is not 0, it is "
                "not known.",
                className="muted",
            ),
            dcc.Graph(
                id="cost-chart", figure=cost_figure(runs[runs["run_id"].isin(charted)], colours)
            ),
            _by_configuration(runs),
            *_stops(data.stops),
        ],
        className="card",
        id="cost-card",
    )


def cost_figure(runs: pd.DataFrame, colours: Palette) -> Figure:
    traces: list[dict[str, Any]] = []
    for config, group in configs.series(runs):
        per_pass = [None if ui.missing(v) else round(float(v), 6) for v in group["cost_per_pass"]]
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": configs.text(configs.label(config)),
            "line": {"color": colours[config]}, "marker": {"color": colours[config]},
            "x": [str(t) for t in group["finished_at"]],
            "y": [None if ui.missing(v) else round(float(v), 6) for v in group["cost_usd"]],
            # the run id last, as on every chart (its points are the run's)
            "customdata": [[ui.usd(p), batched_text(b), str(r)] for p, b, r in zip(
                per_pass, group["batch_usd"], group["run_id"], strict=True)],
            "hovertemplate": "%{x}<br>$%{y:.4f} a run · %{customdata[0]} per passing case"
            "<br>%{customdata[1]}<br>run %{customdata[2]}<extra>%{fullData.name}</extra>",
        })  # fmt: skip
    unknown = runs[runs["cost_usd"].isna()]
    annotations = [
        {"x": str(row["finished_at"]), "y": 0, "xref": "x", "yref": "paper", "text": "unknown",
         "showarrow": True, "arrowhead": 0, "ay": -24, "ax": 0,
         "font": {"color": UNKNOWN_COLOR, "size": 10},
         "hovertext": configs.text(f"{configs.label(configs.of(row))}: cost unknown "
                                   f"(run {ui.short(row['run_id'])})")}
        for row in unknown.to_dict("records")
    ]  # fmt: skip
    layout = {
        "height": 300, "annotations": annotations, "xaxis": {"type": "date"},
        "yaxis": {"title": {"text": "USD per run"}, "rangemode": "tozero"},
        "margin": {"t": 20, "b": 40}, "legend": {"title": {"text": "agent · prompt · candidate"}},
    }  # fmt: skip
    return {"data": traces, "layout": layout}


def batched_text(batch_usd: Any) -> str:
    """What batches answered of a run's cost, at the batch prices (docs/cost.md)."""
    return "no batches" if ui.missing(batch_usd) else f"{ui.usd(batch_usd)} of it in batches"


def _by_configuration(runs: pd.DataFrame) -> html.Table:
    """Per configuration: its runs, the latest run's cost and cost per passing case, what the
    runs of known cost spent (the unknown ones counted apart) and what of it batches answered,
    at the batch prices."""
    body = []
    for (agent, version, candidate), group in configs.series(runs):
        latest = group.iloc[-1]
        unknown = int(group["cost_usd"].isna().sum())
        known = group["cost_usd"].dropna()
        spent = ui.usd(known.sum()) if not known.empty else ui.usd(None)
        batched = group["batch_usd"].dropna()
        body.append([
            agent, version, candidate, ui.num(len(group)), ui.usd(latest["cost_usd"]),
            ui.usd(latest["cost_per_pass"]),
            spent + (f" ({unknown} run(s) of unknown cost not counted)" if unknown else ""),
            f"{ui.usd(batched.sum())} ({len(batched)} run(s))" if not batched.empty else "-",
        ])  # fmt: skip
    header = [
        "agent",
        "prompt",
        "candidate",
        "runs",
        "latest run",
        "latest per passing case",
        "spent",
        "of it in batches",
    ]
    return ui.grid(header, body, "cost-by-version")


def _stops(stops: list[dict[str, Any]]) -> list[Any]:
    if not stops:
        return []
    items = [
        html.Li([
            dcc.Link(ui.short(row["run_id"]), href=explorer_href(row["run_id"])),
            f" {ui.when(row['finished_at'])} · {row['agent_name']} {row['prompt_version']}: "
            f"{budget_text(row)}",
        ])
        for row in stops
    ]  # fmt: skip
    return [html.H4("Stopped by a budget"), html.Ul(items, id="budget-stops")]
