"""Money, part 3 (docs/cost.md): ``holodeck plan`` prints the expected calls, tokens and dollars of
a run, from the history's measured spend per case (within 10 % of what the next fresh run then
reports), else from the prompt and case sizes, and prices a ``--detect`` plan's rows."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from holodeck_core.cli.main import main
from holodeck_core.models import EvalRun
from holodeck_core.testing import run_model_server
from tests.test_cost import RULES, write_agent

CASES = [f"question {n}" for n in range(10)]


def planned_usd(out: str) -> float:
    [total] = re.findall(r"total .* tokens  ([0-9.]+) USD", out)
    return float(total)


def test_plan_from_measured_spend_is_within_ten_percent_of_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, server.openai_base_url, CASES)
        assert main(["plan", str(agent)]) == 0
        rough = capsys.readouterr().out
        assert "from sizes of the prompt and the cases" in rough and "judge" in rough
        assert main(["test", str(agent), "-q"]) == 0
        capsys.readouterr()
        assert main(["plan", str(agent), "--trials", "2"]) == 0
        doubled = capsys.readouterr().out
        assert main(["plan", str(agent)]) == 0
        out = capsys.readouterr().out
        assert "from the measured spend per case of run " in out
        shutil.rmtree(Path(os.environ["HOLODECK_HOME"]) / "cache")  # the next run pays again
        assert main(["test", str(agent), "-q"]) == 0
    runs = sorted((tmp_path / "results" / "money").glob("holodeck-pipelines/*.json"))
    cost = EvalRun.model_validate_json(runs[-1].read_text()).report.summary.cost_usd
    assert cost is not None
    assert planned_usd(out) == pytest.approx(cost, rel=0.10)
    assert planned_usd(doubled) > planned_usd(out) * 1.5  # K trials pay per trial


def test_plan_prices_the_rows_of_a_detect_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, server.openai_base_url, CASES[:4])
        assert main(["test", str(agent), "-q"]) == 0
        capsys.readouterr()
        assert main(["plan", str(agent), "--detect", "0.1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"trial\(s\) per case: [0-9,]+ cases.*, about [0-9.]+ USD a run", out)
