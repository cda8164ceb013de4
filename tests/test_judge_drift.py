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
