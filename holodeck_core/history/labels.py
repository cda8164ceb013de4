"""Human labels (docs/cli.md): the labelling sheet of a run, importing a filled-in sheet
(CSV or JSON Lines) into ``human_labels``, and reading ``v_judge_agreement``.

A sheet has one row per case and metric of a run: the case's input, response and expected
output, the judge's verdict, and empty ``human_passed`` / ``human_score`` columns for a person
to fill in. Importing checks every row first (each problem names the file, line and field) and
writes all of them in one transaction, or none. A file gives one label per run, case, metric
and labeler (a row repeated word for word counts once and is reported; two that differ are a
problem); a later import of the same label replaces the earlier one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from holodeck_core.defaults import MAX_LABELS_FIELD_CHARS
from holodeck_core.errors import ConfigError, Problem
from holodeck_core.history import tabular
from holodeck_core.history.label_files import read_rows
from holodeck_core.history.tabular import TableRows

if TYPE_CHECKING:
    import duckdb

    from holodeck_core.history.store import History

SHEET_COLUMNS = (
    "run_id", "case_id", "test_name", "input", "response", "ground_truth", "metric_name",
    "judge_model", "judge_score", "judge_passed", "human_passed", "human_score", "labeler",
    "note",
)  # fmt: skip
SHEET = """
SELECT t.run_id, t.case_id, t.test_name, t.test_input, t.agent_response, t.ground_truth,
       m.metric_name, any_value(m.judge_model), avg(m.score), bool_and(m.passed),
       NULL, NULL, NULL, NULL
FROM test_results t
JOIN metric_results m USING (run_id, case_id)
WHERE t.run_id = ? AND m.error IS NULL
GROUP BY ALL
ORDER BY any_value(t.case_index), m.metric_name
"""
LABEL_COLUMNS = (
    "run_id", "case_id", "metric_name", "labeler", "human_passed", "human_score", "note",
    "source_file", "imported_at",
)  # fmt: skip
_REPLACED = "DELETE FROM human_labels h WHERE EXISTS (SELECT 1 FROM ({rows}) n WHERE " + (
    " AND ".join(f"n.{c} = h.{c}" for c in LABEL_COLUMNS[:4]) + ")"
)
PASSED_WORDS = {
    **dict.fromkeys(("pass", "passed", "true", "yes", "1"), True),
    **dict.fromkeys(("fail", "failed", "false", "no", "0"), False),
}


class LabelRow(BaseModel):
    """One filled-in row of a labelling sheet (other columns are ignored)."""

    model_config = ConfigDict(extra="ignore")

    run_id: str = Field(min_length=1)
    case_id: str = Field(min_length=1)
    metric_name: str = Field(min_length=1)
    human_passed: bool | None = None
    human_score: float | None = Field(None, ge=0.0, le=1.0)
    labeler: str | None = None
    note: str | None = None

    @field_validator("human_passed", mode="before")
    @classmethod
    def _passed(cls, value: Any) -> Any:
        if value is None or isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if not text:
            return None
        if text not in PASSED_WORDS:
            raise ValueError(f"{value!r} is not a verdict: use pass or fail (true/false, 1/0)")
        return PASSED_WORDS[text]

    @field_validator("human_score", "labeler", "note", mode="before")
    @classmethod
    def _blank(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value


@dataclass(frozen=True)
class LabelImport:
    labels: int
    runs: int
    cases: int
    skipped: int
    """Rows with neither a human verdict nor a score (a sheet not filled in there)."""
    duplicates: tuple[int, ...] = ()
    """Lines repeating an earlier row's label word for word (imported once)."""


def labelling_sheet(con: duckdb.DuckDBPyConnection, run_id: str) -> list[tuple[Any, ...]]:
    """The rows of ``run_id``'s sheet, in :data:`SHEET_COLUMNS` order; a text longer than
    :data:`~holodeck_core.defaults.MAX_LABELS_FIELD_CHARS` cut to it, marked, so the sheet
    reads back."""
    return [tuple(map(_cut, row)) for row in con.execute(SHEET, [run_id]).fetchall()]


def _cut(value: Any) -> Any:
    if not isinstance(value, str) or len(value) <= MAX_LABELS_FIELD_CHARS:
        return value
    mark = f" … [cut: {len(value):,} characters; the whole text is in the history]"
    return value[: MAX_LABELS_FIELD_CHARS - len(mark) - 1] + mark  # 1 for a neutralising '


def parse_rows(path: Path, labeler: str | None) -> tuple[list[tuple[int, LabelRow]], int]:
    """Every row checked; all problems at once (file, line, field)."""
    problems: list[Problem] = []
    parsed: list[tuple[int, LabelRow]] = []
    skipped = 0
    for line, raw in read_rows(path):
        try:
            row = LabelRow.model_validate(raw)
        except ValidationError as exc:
            for error in exc.errors():
                field = ".".join(str(p) for p in error["loc"])
                problems.append(Problem(str(path), error["msg"], path=field, line=line))
            continue
        if row.human_passed is None and row.human_score is None:
            skipped += 1
            continue
        row.labeler = row.labeler or labeler
        if not row.labeler:
            problems.append(
                Problem(str(path), "no labeler: fill the column or pass --labeler NAME",
                        path="labeler", line=line)
            )  # fmt: skip
        parsed.append((line, row))
    if problems:
        raise ConfigError(problems)
    return parsed, skipped


def import_labels(
    con: duckdb.DuckDBPyConnection, path: Path, *, labeler: str | None = None
) -> LabelImport:
    """``path``'s labels into ``human_labels`` on a read-write connection, all or none."""
    rows, skipped = parse_rows(path, labeler)
    known = {
        tuple(r)
        for r in con.execute(
            "SELECT DISTINCT run_id, case_id, metric_name FROM metric_results"
        ).fetchall()
    }
    unknown = [
        Problem(
            str(path),
            f"run {row.run_id[:12]} has no case {row.case_id!r} scored by {row.metric_name!r} "
            "in this history",
            line=line,
        )
        for line, row in rows
        if (row.run_id, row.case_id, row.metric_name) not in known
    ]
    if unknown:
        raise ConfigError(unknown)
    distinct, duplicates = one_label_each(path, rows)
    now = datetime.now(UTC).replace(tzinfo=None)
    labels = TableRows(
        "human_labels",
        LABEL_COLUMNS,
        [(*key, *given, str(path), now) for key, (_, given) in distinct.items()],
    )
    con.execute("BEGIN TRANSACTION")
    try:  # replace, then insert: no ON CONFLICT, a DuckLake has no keys
        tabular.insert(con, _REPLACED, [labels])
        tabular.insert(con, "INSERT INTO human_labels BY NAME {rows}", [labels])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return LabelImport(
        labels=len(distinct),
        runs=len({key[0] for key in distinct}),
        cases=len({key[:2] for key in distinct}),
        skipped=skipped,
        duplicates=tuple(duplicates),
    )


Key = tuple[str, str, str, str | None]
Given = tuple[bool | None, float | None, str | None]


def one_label_each(
    path: Path, rows: list[tuple[int, LabelRow]]
) -> tuple[dict[Key, tuple[int, Given]], list[int]]:
    """One label per run, case, metric and labeler: (its first line, what it gives) per key,
    and the lines repeating one word for word. Two rows of one key that differ are a problem
    naming both lines (no row silently wins)."""
    distinct: dict[Key, tuple[int, Given]] = {}
    duplicates: list[int] = []
    problems: list[Problem] = []
    for line, r in rows:
        key, given = (r.run_id, r.case_id, r.metric_name, r.labeler), (
            r.human_passed, r.human_score, r.note)  # fmt: skip
        first = distinct.setdefault(key, (line, given))
        if first[0] == line:
            continue
        if first[1] == given:
            duplicates.append(line)
            continue
        problems.append(Problem(
            str(path), f"labels case {r.case_id!r} ({r.metric_name}, labeler {r.labeler!r}) "
            f"again, unlike line {first[0]}: keep one of the two rows", line=line,
        ))  # fmt: skip
    if problems:
        raise ConfigError(problems)
    return distinct, duplicates


def agreement(
    con: duckdb.DuckDBPyConnection, agent_slug: str | None = None
) -> list[dict[str, Any]]:
    """``v_judge_agreement`` rows (one agent's, or all)."""
    cursor = con.execute(
        "SELECT * FROM v_judge_agreement WHERE ? IS NULL OR agent_slug = ? "
        "ORDER BY agent_slug, metric_name, judge_model",
        [agent_slug, agent_slug],
    )
    columns = [d[0] for d in cursor.description or []]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


AGREEMENT_UNIT = (
    "agreement counts cases (n): each labeler gives one verdict per case; several labelers' "
    "verdicts on a case count once, by majority (a tie is left out), their scores averaged"
)
"""How ``v_judge_agreement`` counts, as the CLI and the Judges page state it."""
MEASURES = (
    ("κ", "kappa", "n", False),
    ("false pass", "false_pass_rate", "n_human_fails", True),
    ("false fail", "false_fail_rate", "n_human_passes", True),
    ("Spearman rho", "spearman_rho", "n_scores", False),
    ("mean bias", "mean_bias", "n_scores", False),
)
"""(label, column, its n, a rate) of each agreement measure; ``<column>_low``/``_high`` or
``<stem>_low``/``_high`` hold the interval."""


def judge_agreement_of(
    db: History | duckdb.DuckDBPyConnection, run_id: str
) -> list[dict[str, Any]]:
    """The agreement rows of ``run_id``'s agent."""
    from holodeck_core.history.store import opened

    with opened(db) as con:
        row = con.execute("SELECT agent_slug FROM eval_runs WHERE run_id = ?", [run_id]).fetchone()
        return agreement(con, str(row[0])) if row else []


def render_agreement(row: dict[str, Any]) -> str:
    """``faithfulness (gpt-x): κ 0.62 (95% CI 0.41 to 0.83, n = 40); false pass 10% …``."""
    parts = []
    for label, column, n_column, rate in MEASURES:
        value = row[column]
        stem = column.removesuffix("_rate")
        low, high = row.get(f"{stem}_low"), row.get(f"{stem}_high")
        if value is None:
            parts.append(f"{label} - (n = {row[n_column] or 0})")
            continue
        shown = [f"{v:.0%}" if rate else f"{v:.2f}" for v in (value, low, high) if v is not None]
        ci = f"95% CI {shown[1]} to {shown[2]}, " if len(shown) == 3 else ""
        parts.append(f"{label} {shown[0]} ({ci}n = {row[n_column]})")
    return f"{row['metric_name']} ({row['judge_model'] or 'no judge model'}): " + "; ".join(parts)
