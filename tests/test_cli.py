"""The CLI as a user meets it: schema, start-up weight, the package layout rules."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from importlib.metadata import entry_points

import dagster as dg
import jsonschema
import pytest
import yaml

from holodeck_core.cli.main import COMMANDS_GROUP, build_parser, main
from tests.conftest import REPO, corpus_path
from tests.hostile import run_cli


def test_schema_is_valid_json_schema_and_accepts_the_samples(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for agent in corpus_path("holodeck", "samples").glob("*/*/agent.yaml"):
        data = yaml.safe_load(agent.read_text())
        errors = [e.message for e in validator.iter_errors(data)]
        assert errors == [], (agent, errors[:3])
    assert list(validator.iter_errors({"name": "x"}))  # model and instructions are required


def test_example_validates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(REPO / "examples" / "acme-support" / "agent.yaml")]) == 0
    out = capsys.readouterr().out
    assert "prompt:   v1, v2 (file)" in out


def commands_of(parser: argparse.ArgumentParser) -> set[str]:
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


def test_the_demo_command_is_registered_by_the_pipelines_entry_point() -> None:
    """holodeck_core never imports holodeck_pipelines: the demo comes in through the
    ``holodeck.commands`` entry point, skipped for a built-in command's start-up."""
    [demo] = [e for e in entry_points(group=COMMANDS_GROUP) if e.name == "demo"]
    assert demo.value == "holodeck_pipelines.commands:add_demo_parser"
    assert "demo" in commands_of(build_parser())
    assert "demo" not in commands_of(build_parser(plugins=False))
    assert {"test", "rescore", "history", "validate"} <= commands_of(build_parser(plugins=False))


def test_cli_start_up_does_not_import_heavy_libraries() -> None:
    code = (
        "import sys; from holodeck_core.cli.main import main; "
        "main(['validate', sys.argv[1]]); "
        "heavy = [m for m in ('dagster', 'openai', 'anthropic', 'duckdb', 'pandas', 'markitdown')"
        " if m in sys.modules]; print(heavy)"
    )
    agent = REPO / "examples" / "acme-support" / "agent.yaml"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(agent)], capture_output=True, text=True, check=True
    )
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_the_workspace_code_location_serves_the_example_agent() -> None:
    """What `dg dev` (pyproject's [tool.dg]) and `dagster dev -w workspace.yaml` load."""
    import tomllib

    [entry] = yaml.safe_load((REPO / "workspace.yaml").read_text())["load_from"]
    dg_project = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["dg"]["project"]
    module = entry["python_module"]["module_name"]
    assert module == dg_project["code_location_target_module"]
    assert entry["python_module"]["location_name"] == dg_project["code_location_name"]
    defs = importlib.import_module(module).defs
    graph = defs.resolve_asset_graph()
    history = graph.get(dg.AssetKey(["acme_support", "eval_history"]))
    assert history.group_name == "acme_support"
    assert history.owners == ["team:acme_support_team"]  # the example's author, not our name
    assert {key.name for key in history.check_keys} == {
        "pass_rate_gate",
        "no_regression",
        "matrix_vs_baseline",
        "no_errored_cases",
        "judge_drift",
        "judge_agreement",
    }
    assert defs.resolve_job_def("Acme_support_eval").partitions_def is not None
    assert defs.resolve_schedule_def("acme_support_nightly").cron_schedule == "0 2 * * *"
    assert {s.name for s in defs.sensors or []} == {  # type: ignore[union-attr]
        "acme_support_prompt_versions",
        "holodeck_failed_runs",
    }


@pytest.mark.parametrize("command", ["test", "matrix", "plan"])
@pytest.mark.parametrize(
    ("trials", "message"),
    [("0", "must be at least 1, got 0"), ("101", "must be between 1 and 100, got 101")],
)
def test_every_trial_count_is_refused_alike_before_the_agent_is_read(
    command: str, trials: str, message: str
) -> None:
    """One argparse type (cli/argtypes.trial_count) for every ``--trials K``: the same usage
    error, exit 2, before the agent file (absent here) is opened."""
    ran = run_cli([command, "no-such-agent.yaml", "--trials", trials])
    assert ran.returncode == 2
    assert f"holodeck {command}: error: argument --trials: {message}" in ran.stderr, ran.stderr
    assert "Traceback" not in ran.stderr and "no-such-agent" not in ran.stderr
