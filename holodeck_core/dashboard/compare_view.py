"""The Compare page: two or three runs against a baseline: headline deltas, paired statistics,
config diff and the per-case status matrix (regressions outlined, fixes and flaky marked)."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html, no_update

from holodeck_core.dashboard import agent_filter, ui
from holodeck_core.dashboard.compare_data import MAX_RUNS, CompareData, compare
from holodeck_core.dashboard.data import first
from holodeck_core.dashboard.links import compare_href, explorer_href
from holodeck_core.history.store import History

HEADLINES = (
    ("pass rate", "pass_rate", ui.pct, 100, "{:+.1f} pp".format, True),
    ("passed", "passed", ui.num, 1, "{:+,.0f}".format, True),
    ("failed", "failed", ui.num, 1, "{:+,.0f}".format, False),
    ("errored", "errored", ui.num, 1, "{:+,.0f}".format, False),
    ("tests", "total_tests", ui.num, 1, "{:+,.0f}".format, None),
    ("tokens", "total_tokens", ui.num, 1, "{:+,.0f}".format, False),
    ("cost", "cost_usd", ui.usd, 1, ui.usd_change, False),
    ("cost per passing case", "cost_per_pass", ui.usd, 1, ui.usd_change, False),
    ("wall time (s)", "wall_time_ms", ui.seconds, 0.001, "{:+,.1f} s".format, False),
    ("sum of case times (s)", "total_duration_ms", ui.seconds, 0.001, "{:+,.1f} s".format, False),
)
"""(label, column, format, delta scale, delta's format, higher is better)."""


def page(db: History, query: dict[str, list[str]]) -> html.Div:
    refs = [r for item in query.get("runs", []) for r in item.split(",") if r]
    data = compare(db, refs, first(query, "baseline"), first(query, "previous_of"),
                   first(query, "agent"))  # fmt: skip
    body = (
        _body(data)
        if data.runs
        else [
            html.P(
                [
                    html.B(data.reason + " ") if data.reason else "",
                    "Pick two or three runs (the first is the baseline unless you choose "
                    "another), or select them in the Summary's runs table.",
                ],
                className="muted",
                id="compare-help",
            )
        ]
    )
    return html.Div([html.H2("Compare"), _picker(data), *body], className="page",
                    id="compare-page")  # fmt: skip


def _picker(data: CompareData) -> html.Div:
    options = [
        {"label": f"{ui.when(r['finished_at'])} · {r['prompt_version']} · "
                  f"{r['model_candidate']} · {ui.pct(r['pass_rate'])} · {ui.short(r['run_id'])}",
         "value": r["run_id"]}
        for r in data.picker
    ]  # fmt: skip
    chosen = [r["run_id"] for r in data.runs]
    known = {o["value"] for o in options}
    options += [{"label": ui.short(i), "value": i} for i in chosen if i not in known]
    baseline = chosen[data.baseline] if chosen else None
    return html.Div([
        agent_filter.dropdown("compare", data.agents, data.agent),
        dcc.Store(id="cmp-state", data=compare_href(chosen, baseline)),
        html.Div([html.Label("Runs"), dcc.Dropdown(id="cmp-runs", options=options, value=chosen,
                                                   multi=True, placeholder="pick runs")]),
        html.Div([html.Label("Baseline"), dcc.Dropdown(id="cmp-baseline", value=baseline,
                                                       options=[o for o in options
                                                                if o["value"] in chosen])]),
    ], className="filters")  # fmt: skip


def _body(data: CompareData) -> list[Any]:
    return [
        html.Div([html.H3("Headline"), _headline(data), *_stats(data)], className="card"),
        html.Div([html.H3("Config"), *_config(data)], className="card"),
        html.Div([html.H3("Cases"), *_matrix(data)], className="card"),
    ]


def _title(data: CompareData, k: int) -> Any:
    run = data.runs[k]
    label = f"{run['prompt_version']} · {run['model_candidate']} · {ui.short(run['run_id'])}"
    suffix = " (baseline)" if k == data.baseline else ""
    return html.Span([dcc.Link(label, href=explorer_href(run["run_id"])), suffix])


def _headline(data: CompareData) -> html.Table:
    """Deltas against the baseline; a run that mostly errored gets no colour for its lower
    failures, tokens, cost or times (they are no improvement), only for its pass rate."""
    base = data.runs[data.baseline]
    body = []
    for label, column, fmt, scale, unit, higher in HEADLINES:
        cells: list[Any] = [label]
        for k, run in enumerate(data.runs):
            value, before = run[column], base[column]
            if k == data.baseline or value is None or before is None:
                cells.append(fmt(value))
                continue
            delta = (float(value) - float(before)) * scale
            comparable = higher is True or not ui.infrastructure_failure(run)
            tone = ui.tone(delta, higher, comparable)
            cells.append(
                html.Span([fmt(value), " ", html.Span(f"({unit(delta)})", className=tone)])
            )
        body.append(cells)
    body.append(["estimate before the run", *(run["estimate"] for run in data.runs)])
    body.append(["budget", *(run["budget"] for run in data.runs)])
    return ui.grid(["", *(_title(data, k) for k in range(len(data.runs)))], body, "headline")


def _stats(data: CompareData) -> list[Any]:
    """Each run's paired verdicts against the baseline, as ``holodeck history compare`` gives
    them: the pass fraction's and each shared metric's, every one with its raw p and its p
    adjusted over that family (docs/history.md)."""
    lines = []
    for k, comparison in enumerate(data.comparisons):
        if comparison is None or comparison.paired is None or not comparison.paired.pass_fraction.n:
            continue
        run, paired = data.runs[k], comparison.paired
        metrics = [html.Li(line, className="metric-verdict")
                   for line in comparison.paired_metric_lines()]  # fmt: skip
        lines.append(html.Li([
            f"{run['prompt_version']} ({ui.short(run['run_id'])}) vs baseline, pass fraction on "
            f"{paired.pass_fraction.n} shared cases: {paired.pass_fraction.render()}",
            *([html.Ul(metrics)] if metrics else []),
        ], className="paired-verdict"))  # fmt: skip
    return [html.Ul(lines, id="paired-stats")] if lines else []


def _config(data: CompareData) -> list[Any]:
    header = ["", *(_title(data, k) for k in range(len(data.runs)))]
    table = html.Table(
        [html.Thead(html.Tr([html.Th(h) for h in header])),
         html.Tbody([html.Tr([html.Td(row.label), *(html.Td(v) for v in row.values)],
                             className="differs" if row.differs else "")
                     for row in data.config])],
        className="grid", id="config-diff",
    )  # fmt: skip
    diffs = [
        html.Details([html.Summary(f"prompt body: baseline → {data.runs[k]['prompt_version']}"),
                      html.Pre(diff)], open=True, className="prompt-diff")
        for k, diff in enumerate(data.prompt_diffs) if diff
    ]  # fmt: skip
    return [table, *diffs]


def _matrix(data: CompareData) -> list[Any]:
    base = data.baseline
    fixed = regressed = 0
    body = []
    for row in data.matrix:
        before = row.statuses[base]
        cells: list[Any] = [
            html.Td(
                [
                    row.test_name or row.case_id,
                    html.Span("flaky", className="flaky") if row.flaky else "",
                ]
            )
        ]
        for k, status in enumerate(row.statuses):
            mark = ""
            if k != base and before is not None and status is not None:
                if before == "PASS" and status != "PASS":
                    mark, regressed = "regression", regressed + 1
                elif before != "PASS" and status == "PASS":
                    mark, fixed = "fixed", fixed + 1
            run_id = data.runs[k]["run_id"]
            content = (
                dcc.Link(ui.badge(status), href=explorer_href(run_id, row.case_id))
                if status
                else ui.badge(None)
            )
            cells.append(html.Td(content, className=mark))
        body.append(html.Tr(cells, id=f"row-{row.case_id}"))
    header = ["case", *(_title(data, k) for k in range(len(data.runs)))]
    return [
        html.P(f"{fixed} fixed · {regressed} regressed against the baseline", id="flip-counts"),
        html.Table([html.Thead(html.Tr([html.Th(h) for h in header])), html.Tbody(body)],
                   className="grid", id="case-matrix"),
    ]  # fmt: skip


def register(app: Dash) -> None:
    @app.callback(
        Output("url", "href", allow_duplicate=True),
        Input("cmp-runs", "value"),
        Input("cmp-baseline", "value"),
        State("cmp-state", "data"),
        prevent_initial_call=True,
    )
    def _pick(runs: list[str] | None, baseline: str | None, shown: str | None) -> Any:
        """A new URL when the choice differs from what the page shows (not when the
        dropdowns mount with the page's own values)."""
        chosen = list(runs or [])[:MAX_RUNS]
        href = compare_href(chosen, baseline if baseline in chosen else None)
        return no_update if len(chosen) < 2 or href == shown else href
