"""Judge drift (evaluations.judge_control): control rows re-scored on every run, never from the
judge cache, stored in DuckDB, drift against the first scores, and the Dagster check's verdict."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from holodeck_core.cli.main import main
from holodeck_core.models import EvalRun
from holodeck_core.testing import run_model_server
from holodeck_pipelines.verdicts import drift_result

AGENT = """\
name: drift
model: {{provider: openai, name: m, endpoint: "{url}", api_key: sk-test-key-1234}}
instructions: {{inline: "Answer."}}
evaluations:
  model: {{provider: openai, name: judge, endpoint: "{url}", api_key: sk-test-key-1234}}
  metrics: [{{type: geval, name: Correct, criteria: 'Is it right?'}}]
  judge_control: control.yaml
  judge_drift_max: 0.1
test_cases:
  - {{id: capital, input: "capital?"}}
"""

CONTROL = """\
rows:
  - {id: good, input: "capital of France?", output: "CONTROL Paris", expected: "Paris"}
  - {id: bad, input: "capital of Spain?", output: "CONTROL Lyon", expected: "Madrid"}
"""


def rules(control_score: int) -> dict[str, object]:
    steps = {"match": {"user": "Task: write G-Eval"}, "json": {"steps": ["Check it."]}}
    return {
        "rules": [
            steps,
            {
                "name": "control",
                "match": {"user": "(?s)Task: score a test case.*CONTROL"},
                "json": {"score": control_score, "reason": "r"},
            },
            {"name": "case", "match": {"user": "Task: score"}, "json": {"score": 9, "reason": "r"}},
            {"match": {"user": "capital"}, "reply": "Paris"},
        ]
    }


def test_control_rows_are_rescored_uncached_and_drift_is_measured(tmp_path: Path) -> None:
    agent = tmp_path / "agent.yaml"
    (tmp_path / "control.yaml").write_text(CONTROL)
    with run_model_server(rules(8)) as server:
        agent.write_text(AGENT.format(url=server.openai_base_url))
        assert main(["test", str(agent), "-q"]) == 0
        assert main(["test", str(agent), "-q"]) == 0
        by_rule = server.stats()["by_rule"]
        assert by_rule["control"] == 4  # two rows, scored on both runs: no cache for them
        assert by_rule["case"] == 1  # the case's judgement came from the cache the second time
        server.set_rules(rules(5))
        assert main(["test", str(agent), "-q"]) == 0
    runs = sorted(tmp_path.glob("results/*/holodeck-pipelines/*.json"))
    last = EvalRun.model_validate_json(runs[-1].read_text())
    assert {(s.control_id, s.score) for s in last.report.judge_control or []} == {
        ("good", 0.5),
        ("bad", 0.5),
    }
    db = Path(os.environ["HOLODECK_HOME"]) / "history.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM judge_control_scores").fetchone() == (6,)
        drift = con.execute(
            "SELECT d.drift, d.n FROM v_judge_drift d JOIN eval_runs e USING (run_id) "
            "ORDER BY e.finished_at"
        ).fetchall()
    assert drift == [(0.0, 2), (0.0, 2), (pytest.approx(-0.3), 2)]
    evaluations = EvalRun.model_validate_json(runs[0].read_text()).metadata.agent_config.evaluations
    check = drift_result(db, last.metadata.run_id or "", evaluations)
    assert check.passed is False and "judge_drift_max" in (check.description or "")
    first = drift_result(
        db, EvalRun.model_validate_json(runs[0].read_text()).metadata.run_id or "", evaluations
    )
    assert first.passed is True


def test_a_missing_control_file_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text(AGENT.format(url="http://127.0.0.1:9/v1"))
    assert main(["test", str(agent), "-q"]) == 2
    err = capsys.readouterr().err
    assert "judge_control" in err and "control.yaml" in err and "Traceback" not in err


LABELLED = """\
rows:
  - {id: good, input: "capital of France?", output: "CONTROL Paris", expected: "Paris",
     human: {Correct: {passed: true, score: 1.0}}}
  - {id: bad, input: "capital of Spain?", output: "CONTROL Lyon", expected: "Madrid",
     human: {Correct: {passed: false, score: 0.0}}}
  - {id: meh, input: "capital of Italy?", output: "CONTROL Rome", expected: "Rome",
     human: {Correct: {passed: false, score: 0.2}}}
  - {id: ok, input: "capital of Germany?", output: "CONTROL Berlin", expected: "Berlin",
     human: {Correct: {passed: true, score: 0.7}}}
  - {id: fine, input: "capital of Spain, again?", output: "CONTROL Madrid", expected: "Madrid",
     human: {Correct: {passed: true, score: 0.8}}}
  - {id: unlabelled, input: "capital of Norway?", output: "CONTROL Oslo", expected: "Oslo"}
"""
JUDGED = {"Paris": 9, "Lyon": 3, "Rome": 6, "Berlin": 4, "Madrid": 8, "Oslo": 5}
HUMAN = {"Paris": (1, 1.0), "Lyon": (0, 0.0), "Rome": (0, 0.2), "Berlin": (1, 0.7),
         "Madrid": (1, 0.8)}  # fmt: skip


def labelled_rules() -> dict[str, object]:
    per_row = [
        {"match": {"user": f"(?s)Task: score a test case.*CONTROL {city}"},
         "json": {"score": score, "reason": "r"}}
        for city, score in JUDGED.items()
    ]  # fmt: skip
    base = rules(9)["rules"]
    assert isinstance(base, list)
    return {"rules": [base[0], *per_row, *base[2:]]}


def test_labelled_control_rows_measure_the_judge_against_people(tmp_path: Path) -> None:
    """The judge-control set can carry human labels (docs/cli.md): every run's judge is measured
    against people on it, as v_judge_agreement measures it on labelled cases."""
    from scipy.stats import spearmanr

    from tests.test_judge_agreement import cohen_kappa

    agent = tmp_path / "agent.yaml"
    (tmp_path / "control.yaml").write_text(LABELLED)
    text = AGENT.replace("criteria: 'Is it right?'}", "criteria: 'Is it right?', threshold: 0.5}")
    with run_model_server(labelled_rules()) as server:
        agent.write_text(text.format(url=server.openai_base_url))
        assert main(["test", str(agent), "-q"]) == 0
        assert main(["test", str(agent), "-q"]) == 0
    runs = [
        EvalRun.model_validate_json(p.read_text())
        for p in sorted(tmp_path.glob("results/*/holodeck-pipelines/*.json"))
    ]
    last = runs[-1]
    scored = {s.control_id: s for s in last.report.judge_control or []}
    assert (scored["meh"].passed, scored["meh"].human_passed, scored["meh"].human_score) == (
        True, False, 0.2
    )  # fmt: skip
    assert scored["unlabelled"].human_passed is None and scored["unlabelled"].passed is True
    db = Path(os.environ["HOLODECK_HOME"]) / "history.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT run_id, n, kappa, false_pass_rate, false_fail_rate, n_scores, spearman_rho, "
            "mean_bias, judge_model FROM v_judge_control_agreement ORDER BY run_id"
        ).fetchall()
    assert sorted(r[0] for r in rows) == sorted(r.metadata.run_id for r in runs)  # per run
    cities = list(HUMAN)
    judge = [JUDGED[c] / 10 for c in cities]
    human = [HUMAN[c] for c in cities]
    kappa = cohen_kappa([j >= 0.5 for j in judge], [bool(h[0]) for h in human])
    rho = spearmanr(judge, [h[1] for h in human]).statistic
    bias = sum(j - h[1] for j, h in zip(judge, human, strict=True)) / len(cities)
    for _, n, k, false_pass, false_fail, n_scores, r, b, model in rows:
        assert (n, n_scores, model) == (5, 5, "judge")
        assert k == pytest.approx(kappa) and r == pytest.approx(rho) and b == pytest.approx(bias)
        assert (false_pass, false_fail) == (pytest.approx(1 / 2), pytest.approx(1 / 3))
    evaluations = runs[0].metadata.agent_config.evaluations
    check = drift_result(db, last.metadata.run_id or "", evaluations)
    assert f"against people on the control set: Correct (judge): κ {kappa:.2f}" in (
        check.description or ""
    )
    assert check.metadata["control_kappa/Correct"].value == pytest.approx(kappa)
    from holodeck_core.dashboard import judges

    page = str(judges.page(db, {}))  # the Judges page: the agent's latest run on its control set
    assert f"drift (run {(last.metadata.run_id or '')[:12]}" in page
    assert f"Correct (judge): κ {kappa:.2f}" in page and "control-agreement" in page


def test_a_control_label_for_a_metric_the_agent_does_not_judge_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text(AGENT.format(url="http://127.0.0.1:9/v1"))
    (tmp_path / "control.yaml").write_text(
        "rows:\n  - {id: good, input: q, output: a, human: {Corect: {passed: true}}}\n"
    )
    assert main(["test", str(agent), "-q"]) == 2
    err = capsys.readouterr().err
    assert "control.yaml" in err and "row good" in err and "Corect" in err and "Correct" in err
    assert "Traceback" not in err
