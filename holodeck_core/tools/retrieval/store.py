"""A small on-disk key/value cache (SQLite in WAL mode) shared by processes.

Embeddings are cached per text and LLM steps (contextual summaries, reranks) per prompt. Two
partitions building the same index at once read and write the same file safely; a racing
writer of the same key writes the same value (``INSERT OR IGNORE``), so neither pays twice
for what the other already stored."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

_BATCH = 500  # SQLite's default limit on host parameters is 999


class KeyValueStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, timeout=60, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB)")
        self._db.commit()

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        with self._lock:
            for start in range(0, len(keys), _BATCH):
                part = keys[start : start + _BATCH]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT key, value FROM kv WHERE key IN ({marks})", part
                ).fetchall()
                found.update((key, bytes(value)) for key, value in rows)
        return found

    def get(self, key: str) -> bytes | None:
        return self.get_many([key]).get(key)

    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        with self._lock:
            self._db.executemany("INSERT OR IGNORE INTO kv (key, value) VALUES (?, ?)", items)
            self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()
