"""Histories an earlier release wrote (its numbered migrations, schema 13), as committed under
tests/fixtures/history_before/ (made by its ``make_fixture.py``): four runs, three of them
with their EvalRun file in ``results/``, and two human labels, a failed run and two
budget-ledger rows that only the history holds."""

from __future__ import annotations

import gzip
import shutil
import tarfile
from pathlib import Path

import duckdb

from holodeck_core.history.ducklake import DuckLake

FIXTURES = Path(__file__).parent / "fixtures" / "history_before"
RESULTS = FIXTURES / "results"
RUNS = ("r1", "r2", "r3", "r4")
FILE_ONLY_IN_HISTORY = "r4"


def before_file(folder: Path, name: str = "history.duckdb") -> Path:
    """The earlier release's DuckDB history, copied to ``folder / name``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with gzip.open(FIXTURES / "history.duckdb.gz", "rb") as packed, path.open("wb") as raw:
        shutil.copyfileobj(packed, raw)
    return path


def before_lake(folder: Path) -> DuckLake:
    """The earlier release's DuckLake (one folder), unpacked into ``folder / "lake"``; its
    catalog points at its data there (it was written elsewhere)."""
    with tarfile.open(FIXTURES / "lake.tar.gz") as packed:
        packed.extractall(folder, filter="data")
    lake = DuckLake.parse(str(folder / "lake"))
    con = duckdb.connect(lake.catalog)
    try:
        con.execute("UPDATE ducklake_metadata SET value = ? WHERE key = 'data_path'", [lake.data])
    finally:
        con.close()
    return lake
