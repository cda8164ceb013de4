"""Writing an EvalRun as two files (docs/holodeck-fidelity.md): our superset at
``<agent dir>/results/<slug>/holodeck-pipelines/<timestamp>.json`` first, then HoloDeck 0.7.1's
shape of it at ``results/<slug>/<timestamp>.json``, the file HoloDeck's loader and dashboard
read.

Each file is written atomically and never overwrites: a name taken in either folder gets a
``-<4 hex>`` suffix, the same for both, so a reader finds the superset of a HoloDeck file by
its name. Both are written before any optional report is rendered, so a report that fails to
render never loses the run."""

from __future__ import annotations

import os
import secrets
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pydantic_core

from holodeck_core.config import remote
from holodeck_core.config.project import SUPERSET_FOLDER, results_dir
from holodeck_core.history.holodeck_export import to_holodeck
from holodeck_core.models import EvalRun

if TYPE_CHECKING:
    from upath import UPath


def timestamp_slug(timestamp: str) -> str:
    """``2026-04-18T14:22:09.812Z`` → ``2026-04-18T14-22-09.812Z``, normalized to ms."""
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00")).astimezone(UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z").replace(":", "-")


def write_new_file(folder: Path, stem: str, text: str, *, also_free: Path | None = None) -> Path:
    """Atomically create ``<stem>.json`` (or ``<stem>-<hex>.json`` if taken, here or in
    ``also_free``) holding ``text``."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        name = f"{stem}.json"
        while True:
            if also_free is not None and (also_free / name).exists():
                name = f"{stem}-{secrets.token_hex(2)}.json"
                continue
            try:
                os.link(tmp, folder / name)
                return folder / name
            except FileExistsError:
                name = f"{stem}-{secrets.token_hex(2)}.json"
    finally:
        Path(tmp).unlink(missing_ok=True)


def write_new_object(
    folder: UPath, stem: str, text: str, *, also_free: UPath | None = None
) -> UPath:
    """:func:`write_new_file` on object storage: one conditional PUT (``If-None-Match: *``,
    which S3 honours atomically) to ``<stem>.json``; a name another writer holds already
    (the PUT refused, ``FileExistsError``), here or in ``also_free``, gets a ``-<4 hex>``
    suffix, so two writers of the same millisecond never overwrite each other."""
    data = text.encode("utf-8")
    name = f"{stem}.json"
    while True:
        target = folder / name
        if also_free is None or not (also_free / name).exists():
            try:
                with target.fs.open(target.path, "xb") as handle:
                    handle.write(data)
                return target
            except FileExistsError:
                pass
        name = f"{stem}-{secrets.token_hex(2)}.json"


def holodeck_json(run: EvalRun) -> str:
    """The HoloDeck 0.7.1 EvalRun document of ``run``, indented as HoloDeck indents its files.
    Encoded by pydantic's serializer, as the superset is (a float in its shortest form, ``1e-6``):
    ``json.dumps`` with an indent encodes in pure Python, 12x slower (docs/benchmarks.md)."""
    return pydantic_core.to_json(to_holodeck(run), indent=2).decode()


def write_eval_run(run: EvalRun, agent_file: Path) -> Path | UPath:
    """Write both files of ``run``; the superset's path (the run's source of truth). On
    object storage, what goes wrong reaching it is a :class:`HolodeckError` naming it."""
    folder = results_dir(agent_file, run.report.agent_name)
    stem = timestamp_slug(run.report.timestamp)
    if isinstance(folder, Path):
        superset = write_new_file(folder / SUPERSET_FOLDER, stem, run.to_json(), also_free=folder)
        write_new_file(folder, superset.stem, holodeck_json(run))
        return superset
    if remote.on_s3(str(folder)):
        remote.require_s3_credentials(str(folder))
    try:
        stored = write_new_object(folder / SUPERSET_FOLDER, stem, run.to_json(), also_free=folder)
        write_new_object(folder, stored.stem, holodeck_json(run))
    except Exception as exc:
        failure = remote.s3_failure(exc, str(folder))
        if failure is None:
            raise
        raise failure from None
    return stored
