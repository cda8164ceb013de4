"""The judge cache (docs/architecture.md): one JSON file per judge answer under
``Project.judge_cache_dir`` (``.holodeck/cache/judge/``).

* **Key**: :func:`judge_cache_key` = sha256 of the judge model's identity (provider, name,
  temperature, max_tokens... but never the endpoint or the key), the judge prompt's
  ``id@version``, the rendered system and user texts (which hold the metric configuration
  that reaches the judge and every field the judge sees), whether log-probabilities were
  asked for, and :data:`CACHE_FORMAT`.
* **Only successes** are written: an error never reaches :meth:`JudgeCache.put`.
* **Several processes**: each entry is written to a temporary file in the same folder and
  renamed into place (``Path.replace``, an atomic rename), so a reader sees a whole entry or
  none; two writers of one key write equal content and the last rename wins. An unreadable
  entry is a miss (and is rewritten by the next success).
* **Bypass** (``--no-judge-cache``): ``JudgeCache(dir, enabled=False)`` reads and writes
  nothing; ``JudgeCache(None)`` is the same without a folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from holodeck_core.redaction import redact

CACHE_FORMAT = 1
"""Bump when the shape of cached answers changes: old entries then stop matching."""


def judge_cache_key(
    model_identity: Mapping[str, Any],
    prompt_label: str,
    system: str,
    user: str,
    *,
    top_logprobs: int,
) -> str:
    """The cache key of one judge question (see the module docstring)."""
    material = {
        "format": CACHE_FORMAT,
        "judge": dict(model_identity),
        "prompt": prompt_label,
        "system": system,
        "user": user,
        "top_logprobs": top_logprobs,
    }
    canonical = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0
    unreadable: int = 0


class JudgeCache:
    """File-per-entry JSON cache of judge answers, safe to share between processes."""

    def __init__(self, directory: Path | str | None, *, enabled: bool = True) -> None:
        self.directory = Path(directory) if directory is not None else None
        self.enabled = enabled and self.directory is not None
        self.stats = CacheStats()

    def path_for(self, key: str) -> Path:
        if self.directory is None:
            raise ValueError("this judge cache has no directory")
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached answer for ``key``, or ``None`` (counted as a miss)."""
        if not self.enabled:
            return None
        path = self.path_for(key)
        try:
            entry = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            self.stats.misses += 1
            return None
        except (OSError, ValueError):
            self.stats.unreadable += 1
            self.stats.misses += 1
            return None
        value = entry.get("value") if isinstance(entry, dict) else None
        if not isinstance(value, dict) or entry.get("key") != key:
            self.stats.unreadable += 1
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return value

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        """Store a successful answer atomically (a no-op when the cache is disabled)."""
        if not self.enabled:
            return
        path = self.path_for(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"key": key, "value": redact(dict(value))}, ensure_ascii=False)
        handle, temp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(data)
            Path(temp).replace(path)
        except BaseException:
            with contextlib.suppress(OSError):
                Path(temp).unlink()
            raise
        self.stats.writes += 1
