"""The one resolver of where the history lives (docs/architecture.md): every reader and writer (the
CLI's ``--db``/``--lake``, ``holodeck plan``, the dashboard, rescore, the Dagster resources
and the demo) asks here, so a configured lake is honoured everywhere or nowhere."""

from __future__ import annotations

from pathlib import Path

from holodeck_core import defaults
from holodeck_core.config.project import Project
from holodeck_core.history import ducklake
from holodeck_core.history.ducklake import DuckLake
from holodeck_core.history.store import History, writer


def resolve_history(
    project: Project | None = None,
    *,
    db: str | Path | None = None,
    lake: str | None = None,
) -> History:
    """An explicit ``lake`` URL, else an explicit ``db`` file, else the project's history
    (``HOLODECK_HISTORY_URL``/``history_url``, else ``HOLODECK_HISTORY_DB``/``history_db``,
    else ``.holodeck/history.duckdb``); ``project`` is found from the working directory
    when not given."""
    if lake:
        return DuckLake.parse(lake)
    if db is not None:
        return Path(db).expanduser()
    return project_history(project or Project.discover())


def project_history(project: Project) -> History:
    """The project's history: its DuckLake when a URL is set, else its DuckDB file."""
    url = project.history_url
    return DuckLake.parse(url) if url else project.history_db


def history_at(where: str) -> History:
    """A history named on the command line (``history sync --to/--from``): a ``.duckdb`` file,
    else a DuckLake URL (:meth:`DuckLake.parse`)."""
    if where.endswith(".duckdb"):
        return Path(where).expanduser()
    return DuckLake.parse(where)


def maintain(
    history: History,
    *,
    lock_timeout: float | None = None,
    grace_s: float = defaults.MAINTAIN_GRACE_S,
) -> str:
    """``holodeck history maintain``: what was done, in words (``grace_s``: a lake's files
    and snapshots younger than this are kept)."""
    if isinstance(history, DuckLake):
        done = ducklake.maintain(history, grace_s=grace_s)
        return (
            f"{history}: {done['merged']} file(s) merged, {done['deleted']} unreferenced "
            "file(s) deleted"
        )
    with writer(history, timeout_s=lock_timeout) as con:
        con.execute("CHECKPOINT")
    return f"{history}: checkpointed"
