"""The resume journal (DESIGN §6.9): finished cases, appended and fsynced as they complete.

``<HOLODECK_HOME>/journal/<agent slug>/<suite fingerprint>.jsonl``, local disk only. A run
reuses entries whose case fingerprint matches; only cases without an error are written. A
run that finishes with no transient error closes the journal, so the next run starts fresh.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import BinaryIO

from pydantic import ValidationError

from holodeck_core.naming import slugify
from holodeck_core.redaction import redact
from holodeck_core.runner.case_run import CaseRun


class Journal:
    def __init__(
        self,
        root: Path,
        agent_name: str,
        suite_fingerprint: str,
        secrets: frozenset[str] = frozenset(),
    ) -> None:
        self.path = root / slugify(agent_name) / f"{suite_fingerprint}.jsonl"
        self.secrets = secrets
        self._lock = threading.Lock()

    def load(self) -> dict[tuple[str, int], CaseRun]:
        """Entries of the open journal by case fingerprint and trial. A torn last line (a
        crash while writing) is ignored."""
        if not self.path.is_file():
            return {}
        entries: dict[tuple[str, int], CaseRun] = {}
        for line in self.path.read_bytes().splitlines():
            try:
                run = CaseRun.model_validate_json(line)
            except (ValidationError, UnicodeDecodeError):
                continue  # a line torn by a crash: that case simply runs again
            entries[run.fingerprint, run.trial] = run
        return entries

    def append(self, run: CaseRun) -> None:
        """Append one finished case (redacted: the journal is on disk too) and fsync."""
        if run.error is not None:
            return
        line = redact(run, self.secrets).model_dump_json() + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a+b") as handle:
                if handle.tell() and not _ends_with_newline(handle):
                    handle.write(b"\n")  # after a torn line, start a fresh one
                handle.write(line.encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())

    def close(self) -> None:
        """The run finished: keep the entries as ``.done`` for inspection, start fresh next."""
        if self.path.exists():
            self.path.replace(self.path.with_suffix(".jsonl.done"))

    def discard(self) -> None:
        """``--fresh``: set the open journal aside without reusing it."""
        if self.path.exists():
            self.path.replace(self.path.with_suffix(".jsonl.discarded"))


def _ends_with_newline(handle: BinaryIO) -> bool:
    handle.seek(-1, os.SEEK_END)
    return handle.read(1) == b"\n"
