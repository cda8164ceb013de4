"""What a brand-new browser fetches for the dashboard: plotly.js's basic bundle instead of the
full one, of the plotly wheel's release, served cacheable for a year, preloaded by the charted
pages only (docs/benchmarks.md: most of a cold Summary's first paint was the full bundle)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from plotly.offline import get_plotlyjs_version

from holodeck_core.dashboard import app as dashboard_app
from holodeck_core.dashboard import scripts
from tests.history_helpers import day, ingest_runs, make_run

PRELOAD = f'<link rel="preload" as="script" href="{scripts.URL}">'


@pytest.fixture
def client(tmp_path: Path) -> FlaskClient:
    db = tmp_path / "history.duckdb"
    ingest_runs(db, [make_run("PPPF", day(1), run_id="a1")])
    return dashboard_app.create_app(db).server.test_client()


def test_the_bundle_is_plotly_js_basic_of_the_wheels_release() -> None:
    head = scripts.BUNDLE.read_text(encoding="utf-8")[:200]
    named = re.search(r"plotly\.js \(basic - minified\) v(\S+)", head)
    assert named and named[1] == scripts.VERSION
    # a plotly upgrade changes the release Dash would load: `make plotly-bundle` follows it
    assert get_plotlyjs_version() == scripts.VERSION
    assert (scripts.BUNDLE.parent / "plotly-basic.LICENSE.txt").is_file()


def test_the_bundle_is_served_for_a_year_under_a_versioned_url(client: FlaskClient) -> None:
    response = client.get(scripts.URL)
    assert response.status_code == 200
    assert response.mimetype == "text/javascript"
    assert response.get_data() == scripts.BUNDLE.read_bytes()
    cache = response.cache_control
    assert cache.max_age == 365 * 24 * 3600 and cache.public and cache.immutable
    assert scripts.VERSION in scripts.URL


PAGES = [("/", True), ("/summary", True), ("/explorer", False), ("/compare", False)]


@pytest.mark.parametrize(("path", "charted"), PAGES)
def test_charted_pages_preload_the_bundle_and_every_page_loads_it_on_first_use(
    client: FlaskClient, path: str, charted: bool
) -> None:
    page = client.get(path).get_data(as_text=True)
    head, body = page.split("</head>")
    assert (PRELOAD in head) is charted
    assert scripts.loader(charted) in body
    assert scripts.loader(not charted) not in body
    assert "plotly.min.js" not in page
