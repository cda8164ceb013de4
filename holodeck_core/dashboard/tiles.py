"""The Summary's KPI tiles (per agent, its latest run's figures, each with a sparkline of its
configuration's recent runs and the change against the previous healthy run of that
configuration) and the breakdown panel per metric kind
(a bar and a value per metric of the latest run)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from dash import html

from holodeck_core.dashboard import configs, ui

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]

SPARK_RUNS = 20
"""Runs of the latest run's configuration a sparkline shows."""
SPARK_W, SPARK_H = 110, 30
KIND_ORDER = ("standard", "rag", "geval", "code")


def sparkline(values: Sequence[Any], tile_id: str) -> html.Img:
    """A small SVG line of ``values`` (gaps skipped), as an image: no Plotly plot per tile."""
    known = [(i, float(v)) for i, v in enumerate(values) if not ui.missing(v)]
    low = min((v for _, v in known), default=0.0)
    high = max((v for _, v in known), default=1.0)
    span = (high - low) or 1.0
    step = SPARK_W / max(1, len(values) - 1)
    points = " ".join(
        f"{i * step:.1f},{SPARK_H - 3 - (v - low) / span * (SPARK_H - 6):.1f}" for i, v in known
    )
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{SPARK_W}" height="{SPARK_H}">'
        f'<polyline fill="none" stroke="#4c6ef5" stroke-width="1.5" points="{points}"/></svg>'
    )
    return html.Img(src="data:image/svg+xml;utf8," + quote(svg), className="spark",
                    id=f"{tile_id}-spark", alt=f"{len(known)} runs", width=SPARK_W,
                    height=SPARK_H)  # fmt: skip


def delta(
    now: Any, before: Any, fmt: Callable[[float], str], higher_better: bool, comparable: bool
) -> html.Div:
    """``▲ +32.0 pp vs prior``, green when better, red when worse, grey when the latest run is
    an infrastructure failure (its lower counts are no improvement) or nothing changed."""
    if ui.missing(now) or ui.missing(before):
        return html.Div("no prior run" if ui.missing(before) else "", className="delta")
    change = float(now) - float(before)
    arrow = "▲" if change > 0 else "▼" if change < 0 else "="
    tone = ui.tone(change, higher_better, comparable)
    return html.Div(f"{arrow} {fmt(change)} vs prior", className=f"delta {tone}")


def kpis(runs: pd.DataFrame) -> html.Div:
    """The count of runs shown, then a row of tiles per agent (the agent of the newest run
    first): its latest run against the previous healthy run of the same configuration."""
    runs = runs.astype(object).where(runs.notna(), None)  # pandas' NA as None
    newest_first = list(dict.fromkeys(reversed(runs["agent_name"].tolist())))
    return html.Div(
        [html.Div(ui.kpi("Runs", ui.num(len(runs)), f"{len(newest_first)} agent(s)"),
                  className="kpis"),
         *(_agent_row(runs, runs[runs["agent_name"] == agent], index)
           for index, agent in enumerate(newest_first))],
        id="kpi-rows",
    )  # fmt: skip


def _agent_row(runs: pd.DataFrame, agents_runs: pd.DataFrame, index: int) -> html.Div:
    """One agent's tiles; the first row's ids are ``kpi-…``, the next ``kpi-…-2`` and on."""
    latest = agents_runs.iloc[-1]
    config = configs.of(latest)
    own = agents_runs[[configs.of(row) == config for _, row in agents_runs.iterrows()]]
    healthy = [row for _, row in own.iloc[:-1].iterrows() if not ui.infrastructure_failure(row)]
    prior = healthy[-1] if healthy else None
    comparable = not ui.infrastructure_failure(latest)
    suffix = "" if index == 0 else f"-{index + 1}"
    spark = own.tail(SPARK_RUNS)

    def tile(label: str, column: str, fmt: Callable[[Any], str], change: Callable[[float], str],
             higher_better: bool, sub: str, *extra: Any) -> html.Div:  # fmt: skip
        tile_id = f"kpi-{label.lower().replace(' ', '-')}{suffix}"
        before = None if prior is None else prior[column]
        return html.Div(
            [html.Div(label, className="label"), html.Div(fmt(latest[column]), className="value"),
             delta(latest[column], before, change, higher_better, comparable or higher_better),
             *extra, sparkline(spark[column].tolist(), tile_id), html.Div(sub, className="sub")],
            className="kpi", id=tile_id,
        )  # fmt: skip

    note = "" if comparable else " · most cases ERROR: an infrastructure failure"
    return html.Div(
        [
            html.H4(f"{configs.label(config)} · latest run {ui.age(latest['finished_at'])} ago"),
            html.Div([
                tile("Latest pass rate", "pass_rate", ui.pct, lambda d: f"{100 * d:+.1f} pp",
                     True, f"{ui.interval(latest, ui.pct)}{note}", _prior(config, prior)),
                tile("Errored cases", "errored", ui.num, lambda d: f"{d:+,.0f}", False,
                     f"{ui.num(agents_runs['errored'].sum())} in all its runs shown"),
                tile("Tokens", "total_tokens", ui.num, lambda d: f"{d:+,.0f}", False,
                     f"latest run · {ui.num(agents_runs['total_tokens'].sum(min_count=1))} in all"),
                tile("Cost", "cost_usd", ui.usd, ui.usd_change, False,
                     f"latest run · {_spent(agents_runs['cost_usd'])}"),
                tile("Wall time", "wall_time_ms", ui.seconds, lambda d: f"{d / 1000:+.1f} s",
                     False, "latest run, start to finish"),
            ], className="kpis"),
        ],
        className="kpi-row", id=f"kpi-row{suffix or '-1'}",
    )  # fmt: skip


def _prior(config: configs.Config, prior: Any) -> html.Div:
    """Which run the change is against: the previous healthy run of the configuration."""
    if prior is None:
        return html.Div(f"no prior healthy run of {configs.label(config)}", className="prior")
    return html.Div(
        f"vs prior {configs.label(configs.of(prior))}, {ui.age(prior['finished_at'])} ago",
        className="prior",
    )


def _spent(cost: pd.Series) -> str:
    """What the runs shown spent; runs of unknown cost are named, not counted as 0."""
    unknown = int(cost.isna().sum())
    known = ui.usd(cost.sum(min_count=1)) + " in all"
    if not unknown:
        return known
    return f"{known} of known cost, {unknown} run(s) unknown" if unknown < len(cost) else (
        "every run's cost unknown")  # fmt: skip


def breakdown(metrics: pd.DataFrame, run_id: str) -> html.Div:
    """Per kind of metric, the latest run's metrics: a bar (mean score, or the share of cases
    within a ms/USD maximum) with the threshold marked, and the value."""
    latest = metrics[metrics["run_id"] == run_id]
    order = {kind: i for i, kind in enumerate(KIND_ORDER)}
    panels = []
    for kind in sorted(latest["kind"].unique(), key=lambda k: (order.get(k, 9), k)):
        part = latest[latest["kind"] == kind]
        panels.append(html.Div(
            [html.H4(f"{kind}"), *(_metric_row(row) for row in part.to_dict("records"))],
            className="breakdown", id=f"breakdown-{kind}",
        ))  # fmt: skip
    return html.Div(
        [html.H3("Latest run by metric"),
         html.Div(panels or [html.P("The latest run has no metric results.", className="muted")],
                  className="breakdowns")],
        className="card", id="breakdown",
    )  # fmt: skip


def _metric_row(row: dict[str, Any]) -> html.Div:
    judged = int(row["passed"]) + int(row["failed"])
    share = int(row["passed"]) / judged if judged else None
    unit = row["unit"] if isinstance(row["unit"], str) else None
    mean, threshold = row["mean"], row["threshold"]
    fill = share if unit else (None if ui.missing(mean) else min(1.0, max(0.0, float(mean))))
    value = ui.with_unit(mean, unit)
    passed = f"{row['passed']}/{judged} passed" if judged else "not judged"
    if row["errors"]:
        passed += f" · {row['errors']} errored"
    bar: list[Any] = [html.Div(className="fill", style={"width": f"{100 * (fill or 0):.0f}%"})]
    if not unit and not ui.missing(threshold) and not math.isnan(float(threshold)):
        bar.append(html.Div(className="thresh", style={"left": f"{100 * float(threshold):.0f}%"},
                            title=f"threshold {float(threshold):g}"))  # fmt: skip
    interval = ui.interval(row, lambda v: ui.with_unit(v, unit))
    return html.Div(
        [html.Div(row["metric_name"], className="metric-name"), html.Div(bar, className="bar"),
         html.Div(value, className="metric-value"), html.Div(passed, className="muted"),
         *([html.Div(interval, className="muted metric-interval")] if interval else [])],
        className="metric-row", id=f"metric-{row['metric_name']}",
    )  # fmt: skip
