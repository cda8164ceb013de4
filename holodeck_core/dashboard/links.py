"""Deep links into the dashboard. Every view's state is in its URL, so these are plain strings
(also used by the Dagster ``report_summary`` metadata; no Dash import here)."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlencode


def explorer_href(run_id: str, case_id: str | None = None, base: str = "") -> str:
    query = {"run": run_id} | ({"case": case_id} if case_id else {})
    return f"{base.rstrip('/')}/explorer?{urlencode(query)}"


def compare_href(run_ids: Sequence[str], baseline: str | None = None, base: str = "") -> str:
    query = {"runs": ",".join(run_ids)} | ({"baseline": baseline} if baseline else {})
    return f"{base.rstrip('/')}/compare?{urlencode(query)}"
