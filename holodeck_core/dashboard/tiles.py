"""The Summary's KPI tiles (the latest run's figures, each with a sparkline of its agent's
recent runs and the change against the prior run) and the breakdown panel per metric kind
(a bar and a value per metric of the latest run)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from dash import html

from holodeck_core.dashboard import ui

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]

SPARK_RUNS = 20
"""Runs of the latest run's agent a sparkline shows."""
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
    runs = runs.astype(object).where(runs.notna(), None)  # pandas' NA as None
    latest = runs.iloc[-1]
    own = runs[runs["agent_name"] == latest["agent_name"]].tail(SPARK_RUNS)
    prior = own.iloc[-2] if len(own) > 1 else None
    comparable = not ui.infrastructure_failure(latest)

    def tile(label: str, column: str, fmt: Callable[[Any], str], change: Callable[[float], str],
             higher_better: bool, sub: str) -> html.Div:  # fmt: skip
        tile_id = f"kpi-{label.lower().replace(' ', '-')}"
        before = None if prior is None else prior[column]
        return html.Div(
            [html.Div(label, className="label"), html.Div(fmt(latest[column]), className="value"),
             delta(latest[column], before, change, higher_better, comparable or higher_better),
             sparkline(own[column].tolist(), tile_id), html.Div(sub, className="sub")],
            className="kpi", id=tile_id,
        )  # fmt: skip

    where = f"{latest['agent_name']} {latest['prompt_version']}"
    note = "" if comparable else " · most cases ERROR: an infrastructure failure"
    return html.Div(
        [
            tile("Latest pass rate", "pass_rate", ui.pct, lambda d: f"{100 * d:+.1f} pp", True,
                 f"{where} · {ui.interval(latest, ui.pct)}{note}"),
            ui.kpi("Runs", ui.num(len(runs)), f"{runs['agent_name'].nunique()} agent(s)"),
            tile("Errored cases", "errored", ui.num, lambda d: f"{d:+,.0f}", False,
                 f"{ui.num(runs['errored'].sum())} in all runs shown"),
            tile("Tokens", "total_tokens", ui.num, lambda d: f"{d:+,.0f}", False,
                 f"latest run · {ui.num(runs['total_tokens'].sum(min_count=1))} in all"),
            tile("Cost", "cost_usd", ui.usd, ui.usd_change, False,
                 f"latest run · {_spent(runs['cost_usd'])}"),
            tile("Wall time", "wall_time_ms", ui.seconds, lambda d: f"{d / 1000:+.1f} s", False,
                 "latest run, start to finish"),
        ],
        className="kpis",
    )  # fmt: skip


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
