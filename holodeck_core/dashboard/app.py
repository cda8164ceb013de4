"""The Dash app: a URL router over the three pages, and the error page for bad input.

Each page is rendered on the server from the URL (path + query string), inside one short
read-only connection; filters and pickers only rewrite the URL. So a link is the whole state,
and a reload shows what the history holds now.

It answers only requests whose ``Host`` header names a loopback name or the host it serves on:
a page elsewhere that rebinds its own DNS name to 127.0.0.1 (DNS rebinding) is refused, 421.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import flask
from dash import Dash, Input, Output, dcc, html

from holodeck_core.dashboard import (
    agent_filter,
    cache,
    compare_view,
    explorer_view,
    judges,
    long_text,
    matrix_view,
    scripts,
    summary,
    ui,
)
from holodeck_core.dashboard.data import PageError, parse_query
from holodeck_core.defaults import DASHBOARD_AGE_STEP_S
from holodeck_core.errors import HolodeckError
from holodeck_core.history.store import History

log = logging.getLogger("holodeck.dashboard")

PAGES = {"/": summary.page, "/summary": summary.page, "/explorer": explorer_view.page,
         "/compare": compare_view.page, "/matrix": matrix_view.page,
         "/judges": judges.page}  # fmt: skip
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""Names a browser on this machine reaches the dashboard by."""
CHARTED = {"/", "/summary", "/matrix"}
"""Pages whose first paint draws Plotly charts."""
AGED = {"/", "/summary", "/matrix"}
"""Pages that say how old runs are: kept no longer than :data:`DASHBOARD_AGE_STEP_S`."""


def render(db: History, pathname: str | None, search: str | None) -> Any:
    """The page for a URL; bad input becomes a notice (logged as one line, no traceback)."""
    path = (pathname or "/").rstrip("/") or "/"
    handler = PAGES.get(path)
    if handler is None:
        return ui.notice("Page not found", f"There is no page {pathname!r}: try the Summary.")
    try:
        age_step = int(time.time() // DASHBOARD_AGE_STEP_S) if path in AGED else 0
        return cache.cached(db, ("page", path, search or "", age_step),
                            lambda: handler(db, parse_query(search)))  # fmt: skip
    except PageError as exc:
        log.warning("%s: %s", exc.title, exc.message)
        return ui.notice(exc.title, exc.message)
    except HolodeckError as exc:
        log.warning("%s", exc)
        return ui.notice("Cannot show this page", str(exc))
    except Exception:  # a bug, not bad input: keep the evidence in the log, not on the page
        log.exception("rendering %s%s failed", pathname, search or "")
        return ui.notice(
            "Unexpected error",
            "The dashboard failed to render this page (a bug: please report it with the "
            "server's log). Other pages still work.",
        )


class _Dash(Dash):
    def interpolate_index(self, **kwargs: Any) -> Any:  # type: ignore[override]
        """Every page loads the basic Plotly bundle on first use; a charted page fetches it
        with the page and starts it with the first callback (see :mod:`.scripts`)."""
        charted = flask.request.path.rstrip("/") in {p.rstrip("/") for p in CHARTED}
        if charted:
            kwargs["metas"] = kwargs.get("metas", "") + scripts.PRELOAD
        kwargs["renderer"] = scripts.loader(charted) + kwargs.get("renderer", "")
        return super().interpolate_index(**kwargs)  # type: ignore[no-untyped-call]


def host_name(header: str) -> str | None:
    """The host a ``Host`` header names (``[::1]:8501`` → ``::1``), lower-case; None if it
    is not one."""
    try:
        return urlsplit(f"//{header}").hostname
    except ValueError:  # an unclosed bracket, a port that is not a number
        return None


def refuse_other_hosts(server: flask.Flask, hosts: Iterable[str]) -> None:
    """Every request to ``server`` whose ``Host`` is not one of ``hosts`` gets 421."""
    bracketed = (f"[{h}]" if ":" in h and not h.startswith("[") else h for h in hosts)  # IPv6
    allowed = {name for name in map(host_name, bracketed) if name}

    @server.before_request
    def _check_host() -> flask.Response | None:
        header = flask.request.headers.get("Host", "")
        if host_name(header) in allowed:
            return None
        return flask.Response(
            "421 Misdirected Request: this dashboard answers to "
            f"{', '.join(sorted(allowed))} only (--host names the one it serves on)\n",
            status=421,
            mimetype="text/plain",
        )


def create_app(db: History, host: str = LOOPBACK_HOSTS[0]) -> Dash:
    """The app over ``db``, served on ``host``."""
    app = _Dash(
        __name__,
        title="HoloDeck eval runs",
        update_title="",
        suppress_callback_exceptions=True,
        index_string=ui.INDEX,
        serve_locally=True,
        hooks={"request_pre": scripts.REQUEST_PRE},
    )
    app.layout = html.Div([
        dcc.Location(id="url", refresh="callback-nav"),
        html.Div([html.B("HoloDeck eval runs"), dcc.Link("Summary", href="/"),
                  dcc.Link("Explorer", href="/explorer"), dcc.Link("Compare", href="/compare"),
                  dcc.Link("Matrix", href="/matrix"),
                  dcc.Link("Judges", href="/judges"),
                  html.Span(str(db), className="db")], className="nav"),
        dcc.Loading(html.Div(id="page"), delay_show=300),
    ])  # fmt: skip

    @app.callback(Output("page", "children"), Input("url", "pathname"), Input("url", "search"))
    def _route(pathname: str | None, search: str | None) -> Any:
        return render(db, pathname, search)

    refuse_other_hosts(app.server, (*LOOPBACK_HOSTS, host))
    scripts.register(app.server)
    summary.register(app, db)
    judges.register(app, db)
    long_text.register(app, db)
    compare_view.register(app)
    agent_filter.register(app)
    return app
