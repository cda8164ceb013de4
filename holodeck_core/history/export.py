"""``history export``: runs out of the history as HoloDeck 0.7.1 files, our EvalRun JSON, or
Parquet copies of the tables.

``holodeck`` and ``json`` are rebuilt from each run's EvalRun file (the source of truth; the
database keeps its path and sha256), so nothing is lost to flattening. ``parquet`` writes the
selected rows of every table, one file per table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from holodeck_core.config.project import location
from holodeck_core.errors import ConfigError, Problem
from holodeck_core.history import schema, store
from holodeck_core.history.holodeck_export import holodeck_file_name, to_holodeck, to_ours
from holodeck_core.history.holodeck_import import load_run_file
from holodeck_core.history.queries import resolve_run

ExportFormat = Literal["holodeck", "json", "parquet"]
FORMATS: tuple[ExportFormat, ...] = ("holodeck", "json", "parquet")


@dataclass
class ExportReport:
    written: list[Path] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def _selected(
    db_path: store.History,
    runs: list[str] | None,
    agent: str | None,
    prompt_version: str | None,
    lock_timeout: float | None,
    fmt: ExportFormat,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The selected runs' rows and, for Parquet, the table contents (read in one connection
    that is closed before anything is written)."""
    import pyarrow as pa

    tables: dict[str, pa.Table] = {}
    with store.reader(db_path, timeout_s=lock_timeout) as con:
        ids = [resolve_run(con, ref) for ref in runs] if runs else None
        cursor = con.execute(
            "SELECT run_id, agent_slug, source_path, file_sha256 FROM eval_runs "
            "WHERE (? IS NULL OR list_contains(?, run_id)) "
            "AND (? IS NULL OR agent_slug = ? OR agent_name = ?) "
            "AND (? IS NULL OR prompt_version = ?) ORDER BY finished_at, run_id",
            [ids, ids, agent, agent, agent, prompt_version, prompt_version],
        )
        columns = [d[0] for d in cursor.description or []]
        rows = [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]
        if fmt == "parquet" and rows:
            selected = [r["run_id"] for r in rows]
            for table in schema.TABLES:
                if table == "prompt_versions":
                    query = (
                        "SELECT p.* FROM prompt_versions p WHERE EXISTS (SELECT 1 FROM "
                        "eval_runs r WHERE list_contains(?, r.run_id) AND r.agent_slug = "
                        "p.agent_slug AND r.prompt_version = p.prompt_version)"
                    )
                else:
                    query = f"SELECT * FROM {table} WHERE list_contains(?, run_id)"
                tables[table] = con.sql(query, params=[selected]).to_arrow_table()
    return rows, tables


def export_runs(
    db_path: store.History,
    out_dir: Path,
    fmt: ExportFormat,
    *,
    runs: list[str] | None = None,
    agent: str | None = None,
    prompt_version: str | None = None,
    lock_timeout: float | None = None,
) -> ExportReport:
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    rows, tables = _selected(db_path, runs, agent, prompt_version, lock_timeout, fmt)
    if not rows:
        raise ConfigError("no runs match the selection; `holodeck history runs` lists them")
    out_dir.mkdir(parents=True, exist_ok=True)
    report = ExportReport()
    if fmt == "parquet":
        import pyarrow.parquet as pq

        for name, table in tables.items():
            target = out_dir / f"{name}.parquet"
            pq.write_table(table, target)
            report.written.append(target)
        return report
    for row in rows:
        source = row["source_path"]
        if not source or not location(source).is_file():
            report.problems.append(
                Problem(
                    file=str(source or row["run_id"]),
                    message=f"run {row['run_id'][:12]}: its EvalRun file is gone; restore it "
                    "(exports are rebuilt from the EvalRun files)",
                )
            )
            continue
        loaded = load_run_file(location(source))
        if loaded.run_id != row["run_id"]:
            report.problems.append(
                Problem(
                    file=source,
                    message=f"run {row['run_id'][:12]}: the file changed since it was ingested "
                    f"(it is now run {loaded.run_id[:12]})",
                )
            )
            continue
        document = to_holodeck(loaded.run) if fmt == "holodeck" else to_ours(loaded.run)
        folder = out_dir / row["agent_slug"]
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / holodeck_file_name(loaded.run)
        if target in report.written:
            target = target.with_name(f"{target.stem}-{row['run_id'][:8]}.json")
        target.write_text(json.dumps(document, indent=2, ensure_ascii=False), encoding="utf-8")
        report.written.append(target)
    return report
