"""The Judges page (docs/cli.md): how far each judge agrees with people (``v_judge_agreement``),
and each recent run's labelling sheet to download, fill in and bring back with ``holodeck
labels import``. The dashboard stays read-only (docs/dashboard.md): it offers the sheet, it stores
nothing."""

from __future__ import annotations

from typing import Any

import flask
from dash import Dash, html

from holodeck_core.dashboard import ui
from holodeck_core.dashboard.data import (
    PageError,
    connect,
    first,
    parse_query,
    require_runs,
    resolve,
)
from holodeck_core.history.csv_cells import csv_text
from holodeck_core.history.drift import control_agreement_rows
from holodeck_core.history.labels import (
    AGREEMENT_UNIT,
    SHEET_COLUMNS,
    agreement,
    labelling_sheet,
    render_agreement,
)
from holodeck_core.history.store import History

RECENT_RUNS = 15


def page(db: History, query: dict[str, list[str]]) -> html.Div:
    with connect(db) as con:
        require_runs(con, db)
        found = agreement(con)
        control = control_agreement_rows(con)
        runs = con.execute(
            "SELECT run_id, finished_at, agent_name, prompt_version FROM eval_runs "
            "ORDER BY finished_at DESC, run_id DESC LIMIT ?",
            [RECENT_RUNS],
        ).fetchall()
    rows = [html.Li(f"{row['agent_slug']}: {render_agreement(row)}") for row in found]
    controls = [
        html.Li(f"{row['agent_slug']} (run {ui.short(row['run_id'])}, "
                f"{ui.when(row['finished_at'])}): {render_agreement(row)}")
        for row in control
    ]  # fmt: skip
    sheets = [
        html.Li([
            html.A(f"labels-{ui.short(run_id)}.csv", href=f"/labels.csv?run={run_id}",
                   download=f"labels-{ui.short(run_id)}.csv"),
            f" {ui.when(finished)} · {agent} {version}",
        ])
        for run_id, finished, agent, version in runs
    ]  # fmt: skip
    return html.Div(
        [
            html.H2("Judges"),
            _card("Agreement with people", rows, "judge-agreement",
                  "No human labels yet: download a run's labelling sheet below, fill in "
                  "human_passed (pass/fail) and/or human_score (0-1), then run "
                  "`holodeck labels import FILE.csv`."),
            _card("Judge-control set against people (each agent's latest run)", controls,
                  "control-agreement", "No labelled control rows: give rows of "
                  "evaluations.judge_control a human: {metric: {passed: true, score: 0.9}} entry."),
            html.Div(
                [html.H3("Labelling sheets"), html.Ul(sheets, id="labelling-sheets")],
                className="card",
            ),
        ],
        className="page",
        id="judges-page",
    )  # fmt: skip


def _card(title: str, items: list[Any], list_id: str, empty: str) -> html.Div:
    if not items:
        return html.Div([html.H3(title), html.P(empty, className="muted")], className="card")
    unit = html.P(AGREEMENT_UNIT.capitalize() + ".", className="muted")
    return html.Div([html.H3(title), html.Ul(items, id=list_id), unit], className="card")


def labels_csv(db: History, search: str) -> flask.Response:
    """A run's labelling sheet: its cases, responses and judge verdicts, blanks to fill."""
    ref = first(parse_query(search), "run")
    try:
        if not ref:
            raise PageError("No run", "The link names no run: use /labels.csv?run=RUN_ID.")
        with connect(db) as con:
            run_id = resolve(con, ref)
            sheet: list[tuple[Any, ...]] = labelling_sheet(con, run_id)
    except PageError as exc:
        return flask.Response(f"{exc.title}: {exc.message}\n", status=400, mimetype="text/plain")
    return flask.Response(
        csv_text(SHEET_COLUMNS, sheet),
        mimetype="text/csv",
        headers={"Content-Disposition": f"attachment; filename=labels-{run_id[:12]}.csv"},
    )


def register(app: Dash, db: History) -> None:
    app.server.add_url_rule(
        "/labels.csv", "labels_csv", lambda: labels_csv(db, flask.request.query_string.decode())
    )
