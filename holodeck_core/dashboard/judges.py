"""The Judges page (docs/cli.md): how far each judge agrees with people (``v_judge_agreement``),
and each recent run's labelling sheet to download, fill in and bring back with ``holodeck
labels import``. The dashboard stays read-only (docs/dashboard.md): it offers the sheet, it stores
nothing."""

from __future__ import annotations

from typing import Any

import flask
from dash import Dash, html

from holodeck_core.dashboard import agent_filter, ui
from holodeck_core.dashboard.data import (
    PageError,
    agent_names,
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
    """Every agent's judges, or the agent's of ``?agent=NAME`` (the agent filter)."""
    agent = first(query, "agent")
    with connect(db) as con:
        require_runs(con, db)
        agents = agent_names(con)
        slugs = {
            str(s)
            for (s,) in con.execute(
                "SELECT DISTINCT agent_slug FROM eval_runs WHERE agent_name = ?", [agent]
            ).fetchall()
        }
        found = [row for row in agreement(con) if not agent or row["agent_slug"] in slugs]
        control = [
            row for row in control_agreement_rows(con) if not agent or row["agent_slug"] in slugs
        ]
        runs = con.execute(
            "SELECT run_id, finished_at, agent_name, prompt_version FROM eval_runs "
            "WHERE ? IS NULL OR agent_name = ? ORDER BY finished_at DESC, run_id DESC LIMIT ?",
            [agent, agent, RECENT_RUNS],
        ).fetchall()  # fmt: skip
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
            html.Div([agent_filter.dropdown("judges", agents, agent)], className="filters"),
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
