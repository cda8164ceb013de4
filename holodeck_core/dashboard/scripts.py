"""What a page loads beyond Dash's own scripts: plotly.js's *basic* bundle, on first use and
cached for a year, and on a charted page Plotly and Dash's chunks fetched while the server
renders the page.

Dash's Graph loads the full plotly.js from the plotly wheel (4.8 MB: every trace type, maps,
3-D, WebGL) unless ``window.Plotly`` is set. The dashboard draws scatter traces only, so every
page sets ``window.Plotly`` to a loader of plotly.js's own *basic* bundle instead (npm
``plotly.js-basic-dist-min``: the scatter, bar and pie traces with every layout feature; 1.2
MB), of the same plotly.js release as the wheel's (``tests/test_dashboard_assets.py``). A
brand-new browser spent most of a Summary's first paint running the full bundle (1.4 of 3.1 s
of main-thread work at load 5; ``docs/benchmarks.md``). ``make plotly-bundle`` refreshes
``vendor/`` from npm after a plotly upgrade.

The loader is a property: reading ``window.Plotly`` starts the script once and returns a
promise of Plotly (Dash's Graph waits on it with ``Promise.resolve``); the bundle's own
``window.Plotly = Plotly`` then replaces the property with Plotly itself. A charted page
fetches the bundle with the page (``<link rel=preload>`` in the head) and runs it once the
renderer has sent its first callback request (Dash's ``request_pre`` hook), so the server
renders the page while the browser runs Plotly, instead of after; at that moment it also
fetches the chunks the page's components load only once they mount (:data:`CHUNKS`). Other
pages load Plotly only if a chart mounts (a link to the Summary).
"""

from __future__ import annotations

import json
from pathlib import Path

import flask

VERSION = "4.1.1"
"""The plotly.js release of ``vendor/plotly-basic.min.js``: the plotly wheel's own."""
BUNDLE = Path(__file__).with_name("vendor") / "plotly-basic.min.js"
URL = f"/_holodeck/plotly-basic-{VERSION}.min.js"
"""Versioned, so a browser may keep it for a year without asking again."""
YEAR_S = 365 * 24 * 3600
PRELOAD = f'<link rel="preload" as="script" href="{URL}">'
CHUNKS = tuple(
    f"/_dash-component-suites/dash/{chunk}.js"
    for chunk in ("dcc/async-dropdown", "dcc/async-datepicker", "dcc/async-graph",
                  "dash_table/async-table", "dash_table/async-highlight")
)  # fmt: skip
"""The Summary's filters, charts and runs table, which Dash loads only once they mount (a
browser test checks each is requested once, by the page)."""
REQUEST_PRE = "function(){window.holodeckRequestPre()}"
"""Dash's ``request_pre`` hook (``Dash(hooks=…)``): called as each callback request is sent."""
_LOADER = (
    "<script>(function(){var loading=null;function load(){return loading||(loading=new "
    "Promise(function(ok,fail){var s=document.createElement('script');"
    f"s.src='{URL}';s.onload=function(){{ok(window.Plotly)}};s.onerror=fail;"
    "document.head.appendChild(s)}))}"
    "Object.defineProperty(window,'Plotly',{configurable:true,get:load,set:function(p){"
    "Object.defineProperty(window,'Plotly',{value:p,writable:true,configurable:true})}});"
    "var early=%s;window.holodeckRequestPre=function(){if(!early)return;"
    "early.forEach(function(u){var l=document.createElement('link');l.rel='preload';"
    "l.as='script';l.href=u;document.head.appendChild(l)});early=null;load()}})();</script>"
)


def loader(charted: bool) -> str:
    """The script that makes ``window.Plotly`` load the bundle and, on a charted page, starts
    it and the chunks with the first callback request; it goes before Dash's renderer."""
    return _LOADER % (json.dumps(CHUNKS, separators=(",", ":")) if charted else "null")


def register(server: flask.Flask) -> None:
    """Serve the bundle at :data:`URL`, cacheable for a year (the URL names its version)."""

    @server.route(URL)
    def _plotly_bundle() -> flask.Response:
        response = flask.send_file(BUNDLE, mimetype="text/javascript", max_age=YEAR_S)
        response.cache_control.immutable = True
        return response
