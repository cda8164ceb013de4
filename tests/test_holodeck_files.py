"""The two files of a run (docs/holodeck-fidelity.md): ``results/<slug>/<timestamp>.json`` is a
HoloDeck 0.7.1 EvalRun (checked here against the JSON Schema recorded from HoloDeck's own
model, ``tests/fixtures/holodeck/eval_run.schema.json``; and, where ``bench/.peer-venv``
holds HoloDeck, by HoloDeck's model and dashboard loader themselves), our superset beside it
in ``holodeck-pipelines/``; every reader of ours prefers the superset and accepts either."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import dagster as dg
import jsonschema
import pytest

from holodeck_core.cli.main import main
from holodeck_core.config.project import SUPERSET_FOLDER
from holodeck_core.models import EvalRun
from holodeck_core.testing import run_model_server
from holodeck_pipelines.builder import build_definitions
from tests import test_pipelines as pipelines
from tests.history_helpers import query

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "tests" / "fixtures" / "holodeck" / "eval_run.schema.json"
PEER = Path(os.environ.get("HOLODECK_PEER_VENV", REPO / "bench" / ".peer-venv"))

RULES: dict[str, Any] = {
    "default": {"reply": "I don't know."},
    "rules": [
        {
            "match": {"user": "weather in (\\w+)"},
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "$1"}}],
            "reply": "{tool_result}",
        },
        {"match": {"user": "capital of France"}, "reply": "Paris"},
        {"match": {"user": "capital of Italy"}, "reply": "Rome"},
        {"match": {"user": "broken"}, "fault": {"kind": "400"}},
    ],
}

AGENT = """\
name: Files Probe
model: {{provider: openai, name: test-model, endpoint: "{url}", api_key: sk-files-probe-9876}}
instructions: {{inline: "You are helpful."}}
tools:
  - {{type: function, name: get_weather, description: Weather, file: tools.py,
     function: get_weather}}
execution: {{trials: 2}}
evaluations:
  metrics:
    - {{type: standard, metric: equality, case_insensitive: true}}
    - {{type: standard, metric: latency, threshold: 60000}}
test_cases:
  - name: weather
    input: weather in Paris?
    ground_truth: Sunny in Paris
    expected_tools: [get_weather]
  - name: broken
    input: this is broken
    ground_truth: anything
    expected_tools: [{{name: get_weather, args: {{city: Paris}}}}]
  - name: capitals
    turns:
      - {{input: capital of France?, ground_truth: paris}}
      - {{input: capital of Italy?, ground_truth: milan}}
"""


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(agent file, HoloDeck's file, our superset) of one CLI run: trials, a tool, an ERROR
    case with expected tools, a multi-turn case, a unit metric."""
    folder = tmp_path_factory.mktemp("files")
    (folder / "tools.py").write_text(
        "def get_weather(city: str) -> str:\n    return f'Sunny in {city}'\n"
    )
    with run_model_server(RULES) as server:
        agent = folder / "agent.yaml"
        agent.write_text(AGENT.format(url=server.openai_base_url))
        assert main(["test", str(agent), "-q"]) == 3
    results = folder / "results" / "files-probe"
    [native] = sorted(results.glob("*.json"))
    [superset] = sorted((results / SUPERSET_FOLDER).glob("*.json"))
    assert native.name == superset.name
    return agent, native, superset


def holodeck_schema_errors(document: dict[str, Any]) -> list[str]:
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message[:160]}"
        for e in validator.iter_errors(document)
    ]
    # the one rule of HoloDeck's model that is code, not schema
    if document["report"]["agent_name"] != document["metadata"]["agent_config"]["name"]:
        errors.append("report.agent_name differs from metadata.agent_config.name")
    return errors


def test_the_schema_is_holodecks_and_strict() -> None:
    """The recorded schema forbids unknown fields, so it catches every field we would add."""
    schema = json.loads(SCHEMA.read_text())
    assert schema["$comment"].startswith("holodeck-ai 0.7.1 EvalRun")
    for name in ("EvalRun", "TestResult", "MetricResult", "TurnResult", "ReportSummary"):
        definition = schema if name == "EvalRun" else schema["$defs"][name]
        assert definition["additionalProperties"] is False, name


def test_the_file_holodeck_reads_validates_in_its_eval_run(
    written: tuple[Path, Path, Path],
) -> None:
    _, native, superset = written
    document = json.loads(native.read_text())
    assert holodeck_schema_errors(document) == []
    ours = json.loads(superset.read_text())
    assert holodeck_schema_errors(ours) != []  # the superset is not HoloDeck's (it has more)
    assert ours["metadata"]["run_id"] and ours["report"]["results"][0]["trials"]
    assert "sk-files-probe-9876" not in native.read_text() + superset.read_text()


def test_holodecks_view_of_the_run(written: tuple[Path, Path, Path]) -> None:
    """ERROR folded into failed, scores on HoloDeck's 0-1 scale (no latency in ms), the
    errored case with its expected tools, the multi-turn case rolled up as HoloDeck's
    executor rolls it: the last answer, each metric once with its turns' mean."""
    _, native, superset = written
    report = json.loads(native.read_text())["report"]
    ours = EvalRun.model_validate_json(superset.read_text()).report
    assert [r.status.value for r in ours.results] == ["PASS", "ERROR", "FAIL"]
    summary = report["summary"]
    assert (summary["total_tests"], summary["passed"], summary["failed"]) == (3, 1, 2)
    assert "latency" in ours.summary.average_scores and "latency" not in summary["average_scores"]
    weather, broken, capitals = report["results"]
    scores = [
        m["score"]
        for r in report["results"]
        for m in [*r["metric_results"], *(m for t in r["turns"] or [] for m in t["metric_results"])]
    ]
    assert scores and all(0.0 <= s <= 1.0 for s in scores)
    assert {m["metric_name"] for m in weather["metric_results"]} == {"equality"}
    assert broken["passed"] is False and broken["tools_matched"] is False
    assert broken["expected_tools"] == [
        {"name": "get_weather", "args": {"city": "Paris"}, "count": 1}
    ]
    assert ours.results[1].expected_tools is not None  # kept in the superset too
    assert capitals["agent_response"] == "Rome"
    assert [t["response"] for t in capitals["turns"]] == ["Paris", "Rome"]
    [rolled] = capitals["metric_results"]
    assert (rolled["metric_name"], rolled["score"], rolled["passed"]) == ("equality", 0.5, False)
    assert capitals["expected_tools"] is None and capitals["ground_truth"] is None


def test_a_dagster_partition_writes_the_file_holodeck_reads(tmp_path: Path) -> None:
    """The agent step's EvalRun (docs/holodeck-fidelity.md: "CLI and Dagster") is two files too,
    and the one HoloDeck globs validates in its EvalRun."""
    with run_model_server(pipelines.RULES) as server, dg.instance_for_test() as instance:
        defs = build_definitions(pipelines.make_project(tmp_path, server.openai_base_url))
        pipelines.register(defs, instance)
        assert pipelines.materialize(defs, instance, "v2").success
    folder = tmp_path / "agents" / "geo" / "results" / "geo-agent"
    [native] = folder.glob("*.json")
    [superset] = (folder / SUPERSET_FOLDER).glob("*.json")
    assert native.name == superset.name
    assert holodeck_schema_errors(json.loads(native.read_text())) == []
    assert EvalRun.model_validate_json(superset.read_text()).metadata.partition_key == "v2"


def test_our_readers_prefer_the_superset_and_accept_either(
    written: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent, native, superset = written
    db = tmp_path / "history.duckdb"
    assert main(["history", "sync", str(native.parent), "--db", str(db)]) == 0
    run_id = EvalRun.model_validate_json(superset.read_text()).metadata.run_id
    assert query(db, "SELECT run_id, source_path, errored FROM eval_runs") == [
        (run_id, str(superset), 1)
    ]
    assert main(["history", "import", str(native), "--db", str(db)]) == 0  # the same run
    assert query(db, "SELECT count(*) FROM eval_runs") == [(1,)]
    capsys.readouterr()
    # a HoloDeck file alone (its superset gone) is still a run we read
    alone = tmp_path / "results" / "files-probe" / native.name
    alone.parent.mkdir(parents=True)
    alone.write_bytes(native.read_bytes())
    other = tmp_path / "other.duckdb"
    assert main(["history", "import", str(alone), "--db", str(other)]) == 0
    assert query(other, "SELECT trigger, total_tests FROM eval_runs") == [("import", 3)]
    # rescore named by HoloDeck's file reads the superset: trials, statuses and all
    assert main(["rescore", str(native), "--agent", str(agent)]) == 3
    out = capsys.readouterr().out
    assert "1 passed, 1 failed, 1 errored of 3" in " ".join(out.split())


def peer_python() -> Path:
    python = PEER / "bin" / "python"
    if not (PEER / "bin" / "holodeck").is_file():  # its console script: the install finished
        pytest.skip(f"HoloDeck 0.7.1 is not installed at {PEER} (bash bench/peer_setup.sh)")
    return python


@pytest.mark.slow
def test_holodeck_itself_loads_every_file_we_write(written: tuple[Path, Path, Path]) -> None:
    """HoloDeck's own ``EvalRun`` and its dashboard's loader, on the results folder."""
    _, native, _ = written
    python = peer_python()
    done = subprocess.run(
        [str(python), str(REPO / "bench" / "holodeck_load.py"), str(native.parent)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [folder] = json.loads(done.stdout)["folders"]
    # the run, and the rescored one when that test ran first: every file, every run listed
    assert folder["files"] >= 1 and folder["refused"] == {}, folder
    assert folder["valid"] == folder["dashboard_runs"] == folder["files"], folder
