"""Long texts on a page (docs/agent-yaml.md): a response, an input or a tool result of any
length comes back from the history, but a page shows at most
:data:`~holodeck_core.defaults.MAX_SHOWN_TEXT_CHARS` of it (a 100 MB response crashed the
browser's tab) and a "show all" link to the whole text as plain text, served from the
history by ``/text``."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import flask
from dash import Dash, html

from holodeck_core.dashboard.data import PageError, connect
from holodeck_core.defaults import MAX_SHOWN_TEXT_CHARS
from holodeck_core.history.store import History

CASE_FIELDS = frozenset({"agent_response", "test_input"})
"""The case texts ``/text`` serves (columns of ``test_results``)."""


def shown(text: str, href: str | None = None) -> Any:
    """``text`` itself, or its start, how much is left out and where the rest is."""
    if len(text) <= MAX_SHOWN_TEXT_CHARS:
        return text
    note = f"… {MAX_SHOWN_TEXT_CHARS:,} of {len(text):,} characters shown"
    rest: list[Any] = (
        [" · ", html.A("show all", href=href, target="_blank", className="show-all")]
        if href
        else [" (the whole text is in the run's EvalRun file)"]
    )
    return [text[:MAX_SHOWN_TEXT_CHARS], html.Div([note, *rest], className="muted truncated")]


def case_text_href(run_id: str, case_id: str, field: str) -> str:
    return "/text?" + urlencode({"run": run_id, "case": case_id, "field": field})


def register(app: Dash, db: History) -> None:
    app.server.add_url_rule("/text", "case_text", lambda: case_text(db))


def case_text(db: History) -> flask.Response:
    """One case's whole text as plain text (never HTML: it is data from outside)."""
    args = flask.request.args
    field = args.get("field", "")
    if field not in CASE_FIELDS:
        return _plain(f"field must be one of {', '.join(sorted(CASE_FIELDS))}\n", 400)
    try:
        with connect(db) as con:
            row = con.execute(
                f"SELECT {field} FROM test_results WHERE run_id = ? AND case_id = ?",  # known
                [args.get("run", ""), args.get("case", "")],
            ).fetchone()
    except PageError as exc:
        return _plain(f"{exc}\n", 404)
    if row is None:
        return _plain("no such case in the history\n", 404)
    return _plain(row[0] or "", 200)


def _plain(text: str, status: int) -> flask.Response:
    response = flask.Response(text, status=status, mimetype="text/plain")
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response
