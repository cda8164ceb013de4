"""`holodeck plan` plans from the newest run that ran the agent (never a rescore, whose trials
and variance are another run's) and warns when that run cannot tell it much: one trial per
case, or no variance at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from holodeck_core.cli.main import main
from holodeck_core.models import EvalRun
from holodeck_core.testing import run_model_server
from tests.test_model_candidates import RULES as CANDIDATE_RULES
from tests.test_model_candidates import write_project
from tests.test_trials import agent_yaml

RULES = {"rules": [{"match": {"user": "always"}, "reply": "Paris"}]}


def newest_run(folder: Path) -> tuple[Path, str]:
    path = max(
        folder.glob("results/*/holodeck-pipelines/*.json"), key=lambda p: p.stat().st_mtime_ns
    )
    run_id = EvalRun.model_validate_json(path.read_text()).metadata.run_id
    assert run_id is not None
    return path, run_id


def plan(agent: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    capsys.readouterr()
    assert main(["plan", str(agent), "--detect", "0.1"]) == 0
    out = capsys.readouterr()
    return out.out, out.err


def test_plan_skips_rescores_and_warns_about_one_trial_and_zero_variance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = tmp_path / "agent.yaml"
    with run_model_server(RULES) as server:
        agent.write_text(agent_yaml(server.openai_base_url, ["always Paris", "never"]))
        assert main(["test", str(agent), "-q", "--trials", "3"]) == 1
        path, tested = newest_run(tmp_path)
        assert main(["rescore", str(path)]) == 1
        _, rescored = newest_run(tmp_path)
        assert rescored != tested
        out, err = plan(agent, capsys)
        assert f"\nfrom run {tested[:12]} " in "\n" + out and "2 cases x 3 trial(s)" in out
        # each case agrees with itself over its trials: no variance to plan on (a warning)
        assert err.startswith("warning: every case of the run has pass fraction 0% or 100%"), err
        assert main(["test", str(agent), "-q", "--limit", "1"]) == 0  # one trial, all pass
        _, single = newest_run(tmp_path)
        out, err = plan(agent, capsys)
    assert f"\nfrom run {single[:12]} " in "\n" + out and "1 cases x 1 trial(s)" in out
    warnings = err.splitlines()
    assert len(warnings) == 2
    assert warnings[0].startswith("warning: the run has 1 trial per case")
    assert warnings[1].startswith("warning: every case of the run has pass fraction 100%")


@pytest.mark.parametrize(
    ("cases", "trials", "assumed"),
    [
        (["one always", "two always", "three always"], 3, "at a pass rate of 50.0%"),  # all pass
        # each case agrees with itself
        (["one always", "two never", "three never"], 3, "at the observed pass rate 33.3%"),
        (["one never", "two never"], 1, "at a pass rate of 50.0%"),  # one trial, all fail
    ],
    ids=["all-pass-3-trials", "cases-agree-3-trials", "all-fail-1-trial"],
)
def test_plan_promises_no_power_from_zero_variance(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cases: list[str],
    trials: int,
    assumed: str,
) -> None:
    agent = tmp_path / "agent.yaml"
    with run_model_server(RULES) as server:
        agent.write_text(agent_yaml(server.openai_base_url, cases))
        main(["test", str(agent), "-q", "--trials", str(trials)])
        out, err = plan(agent, capsys)
    said = " ".join(out.split())
    assert "to detect a drop of 10.0 pp" in said, said
    assert "the run shows no variance" in said and "is assumed instead" in said, said
    assert assumed in said, said
    rows = [line for line in out.splitlines() if "trial(s) per case:" in line]
    assert len(rows) >= 4
    for row in rows:  # nothing is promised from 2 or 3 cases, nor full power
        assert ": 2 cases" not in row and ": 3 cases" not in row and "100%" not in row, row
    assert "it shows no variance" in err and "assume one" in err, err


def test_plan_uses_the_newest_run_of_the_configuration_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A history holding runs of two candidates: `--detect` plans from the newest run of the
    agent with the candidate asked for (`--model`, default the agent's own model), never from a
    newer run of another, and says which configuration it used; a candidate with no run is a
    ConfigError (exit 2) naming the command that records one."""
    monkeypatch.setenv("HOLODECK_HISTORY_DB", str(tmp_path / "history.duckdb"))
    with run_model_server(CANDIDATE_RULES) as server:
        models = "mini: {}\nlarge: {name: gpt-4o}\nhuge: {name: gpt-x}"
        agent = write_project(tmp_path, server.openai_base_url, models)
        assert main(["test", str(agent), "-q"]) == 0  # mini, the agent's own model
        _, mini = newest_run(tmp_path)
        assert main(["test", str(agent), "-q", "--model", "large", "--trials", "3"]) == 0
        _, large = newest_run(tmp_path)
        capsys.readouterr()
        for argv, run_id, candidate, trials in (
            ([], mini, "mini", 1),
            (["--model", "mini"], mini, "mini", 1),
            (["--model", "large"], large, "large", 3),
        ):
            assert main(["plan", str(agent), "--detect", "0.1", *argv]) == 0
            out = " ".join(capsys.readouterr().out.split())
            assert f"from run {run_id[:12]} (prompt " in out, out
            assert f" · model {candidate}, the newest run of this configuration): " in out, out
            assert f"2 cases x {trials} trial(s)" in out, out
        assert main(["plan", str(agent), "--detect", "0.1", "--model", "huge"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{agent}: --detect: no recorded run of 'cand' with model candidate 'huge'" in err, err
    assert f"run `holodeck test {agent} --model huge`" in err, err
    assert "runs of model candidate 'large', 'mini' are recorded" in err, err
    assert "Traceback" not in err
