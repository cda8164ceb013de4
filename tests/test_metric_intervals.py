"""A mean in a unit (latency, cost) gets Hall's skewness-corrected t interval (docs/cli.md): a real
run against the loopback model server, a few slow cases among fast ones; the console, the Markdown
report and ``v_metric_stats`` show the same numbers and say "n = 6, interval method: …"."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import duckdb
import pytest

from holodeck_core.cli.main import main
from holodeck_core.models import EvalRun
from holodeck_core.testing import run_model_server

HALL_ONCE = "Student t with Hall's skewness correction, at least 0 (ms and USD)"


def test_latency_interval_is_halls_everywhere_and_stays_above_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = {
        "rules": [
            {"match": {"user": "slow"}, "reply": "Paris", "latency": 0.4},
            {"match": {"user": "fast"}, "reply": "Paris", "latency": 0.01},
        ]
    }
    cases = "".join(
        f"  - {{id: c{i}, input: '{w} {i}'}}\n" for i, w in enumerate(["fast"] * 5 + ["slow"])
    )
    with run_model_server(rules) as server:
        agent = tmp_path / "agent.yaml"
        agent.write_text(
            textwrap.dedent(f"""\
            name: latency
            model: {{provider: openai, name: m, endpoint: "{server.openai_base_url}",
                     api_key: sk-test-1234}}
            instructions: {{inline: "Answer."}}
            evaluations:
              metrics: [{{type: standard, metric: latency, threshold: 60000}}]
            test_cases:
            """)
            + cases
        )
        assert main(["test", str(agent), "-v", "-o", str(tmp_path / "report.md")]) == 0
    out = capsys.readouterr().out
    [path] = sorted(tmp_path.glob("results/*/holodeck-pipelines/*.json"))
    run = EvalRun.model_validate_json(path.read_text())
    stats = run.report.summary.statistics
    assert stats is not None
    latency = stats.metrics["latency"]
    assert latency.method == "t_hall_skewness" and latency.n == 6
    assert latency.low is not None and latency.high is not None
    assert 0.0 <= latency.low <= latency.mean <= latency.high
    # one slow case of six: skewed right, so the interval reaches further above than below
    assert latency.high - latency.mean > latency.mean - latency.low
    assert f"latency: mean {latency.render(method=False)}" in out and "n = 6)" in out
    for text in (out, (tmp_path / "report.md").read_text()):  # the method once per run
        assert text.count(HALL_ONCE) == 1 and "interval method" not in text
    db = Path(os.environ["HOLODECK_HOME"]) / "history.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute(
            "SELECT n, method, mean, ci95_low, ci95_high, skewness FROM v_metric_stats "
            "WHERE run_id = ? AND metric_name = 'latency'",
            [run.metadata.run_id],
        ).fetchone()
        trend = con.execute(
            "SELECT method, ci95_low, ci95_high FROM v_metric_trend WHERE run_id = ?",
            [run.metadata.run_id],
        ).fetchone()
    assert row is not None and row[:2] == (6, "t_hall_skewness") and row[5] > 0
    assert row[2:5] == (
        pytest.approx(latency.mean),
        pytest.approx(latency.low, abs=1e-9),
        pytest.approx(latency.high, rel=1e-9),
    )
    assert trend == ("t_hall_skewness", pytest.approx(row[3]), pytest.approx(row[4]))
