"""Content-addressed cache of conversions, under ``Project.file_cache_dir``.

Layout: ``<root>/<key[:2]>/<key>.json`` holds one :class:`CacheEntry`; ``<root>/downloads/``
holds downloaded files (see :mod:`holodeck_core.files.download`). Only successful conversions
are stored: an error may be transient (a timeout, a busy machine), so it is retried next time.
Entries are written atomically, so parallel runs (Dagster steps) can share one cache."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from datetime import UTC, datetime
from functools import lru_cache
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from holodeck_core.models.base import StrictModel
from holodeck_core.models.test_case import FileInput

FORMAT_VERSION = "2"
"""Our own output format (slide renumbering, Excel tables, PDFs through HoloDeck's heading
extractor since 2, ...). Bump it when it changes."""

_CONVERTER_PACKAGES = ("markitdown", "pdfminer.six", "pypdfium2", "python-pptx", "openpyxl")

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def converter_version() -> str:
    """``markitdown==0.1.9;pypdfium2==…;…;holodeck-files==1``: part of every cache key, so an
    upgrade of any library that shapes the Markdown invalidates old entries."""
    parts = []
    for package in _CONVERTER_PACKAGES:
        try:
            parts.append(f"{package}=={importlib_metadata.version(package)}")
        except importlib_metadata.PackageNotFoundError:
            parts.append(f"{package}==missing")
    parts.append(f"holodeck-files=={FORMAT_VERSION}")
    return ";".join(parts)


def normalized_pages(pages: list[int] | None) -> list[int] | None:
    """Pages in document order without repeats: ``[3, 1, 3]`` selects the same as ``[1, 3]``."""
    return sorted(set(pages)) if pages else None


def cache_key(source: str, file: FileInput) -> str:
    """The key of a conversion: ``source`` is ``sha256:<hex of the bytes>`` for a local file or
    ``url:<url>`` for a remote one, plus everything that selects or shapes the output."""
    payload: dict[str, object] = {
        "source": source,
        "type": file.type,
        "pages": normalized_pages(file.pages),
        "sheet": file.sheet,
        "range": file.range.upper() if file.range else None,
        "converter": converter_version(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class CacheEntry(StrictModel):
    key: str
    converter_version: str
    markdown: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: str


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so a reader sees the old file or the whole new one, never a
    part: a temporary file in the same folder, fsync, then an atomic rename
    (``os.replace``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp_name).replace(path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


class ResultCache:
    """Conversions by key. A damaged or unreadable entry counts as a miss."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> CacheEntry | None:
        path = self.path_for(key)
        try:
            entry = CacheEntry.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValidationError) as exc:
            log.warning("ignoring unreadable file cache entry %s: %s", path, exc)
            return None
        return entry if entry.key == key else None

    def put(self, key: str, markdown: str, metadata: dict[str, Any]) -> None:
        """Store a conversion; a failed write is logged, never raised (the cache is optional)."""
        entry = CacheEntry(
            key=key,
            converter_version=converter_version(),
            markdown=markdown,
            metadata=metadata,
            created_at=datetime.now(UTC).isoformat(),
        )
        try:
            atomic_write(self.path_for(key), entry.model_dump_json().encode())
        except OSError as exc:
            log.warning("could not write file cache entry %s: %s", self.path_for(key), exc)
