"""``holodeck dashboard``: the eval-runs dashboard (Dash + Plotly) over the DuckDB history.

Data modules (:mod:`.data`, :mod:`.detail`, :mod:`.comparison`, :mod:`.stats`) query the
history through short read-only connections and return plain rows; view modules
(:mod:`.summary`, :mod:`.explorer`, :mod:`.compare`) turn rows into Dash components; :mod:`.app`
routes URLs (every view's state lives in the URL) and turns bad input into a page that says so.
Nothing here is imported by ``holodeck --help``: the CLI loads it only for the command.
"""
