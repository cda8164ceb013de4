"""The dashboard's plotly.js: the *basic* bundle, loaded on first use and cached for a year.

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
``window.Plotly = Plotly`` then replaces the property with Plotly itself. A charted page reads
it as soon as the renderer has sent its requests, with a ``<link rel=preload>`` in the head,
so the file is fetched with the page and run while the server renders the page; the other
pages load it only if a chart mounts (a link to the Summary).
"""

from __future__ import annotations

from pathlib import Path

import flask

VERSION = "4.1.1"
"""The plotly.js release of ``vendor/plotly-basic.min.js``: the plotly wheel's own."""
BUNDLE = Path(__file__).with_name("vendor") / "plotly-basic.min.js"
URL = f"/_holodeck/plotly-basic-{VERSION}.min.js"
"""Versioned, so a browser may keep it for a year without asking again."""
YEAR_S = 365 * 24 * 3600
PRELOAD = f'<link rel="preload" as="script" href="{URL}">'
_LOADER = (
    "<script>(function(){var loading=null;function load(){return loading||(loading=new "
    "Promise(function(ok,fail){var s=document.createElement('script');"
    f"s.src='{URL}';s.onload=function(){{ok(window.Plotly)}};s.onerror=fail;"
    "document.head.appendChild(s)}))}"
    "Object.defineProperty(window,'Plotly',{configurable:true,get:load,set:function(p){"
    "Object.defineProperty(window,'Plotly',{value:p,writable:true,configurable:true})}});"
    "%s})();</script>"
)


def loader(start: bool) -> str:
    """The script that makes ``window.Plotly`` load the bundle; ``start``: load it now."""
    return _LOADER % ("load();" if start else "")


def register(server: flask.Flask) -> None:
    """Serve the bundle at :data:`URL`, cacheable for a year (the URL names its version)."""

    @server.route(URL)
    def _plotly_bundle() -> flask.Response:
        response = flask.send_file(BUNDLE, mimetype="text/javascript", max_age=YEAR_S)
        response.cache_control.immutable = True
        return response
