"""Deep links into the dashboard. Every view's state is in its URL, so these are plain strings
(also used by the Dagster ``report_summary`` metadata; no Dash import here)."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlencode


def explorer_href(run_id: str, case_id: str | None = None, base: str = "") -> str:
    query = {"run": run_id} | ({"case": case_id} if case_id else {})
    return f"{base.rstrip('/')}/explorer?{urlencode(query)}"


def compare_href(run_ids: Sequence[str], baseline: str | None = None, base: str = "") -> str:
    """The first run is the baseline unless ``baseline`` names another."""
    first = run_ids[0] if run_ids else None
    query = {"runs": ",".join(run_ids)} | (
        {"baseline": baseline} if baseline and baseline != first else {}
    )
    return f"{base.rstrip('/')}/compare?{urlencode(query)}"


def previous_href(run_id: str, base: str = "") -> str:
    """Compare a run with the previous run of its configuration (agent, prompt version, model
    candidate), resolved when the page is opened (the run need not be in the history yet)."""
    return f"{base.rstrip('/')}/compare?{urlencode({'previous_of': run_id})}"


def dashboard_links(base: str, run_id: str) -> dict[str, str]:
    """The deep links Dagster's ``report_summary`` metadata carries."""
    return {
        "dashboard_run": explorer_href(run_id, base=base),
        "dashboard_compare_previous": previous_href(run_id, base=base),
    }
