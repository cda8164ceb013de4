"""The agent filter of the Explorer, Compare, Matrix and Judges pages: a dropdown whose choice
opens the page for that agent (``?agent=NAME``); the Summary's own filters include it too."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from dash import Dash, Input, Output, State, dcc, html, no_update

PAGES = ("explorer", "compare", "matrix", "judges")
"""The pages with this filter; each dropdown's id is ``{page}-agent``."""


def href(page: str, agent: str, **more: str) -> str:
    """The page for one agent (and, for Explorer, one configuration); every agent's without."""
    narrowed = {k: v for k, v in more.items() if v}
    query = urlencode({"agent": agent} | narrowed if agent else {})
    return f"/{page}?{query}" if query else f"/{page}"


def dropdown(page: str, agents: list[str], chosen: str | None) -> html.Div:
    """An agent dropdown showing ``chosen`` (None: every agent, and the page can show them
    all); choosing another opens the page for it."""
    return html.Div(
        [html.Label("Agent", htmlFor=f"{page}-agent"),
         dcc.Store(id=f"{page}-agent-shown", data=chosen),
         dcc.Dropdown(id=f"{page}-agent", options=[{"label": a, "value": a} for a in agents],
                      value=chosen, clearable=chosen is None, placeholder="all agents")],
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
        return no_update if agent == shown else href(page, agent or "")
