"""Writing an EvalRun to ``<agent dir>/results/<slug>/<timestamp>.json`` (seed 003).

The file is written atomically and never overwrites: a name that is taken gets a ``-<4 hex>``
suffix. It is written before any optional report is rendered, so a report that fails to
render never loses the run."""

from __future__ import annotations

import os
import secrets
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.config.project import results_dir
from holodeck_core.models import EvalRun

if TYPE_CHECKING:
    from upath import UPath


def timestamp_slug(timestamp: str) -> str:
    """``2026-04-18T14:22:09.812Z`` → ``2026-04-18T14-22-09.812Z``, normalized to ms."""
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00")).astimezone(UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z").replace(":", "-")


def write_new_file(folder: Path, stem: str, text: str) -> Path:
    """Atomically create ``<stem>.json`` (or ``<stem>-<hex>.json`` if taken) holding ``text``."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        name = f"{stem}.json"
        while True:
            try:
                os.link(tmp, folder / name)
                return folder / name
            except FileExistsError:
                name = f"{stem}-{secrets.token_hex(2)}.json"
    finally:
        Path(tmp).unlink(missing_ok=True)


def write_new_object(folder: UPath, stem: str, text: str) -> UPath:
    """:func:`write_new_file` on object storage: one conditional PUT (``If-None-Match: *``,
    which S3 honours atomically) to ``<stem>.json``; a name another writer holds already
    (the PUT refused, ``FileExistsError``) gets a ``-<4 hex>`` suffix, so two writers of the
    same millisecond never overwrite each other."""
    data = text.encode("utf-8")
    name = f"{stem}.json"
    while True:
        target = folder / name
        try:
            with target.fs.open(target.path, "xb") as handle:
                handle.write(data)
            return target
        except FileExistsError:
            name = f"{stem}-{secrets.token_hex(2)}.json"


def write_eval_run(run: EvalRun, agent_file: Path) -> Path | UPath:
    folder = results_dir(agent_file, run.report.agent_name)
    stem = timestamp_slug(run.report.timestamp)
    if isinstance(folder, Path):
        return write_new_file(folder, stem, run.to_json())
    return write_new_object(folder, stem, run.to_json())
