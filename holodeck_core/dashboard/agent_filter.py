"""The agent filter of the Explorer, Compare and Matrix pages: a dropdown whose choice opens
the page for that agent (``?agent=NAME``); the Summary's own filters include it too."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from dash import Dash, Input, Output, State, dcc, html, no_update

PAGES = ("explorer", "compare", "matrix")
"""The pages with this filter; each dropdown's id is ``{page}-agent``."""


def href(page: str, agent: str, **more: str) -> str:
    """The page for one agent (and, for Explorer, one configuration)."""
    return f"/{page}?{urlencode({'agent': agent} | {k: v for k, v in more.items() if v})}"


def dropdown(page: str, agents: list[str], chosen: str) -> html.Div:
    """An agent dropdown showing ``chosen``; choosing another opens the page for it."""
    return html.Div(
        [html.Label("Agent", htmlFor=f"{page}-agent"),
         dcc.Store(id=f"{page}-agent-shown", data=chosen),
         dcc.Dropdown(id=f"{page}-agent", options=[{"label": a, "value": a} for a in agents],
                      value=chosen, clearable=False)],
        className="agent-filter",
    )  # fmt: skip


def register(app: Dash) -> None:
    for page in PAGES:
        _register(app, page)


def _register(app: Dash, page: str) -> None:
    @app.callback(
        Output("url", "href", allow_duplicate=True),
        Input(f"{page}-agent", "value"),
        State(f"{page}-agent-shown", "data"),
        prevent_initial_call=True,
    )
    def _choose(agent: str | None, shown: str | None) -> Any:
        return no_update if not agent or agent == shown else href(page, agent)
