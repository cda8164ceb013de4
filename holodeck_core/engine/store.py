"""Which history a command reads: the one ``--lake URL`` names, else ``--db PATH``, else the
project's (``HOLODECK_HISTORY_URL``/``history_url``, ``HOLODECK_HISTORY_DB``/``history_db``,
``.holodeck/history.duckdb``; docs/history.md)."""

from __future__ import annotations

from holodeck_core.history.backend import resolve_history as open_history
from holodeck_core.history.store import History

__all__ = ["History", "open_history"]
