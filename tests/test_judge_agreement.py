"""Judges checked against people (docs/cli.md): a run's labelling sheet from the
dashboard, filled in and brought back with ``holodeck labels import``, gives the agreement
``v_judge_agreement`` reports; it equals scikit-learn's ``cohen_kappa_score`` (by hand here:
the same formula) and scipy's ``spearmanr``."""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path

import duckdb
import pytest
from scipy import stats as sps

from holodeck_core.cli.main import main
from holodeck_core.dashboard import judges
from holodeck_core.dashboard.app import create_app
from holodeck_core.history import store
from holodeck_core.history.ducklake import DuckLake
from holodeck_core.history.transfer import copy_history
from tests.history_helpers import day, ingest_runs, make_run, query

CASES = tuple(f"case-{i:02d}" for i in range(40))


def cohen_kappa(a: list[bool], b: list[bool]) -> float:
    """scikit-learn's ``cohen_kappa_score`` for two labels: (pₒ - pₑ) / (1 - pₑ)."""
    n = len(a)
    po = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    return (po - pe) / (1 - pe)


@pytest.fixture
def judged(tmp_path: Path) -> Path:
    """A run of 40 cases with varied judge scores (faithfulness passes at 0.5)."""
    db = tmp_path / "history.duckdb"
    rng = random.Random(30)
    scores = {case: round(rng.random(), 3) for case in CASES}
    statuses = "".join("P" if scores[c] >= 0.5 else "F" for c in CASES)
    ingest_runs(db, [make_run(statuses, day(0), run_id="run-labelled", cases=CASES)])
    with duckdb.connect(str(db)) as con:
        for case, score in scores.items():
            con.execute(
                "UPDATE metric_results SET score = ? WHERE case_id = ? "
                "AND metric_name = 'faithfulness'",
                [score, case],
            )
    return db


def test_a_filled_in_sheet_gives_the_agreement_of_sklearn_and_scipy(
    judged: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = create_app(judged).server.test_client()
    sheet = client.get("/labels.csv?run=run-labelled")
    assert sheet.status_code == 200 and "attachment" in sheet.headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(sheet.get_data(as_text=True))))
    assert {r["metric_name"] for r in rows} == {"faithfulness", "latency"}
    assert all(r["human_passed"] == "" and r["response"] for r in rows)
    # a person labels faithfulness: close to the judge, with some disagreement
    rng = random.Random(7)
    judge, human, judge_scores, human_scores = [], [], [], []
    filled = []
    for r in rows:
        if r["metric_name"] != "faithfulness":
            filled.append(r)  # left blank: skipped
            continue
        score = min(1.0, max(0.0, float(r["judge_score"]) + rng.gauss(0.05, 0.2)))
        r["human_score"] = f"{score:.3f}"
        r["human_passed"] = "pass" if score >= 0.5 else "fail"
        judge.append(r["judge_passed"].lower() == "true")
        human.append(score >= 0.5)
        judge_scores.append(float(r["judge_score"]))
        human_scores.append(round(score, 3))
        filled.append(r)
    path = tmp_path / "labels.csv"
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(filled)
    assert main(["labels", "import", str(path), "--labeler", "ann", "--db", str(judged)]) == 0
    out = capsys.readouterr().out
    assert "imported 40 label(s) of 40 case(s) in 1 run(s)" in out and "40 row(s) left blank" in out
    assert "κ" in out and "Spearman rho" in out
    [row] = query(
        judged,
        "SELECT n, kappa, kappa_low, kappa_high, false_pass_rate, n_human_fails, "
        "false_fail_rate, spearman_rho, spearman_rho_low, spearman_rho_high, mean_bias, "
        "n_scores FROM v_judge_agreement WHERE metric_name = 'faithfulness'",
    )
    n, kappa, low, high, false_pass, fails, false_fail, rho, rho_low, rho_high, bias, ns = row
    assert (n, ns) == (40, 40)
    assert kappa == pytest.approx(cohen_kappa(judge, human))
    assert -1 <= low < kappa < high <= 1
    assert fails == sum(not h for h in human)
    assert false_pass == pytest.approx(
        sum(j and not h for j, h in zip(judge, human, strict=True)) / fails
    )
    assert false_fail == pytest.approx(
        sum(h and not j for j, h in zip(judge, human, strict=True)) / (40 - fails)
    )
    assert rho == pytest.approx(sps.spearmanr(judge_scores, human_scores).statistic)
    assert rho_low < rho < rho_high
    assert bias == pytest.approx(
        sum(j - h for j, h in zip(judge_scores, human_scores, strict=True)) / 40
    )
    page = str(judges.page(judged, {}))  # the dashboard's Judges page shows the same
    assert "faithfulness (gpt-4o): κ " + f"{kappa:.2f}" in page and "labels-run-labelled" in page
    # importing the sheet again replaces the labels, never doubles them
    assert main(["labels", "import", str(path), "--labeler", "ann", "--db", str(judged)]) == 0
    assert query(judged, "SELECT count(*) FROM human_labels") == [(40,)]


def test_bad_labels_name_file_line_and_field_and_write_nothing(
    judged: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "labels.jsonl"
    lines = [
        {"run_id": "run-labelled", "case_id": "case-00", "metric_name": "faithfulness",
         "human_passed": "pass", "labeler": "bo"},
        {"run_id": "run-labelled", "case_id": "case-01", "metric_name": "faithfulness",
         "human_passed": "maybe", "labeler": "bo"},
        {"run_id": "run-labelled", "case_id": "nope", "metric_name": "faithfulness",
         "human_score": 0.4, "labeler": "bo"},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert main(["labels", "import", str(path), "--db", str(judged)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: human_passed" in err and "not a verdict" in err
    assert query(judged, "SELECT count(*) FROM human_labels") == [(0,)]
    path.write_text("\n".join(json.dumps(line) for line in (lines[0], lines[2])) + "\n")
    assert main(["labels", "import", str(path), "--db", str(judged)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2:" in err and "no case 'nope'" in err and "Traceback" not in err
    assert query(judged, "SELECT count(*) FROM human_labels") == [(0,)]
    path.write_text(json.dumps(lines[0]) + "\n")
    assert main(["labels", "import", str(path), "--db", str(judged)]) == 0
    assert query(judged, "SELECT labeler, human_passed FROM human_labels") == [("bo", True)]


def test_the_judge_agreement_check_warns_below_min_judge_kappa(judged: Path) -> None:
    from holodeck_core.models.evaluation import EvaluationConfig
    from holodeck_pipelines.verdicts import Skipped, agreement_result

    def config(minimum: float) -> EvaluationConfig:
        return EvaluationConfig.model_validate(
            {"metrics": [{"type": "standard", "metric": "equality"}], "min_judge_kappa": minimum}
        )

    # no labels: skipped (not evaluated), with the reason
    assert isinstance(agreement_result(judged, "run-labelled", config(0.5)), Skipped)
    with duckdb.connect(str(judged)) as con:  # a person who agrees on 3 of 4 cases
        for i, verdict in enumerate((True, False, True, True)):
            con.execute(
                "INSERT INTO human_labels VALUES ('run-labelled', ?, 'faithfulness', 'cy', ?, "
                "NULL, NULL, NULL, now())",
                [CASES[i], verdict],
            )
    [(kappa,)] = query(judged, "SELECT kappa FROM v_judge_agreement")
    assert kappa is not None
    below = agreement_result(judged, "run-labelled", config(min(1.0, kappa + 0.1)))
    assert below.passed is False and "below evaluations.min_judge_kappa" in (
        below.description or ""
    )
    assert agreement_result(judged, "run-labelled", config(kappa - 0.1)).passed is True


def test_labels_import_into_a_ducklake_replaces_without_keys(
    judged: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A DuckLake has no primary key to replace on: a row repeated in a file counts once, and
    a label given again in a later file replaces the earlier one all the same."""
    lake = DuckLake.parse(str(tmp_path / "lake"))
    copy_history(judged, lake)
    path = tmp_path / "labels.jsonl"

    def label(case: str, verdict: str) -> str:
        return json.dumps(
            {"run_id": "run-labelled", "case_id": case, "metric_name": "faithfulness",
             "human_passed": verdict, "labeler": "di"}
        )  # fmt: skip

    path.write_text("\n".join([label("case-00", "fail"), label("case-01", "pass"),
                               label("case-00", "fail")]) + "\n")  # fmt: skip
    assert main(["labels", "import", str(path), "--lake", lake.url]) == 0
    out = capsys.readouterr().out
    assert "imported 2 label(s) of 2 case(s) in 1 run(s)" in out and "line(s) 3" in out
    path.write_text(label("case-00", "pass") + "\n")  # a later file corrects a label
    assert main(["labels", "import", str(path), "--lake", lake.url]) == 0
    found = "SELECT case_id, human_passed FROM human_labels ORDER BY case_id"
    with store.reader(lake) as con:
        assert con.execute(found).fetchall() == [("case-00", True), ("case-01", True)]
        assert con.execute("SELECT n FROM v_judge_agreement").fetchall() == [(2,)]
