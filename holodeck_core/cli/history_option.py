"""``--db``/``--lake``: how every command that reads the history is told which one, resolved
by the one resolver (:func:`holodeck_core.engine.store.open_history`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from holodeck_core.config.project import Project
    from holodeck_core.engine.store import History

DB_HELP = (
    "history database file (default: $HOLODECK_HISTORY_DB, else history_db in holodeck.yaml, "
    "else .holodeck/history.duckdb in the project root)"
)
LAKE_HELP = (
    "a DuckLake instead of the DuckDB file: FOLDER, ducklake:CATALOG_FILE[?data=DATA] or "
    "ducklake:postgresql://USER@HOST:PORT/DB?data=s3://BUCKET/PREFIX (docs/history.md; "
    "default: $HOLODECK_HISTORY_URL, else history_url in holodeck.yaml)"
)


def add_history_arguments(parser: argparse.ArgumentParser) -> None:
    """``--db PATH`` and ``--lake URL`` (a lake wins when both are given)."""
    parser.add_argument("--db", type=Path, metavar="PATH", help=DB_HELP)
    parser.add_argument("--lake", metavar="URL", help=LAKE_HELP)


def history_from(args: argparse.Namespace, project: Project | None = None) -> History:
    """The history the arguments name, else ``project``'s (found from the working directory
    when not given)."""
    from holodeck_core.engine.store import open_history

    return open_history(project, db=args.db, lake=args.lake)
