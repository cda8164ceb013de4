"""A built index: the chunks and their vectors, stored once per input set (docs/agent-yaml.md).

The key is sha256 of every input that changes the result: each source file's content hash,
the chunking and record options, the embeddings model and dimensions (and, where used, the
contextual-summary model). ``HOLODECK_HOME/cache/indexes/<key>/`` holds ``chunks.json`` and
``vectors.npy``; it is written under a temporary name and renamed, so a reader sees a whole
index or none, and of two racing builders the second simply discards its copy."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from holodeck_core.tools.retrieval.embeddings import Vectors

INDEX_FORMAT = 1


@dataclass(frozen=True)
class Chunk:
    """One searchable unit. ``text`` is what the model and the RAG metrics read;
    ``embed_text`` what was embedded (the text, or a contextual summary plus the text)."""

    id: str
    text: str
    source: str
    embed_text: str = ""
    parent_chain: tuple[str, ...] = ()
    section_id: str = ""
    record_id: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def embedded(self) -> str:
        return self.embed_text or self.text


def index_key(inputs: dict[str, Any]) -> str:
    payload = json.dumps({"format": INDEX_FORMAT, **inputs}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass
class Index:
    key: str
    chunks: list[Chunk]
    vectors: Vectors

    @staticmethod
    def load(root: Path, key: str) -> Index | None:
        """The stored index, or None when there is none (or a damaged one)."""
        folder = root / key
        try:
            rows = json.loads((folder / "chunks.json").read_text(encoding="utf-8"))
            vectors = np.load(folder / "vectors.npy", allow_pickle=False)
        except (OSError, ValueError):
            return None
        chunks = [Chunk(**{**row, "parent_chain": tuple(row["parent_chain"])}) for row in rows]
        if vectors.shape[0] != len(chunks):
            return None
        return Index(key, chunks, vectors.astype(np.float32))

    def save(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        final = root / self.key
        if final.exists():
            return
        scratch = Path(tempfile.mkdtemp(dir=root, prefix=f".{self.key[:16]}.", suffix=".tmp"))
        try:
            (scratch / "chunks.json").write_text(
                json.dumps([asdict(c) for c in self.chunks], ensure_ascii=False),
                encoding="utf-8",
            )
            with (scratch / "vectors.npy").open("wb") as handle:
                np.save(handle, self.vectors, allow_pickle=False)
                handle.flush()
                os.fsync(handle.fileno())
            try:
                scratch.rename(final)
            except OSError:  # another process renamed its copy first: same inputs, same index
                if not final.exists():
                    raise
        finally:
            if scratch.exists():
                shutil.rmtree(scratch, ignore_errors=True)
