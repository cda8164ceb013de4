"""The Summary's figures as plain Plotly JSON: the pass-rate trend (interval bands,
prompt-version boundaries, paired regressions) and the metric trends of one kind (a panel per
metric with its threshold drawn)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from holodeck_core.dashboard import configs
from holodeck_core.dashboard.stats import INFRASTRUCTURE_ERROR_SHARE

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]

Palette = dict[configs.Config, str]
"""A colour per configuration (:func:`holodeck_core.dashboard.configs.palette`)."""
Figure = dict[str, Any]
"""A Plotly figure as plain JSON: dcc.Graph takes it as is, and building it skips
``plotly.graph_objects`` validation (most of a page's render time on a large history)."""

MAX_MARKERS = 20
"""Past this many changes in view (A/B runs alternate versions), only each version's first
run is marked."""
MARKED_POINTS = 150
MARK_COLOR = "#9c36b5"
REGRESSION_COLOR = "#e8590c"
FAILURE_COLOR = "#868e96"
THRESHOLD_COLOR = "#c92a2a"
LABEL_ROWS = 3
"""Boundary labels are stacked in up to this many rows so that none overlaps another; a
label that fits in none is left out (its line stays, and the hover names the version)."""
PLOT_PX = 1000
"""The plot area's width the label rows are planned for (the page is laid out for 1400 px);
a narrower window only moves labels closer, and the rows leave a margin for that."""
CHAR_PX = 7.5
LABEL_ROW_PX = 15
METRIC_PANELS = 12
"""Metrics of one kind drawn, one panel each (the rest are named under the chart)."""


def _mode(points: int) -> str:
    """Markers while a line has few points; a bare line past that, so the browser draws one
    path instead of one node per run."""
    return "lines+markers" if points <= MARKED_POINTS else "lines"


def _times(column: pd.Series) -> list[str]:
    return [str(t) for t in column]


def _texts(columns: pd.DataFrame) -> list[list[str]]:
    """Outside text for a hover (Plotly reads tags in the values it inserts), row by row."""
    return [[configs.text(v) for v in row] for row in columns.values.tolist()]


def change_points(runs: pd.DataFrame) -> list[tuple[Any, str]]:
    """(x, label) wherever a configuration's model differs from its previous run (its
    agent.yaml's model was edited); past :data:`MAX_MARKERS`, the first run of each new model
    only."""
    changes: list[tuple[Any, str]] = []
    firsts: list[tuple[Any, str]] = []
    for config, group in configs.series(runs):
        previous: str | None = None
        seen: set[str] = set()
        for row in group.itertuples():
            current = str(row.model_name)
            if previous is not None and current != previous:
                label = configs.text(f"{configs.label(config)}: model {current}")
                changes.append((row.finished_at, label))
                if current not in seen:
                    firsts.append((row.finished_at, label))
            seen.add(current)
            previous = current
    return changes if len(changes) <= MAX_MARKERS else firsts


def label_rows(marks: list[tuple[Any, str]], first: Any, last: Any) -> list[int | None]:
    """The row of each boundary label (0 nearest the plot), or None when it fits in none:
    labels are centred on their boundary, and two in one row keep their widths apart."""
    span = (last - first).total_seconds() if last != first else 0.0
    ends = [float("-inf")] * LABEL_ROWS
    found: list[int | None] = []
    for x, label in sorted(marks, key=lambda m: m[0]):
        centre = PLOT_PX * ((x - first).total_seconds() / span if span else 0.5)
        half = CHAR_PX * len(label) / 2 + 8
        row = next((r for r in range(LABEL_ROWS) if ends[r] < centre - half), None)
        if row is not None:
            ends[row] = centre + half
        found.append(row)
    order = sorted(range(len(marks)), key=lambda i: marks[i][0])
    rows: list[int | None] = [None] * len(marks)
    for position, index in enumerate(order):
        rows[index] = found[position]
    return rows


def pass_rate_figure(runs: pd.DataFrame, regressions: set[str], colours: Palette) -> Figure:
    """Per configuration (agent, prompt version, model candidate; never a line across two):
    the pass rate, its 95% interval as a band, the runs whose paired comparison with the
    previous run of their configuration is a regression, the runs that mostly errored
    (infrastructure failures, docs/cli.md); model changes within a configuration as dotted
    lines with their labels above the plot."""
    traces: list[dict[str, Any]] = []
    for config, group in configs.series(runs):
        x, colour = _times(group["finished_at"]), colours[config]
        name = configs.text(configs.label(config))
        band = {"type": "scatter", "x": x, "mode": "lines", "line": {"width": 0},
                "hoverinfo": "skip", "showlegend": False, "legendgroup": name,
                "name": f"{name} 95% CI"}  # fmt: skip
        traces += [
            band | {"y": (group["ci_high"] * 100).round(2).tolist()},
            band | {"y": (group["ci_low"] * 100).round(2).tolist(), "fill": "tonexty",
                    "fillcolor": configs.translucent(colour, 0.12)},
            {"type": "scatter", "name": name, "x": x, "legendgroup": name,
             "y": (group["pass_rate"] * 100).round(2).tolist(), "mode": _mode(len(group)),
             "line": {"color": colour}, "marker": {"color": colour},
             "customdata": _texts(group[["prompt_version", "model_name", "run_id"]]),
             "hovertemplate": "%{x}<br>%{y:.1f}% · prompt %{customdata[0]} · %{customdata[1]}"
             "<br>run %{customdata[2]}<extra>%{fullData.name}</extra>"},
        ]  # fmt: skip
    dropped = runs[runs["run_id"].isin(regressions)]
    if not dropped.empty:
        traces.append({
            "type": "scatter", "name": "regression", "mode": "markers",
            "x": _times(dropped["finished_at"]),
            "y": (dropped["pass_rate"] * 100).round(2).tolist(),
            "marker": {"color": REGRESSION_COLOR, "size": 12, "symbol": "x"},
            "customdata": _texts(dropped[["prompt_version", "run_id"]]),
            "hovertemplate": "regression against the previous %{customdata[0]} run (paired, "
            "p < 0.05)<br>run %{customdata[1]}<extra></extra>",
        })  # fmt: skip
    failed = runs[runs["errored"] > INFRASTRUCTURE_ERROR_SHARE * runs["total_tests"]]
    if not failed.empty:
        traces.append({
            "type": "scatter", "name": "infrastructure failure", "mode": "markers",
            "x": _times(failed["finished_at"]), "y": (failed["pass_rate"] * 100).round(2).tolist(),
            "marker": {"color": FAILURE_COLOR, "size": 12, "symbol": "triangle-down"},
            "customdata": failed[["errored", "total_tests", "run_id"]].values.tolist(),
            "hovertemplate": "infrastructure failure: %{customdata[0]} of %{customdata[1]} "
            "cases ERROR<br>run %{customdata[2]}<extra></extra>",
        })  # fmt: skip
    marks = change_points(runs)
    rows = label_rows(marks, runs["finished_at"].min(), runs["finished_at"].max()) if marks else []
    shapes = [
        {"type": "line", "xref": "x", "yref": "paper", "x0": str(x), "x1": str(x), "y0": 0,
         "y1": 1, "line": {"dash": "dot", "color": MARK_COLOR}}
        for x, _ in marks
    ]  # fmt: skip
    annotations = [
        {"x": str(x), "y": 1.0, "xref": "x", "yref": "paper", "text": label, "showarrow": False,
         "yanchor": "bottom", "yshift": 2 + LABEL_ROW_PX * row,
         "font": {"color": MARK_COLOR, "size": 11}}
        for (x, label), row in zip(marks, rows, strict=True) if row is not None
    ]  # fmt: skip
    used = max((r for r in rows if r is not None), default=-1) + 1
    layout = {
        "height": 340 + LABEL_ROW_PX * used, "shapes": shapes, "annotations": annotations,
        "yaxis": {"title": {"text": "pass rate (%)"}, "range": [0, 105]},
        "xaxis": {"type": "date"}, "margin": {"t": 20 + LABEL_ROW_PX * used, "b": 40},
        "legend": {"title": {"text": "agent · prompt · candidate"}},
    }  # fmt: skip
    return {"data": traces, "layout": layout}


def metric_figure(metrics: pd.DataFrame, colours: Palette) -> Figure:
    """The metrics of one kind (and unit): a panel per metric stacked on a shared time axis,
    one line per configuration, the metric's threshold as a dashed line (a minimum for scores,
    a maximum for ms and USD)."""
    names = sorted(metrics["metric_name"].unique())[:METRIC_PANELS]
    gap = 0.12 / max(1, len(names) - 1) if len(names) > 1 else 0.0
    height = (1 - gap * (len(names) - 1)) / len(names)
    traces: list[dict[str, Any]] = []
    layout: dict[str, Any] = {"height": 60 + 170 * len(names), "annotations": [], "shapes": [],
                              "margin": {"t": 30, "b": 30}, "showlegend": True}  # fmt: skip
    for i, name in enumerate(names):
        axis = "" if i == 0 else str(i + 1)
        part = metrics[metrics["metric_name"] == name]
        traces += [
            {"type": "scatter", "mode": _mode(len(line)), "x": _times(line["finished_at"]),
             "y": [None if v != v else v for v in line["mean"].round(4).tolist()],
             "name": configs.text(configs.label(config)), "legendgroup": configs.label(config),
             "showlegend": i == 0, "line": {"color": colours[config]},
             "marker": {"color": colours[config]}, "xaxis": f"x{axis}", "yaxis": f"y{axis}",
             "meta": [configs.text(name)],
             "hovertemplate": "%{meta[0]}: %{y:.3g}<br>%{x}<extra>%{fullData.name}</extra>"}
            for config, line in configs.series(part)
        ]  # fmt: skip
        top = 1 - i * (height + gap)
        unit = part["unit"].dropna()
        bounded = unit.empty
        layout[f"yaxis{axis}"] = {"domain": [top - height, top], "anchor": f"x{axis}",
                                  "title": {"text": "score" if bounded else str(unit.iloc[0])}} | (
            {"range": [-0.02, 1.05]} if bounded else {})  # fmt: skip
        layout[f"xaxis{axis}"] = {"type": "date", "anchor": f"y{axis}",
                                  "showticklabels": i == len(names) - 1} | (
            {"matches": "x"} if axis else {})  # fmt: skip
        thresholds = part["threshold"].dropna()
        title = f"<b>{configs.text(name)}</b>"
        if not thresholds.empty:
            value = float(thresholds.iloc[-1])
            layout["shapes"].append(
                {"type": "line", "xref": f"x{axis} domain", "yref": f"y{axis}", "x0": 0, "x1": 1,
                 "y0": value, "y1": value, "line": {"dash": "dash", "color": THRESHOLD_COLOR}}
            )  # fmt: skip
            title += f" · threshold {value:g}" + ("" if bounded else " (max)")
        layout["annotations"].append(
            {"text": title, "x": 0, "y": top, "xref": "paper", "yref": "paper",
             "xanchor": "left", "yanchor": "bottom", "showarrow": False}
        )  # fmt: skip
    return {"data": traces, "layout": layout}
