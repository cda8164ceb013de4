"""Run history in DuckDB: a documented schema, safe concurrent ingest, views and queries.

Modules (import the one you need; this package imports nothing heavy on its own):

- :mod:`~holodeck_core.history.schema`: the tables, views and macros of ``sql/*.sql``.
- :mod:`~holodeck_core.history.store`: connections with bounded lock retry; a file or a lake.
- :mod:`~holodeck_core.history.ducklake`: the history on DuckLake (docs/history.md).
- :mod:`~holodeck_core.history.transfer`: ``sync --to/--from``.
- :mod:`~holodeck_core.history.rebuild`: ``rebuild``, an earlier release's history anew.
- :mod:`~holodeck_core.history.rows`: an EvalRun flattened into Arrow tables.
- :mod:`~holodeck_core.history.ingest`: idempotent ingest, ``sync`` of a results folder.
- :mod:`~holodeck_core.history.holodeck_import`: HoloDeck 0.7.1 files in, with inference.
- :mod:`~holodeck_core.history.holodeck_export`: HoloDeck 0.7.1 files out.
- :mod:`~holodeck_core.history.export`: ``export --format holodeck|json|parquet``.
- :mod:`~holodeck_core.history.queries`: run lookup, ``compare``, safe ``sql``.
- :mod:`~holodeck_core.cli.history`: the ``holodeck history`` commands.

The schema reference is ``docs/history.md``.
"""
