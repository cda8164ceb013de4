"""Errors apart (docs/cli.md), end to end: a CLI run against a model server that is
not listening is an infrastructure failure; it leaves ``v_flaky_cases``, the dashboard's
flaky marks, trends and comparisons as they were, and is shown apart."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from holodeck_core.cli.main import main
from holodeck_core.dashboard import compare_data, data, summary_data
from holodeck_core.testing import run_model_server
from tests.history_helpers import query
from tests.services import HOST, free_port

RULES = {
    "default": {"reply": "Lyon"},
    "rules": [{"match": {"user": "capital"}, "reply": "Paris"}],
}
CASES = ("capital of France", "capital city", "capital again", "largest city")


def write_agent(folder: Path, url: str) -> Path:
    cases = "".join(f"  - {{input: '{c}'}}\n" for c in CASES)
    agent = folder / "agent.yaml"
    agent.write_text(
        textwrap.dedent(f"""\
        name: outage
        model: {{provider: openai, name: m, endpoint: "{url}", api_key: sk-test-key-1234}}
        instructions: {{inline: "Answer."}}
        evaluations:
          metrics: [{{type: standard, metric: equality, threshold: 1.0}}]
        test_cases:
        """)
        + cases.replace("'}", "', ground_truth: Paris}")
    )
    return agent


def test_a_dead_model_server_is_an_infrastructure_failure_kept_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, server.openai_base_url)
        assert main(["test", str(agent), "-q"]) == 1  # "largest city" fails
        assert main(["test", str(agent), "-q"]) == 1
    db = Path(os.environ["HOLODECK_HOME"]) / "history.duckdb"
    good = [r[0] for r in query(db, "SELECT run_id FROM eval_runs ORDER BY finished_at")]
    flaky = "SELECT * FROM v_flaky_cases ORDER BY ALL"
    trend = "SELECT runs, total_tests, errored FROM v_pass_rate_trend"
    before = {
        "flaky": query(db, flaky),
        "trend": query(db, trend),
        "marks": [r.flaky for r in compare_data.compare(db, good, None).matrix],
    }
    assert before["flaky"] == [] and before["marks"] == [False] * 4
    capsys.readouterr()

    write_agent(tmp_path, f"http://{HOST}:{free_port()}/v1")  # nothing listens there
    assert main(["test", str(agent)]) == 3  # an execution error
    out = capsys.readouterr().out
    assert "infrastructure failure: 4 of 4 cases ERROR" in out
    [(dead,)] = query(db, "SELECT run_id FROM eval_runs WHERE errored = 4")
    assert query(
        db, f"SELECT infrastructure_failure FROM v_run_health WHERE run_id = '{dead}'"
    ) == [(True,)]
    after = {
        "flaky": query(db, flaky),
        "trend": query(db, trend),
        "marks": [r.flaky for r in compare_data.compare(db, good, None).matrix],
    }
    assert after == before  # no case turned flaky, the trend did not dip
    assert query(db, f"SELECT count(*) FROM v_run_comparisons WHERE head_run_id = '{dead}'") == [
        (0,)
    ]
    # shown apart on the dashboard's Summary; kept with failed=1
    summary = summary_data.summary(db, data.Filters())
    assert dead not in set(summary.runs["run_id"]) and list(summary.failures["run_id"]) == [dead]
    kept = summary_data.summary(db, data.Filters(include_failed=True))
    assert dead in set(kept.runs["run_id"]) and kept.failures.empty
    # history compare refuses it as evidence, unless asked
    assert main(["history", "compare", good[-1], dead]) == 2
    err = capsys.readouterr().err
    assert "infrastructure failure" in err and "--include-failed" in err
    args = ["history", "compare", good[-1], dead, "--include-failed", "--format", "json"]
    assert main(args) in (0, 1)
    assert json.loads(capsys.readouterr().out)["common_cases"] == 4


def test_the_pull_request_gate_never_takes_an_infrastructure_failure_for_its_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--baseline VERSION`` is that version's newest run the history counts, as the Dagster
    check's ``evaluations.baseline``: an outage in between is passed over, not an exit 2."""
    summary = tmp_path / "summary.md"
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, server.openai_base_url)
        assert main(["test", str(agent), "-q"]) == 1  # "largest city" fails
        write_agent(tmp_path, f"http://{HOST}:{free_port()}/v1")  # nothing listens there
        assert main(["test", str(agent), "-q"]) == 3  # an infrastructure failure
        write_agent(tmp_path, server.openai_base_url)
        db = Path(os.environ["HOLODECK_HOME"]) / "history.duckdb"
        [(good, version)] = query(db, "SELECT run_id, prompt_version FROM eval_runs LIMIT 1")
        capsys.readouterr()
        gate = ["test", str(agent), "-q", "--baseline", version, "--summary", str(summary)]
        assert main(gate) == 1  # the same failing case: no regression, no error
    captured = capsys.readouterr()
    assert f"against baseline {version} (prompt {version} · model default, run {good[:12]}): " in (
        captured.out
    ), captured.err
    assert f"- baseline: prompt {version} · model default, run `{good[:12]}`" in (
        summary.read_text()
    )
