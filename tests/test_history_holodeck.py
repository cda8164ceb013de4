"""The run history and HoloDeck: importing its EvalRun files (the corpus in ../shared) and
inferring what it does not record, exports that validate against HoloDeck 0.7.1's schemas with its
report shapes and no secret (also for every sample agent's config), JSON and Parquet exports, and
an export naming the runs whose file is gone."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from holodeck_core.history import holodeck_export, holodeck_import
from holodeck_core.models import Agent, EvalRun
from tests import history_helpers
from tests.conftest import no_shared
from tests.history_helpers import (
    AGENT,
    CANARY,
    GENERATED,
    HOLODECK,
    counts,
    day,
    make_run,
    query,
    run_cli,
    write_run,
)

# Shared fixtures: pytest finds a fixture by its name in the test module.
db = history_helpers.db


# HoloDeck 0.7.1's report shapes (its report models, as seen in its real output).
HD_RESULT_KEYS = set(holodeck_export.RESULT_FIELDS)
HD_METRIC_KEYS = set(holodeck_export.METRIC_RESULT_FIELDS)
HD_SUMMARY_KEYS = set(holodeck_export.SUMMARY_FIELDS)
HD_REPORT_KEYS = set(holodeck_export.REPORT_FIELDS)


def need_corpus() -> None:
    if not GENERATED.is_dir():
        pytest.skip(no_shared(GENERATED))


# --------------------------------------------------------------------------- HoloDeck


def test_holodeck_corpus_files_import(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need_corpus()
    code, _, err = run_cli(capsys, "import", str(GENERATED), "--db", str(db))
    assert code == 0, err
    files = sorted(GENERATED.glob("*/evalrun_example.json"))
    expected_ids = {hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
    rows = query(
        db,
        "SELECT run_id, agent_name, trigger, total_tests, passed, failed, errored, pass_rate "
        "FROM eval_runs ORDER BY agent_name",
    )
    assert {r[0] for r in rows} == expected_ids and len(rows) == 3
    assert {r[2] for r in rows} == {"import"}
    by_agent = {r[1]: r[3:] for r in rows}
    assert by_agent["fake-bench-agent"] == (20, 16, 4, 0, pytest.approx(0.8))
    assert by_agent["geval-probe"] == (10, 10, 0, 0, pytest.approx(1.0))
    assert by_agent["tools-probe"] == (3, 2, 1, 0, pytest.approx(2 / 3))
    kinds = dict(query(db, "SELECT DISTINCT metric_name, kind FROM metric_results"))
    assert kinds == {"bleu": "standard", "Correctness": "geval", "equality": "standard"}
    assert query(db, "SELECT count(*) FROM tool_invocations") == [(3,)]
    before = counts(db)
    assert run_cli(capsys, "import", str(GENERATED), "--db", str(db))[0] == 0
    assert counts(db) == before


def test_import_infers_what_holodeck_does_not_record(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = holodeck_export.to_holodeck(make_run("PFEP", day(0), run_id="ours"))
    for result in document["report"]["results"]:
        assert "latency" not in {m["metric_name"] for m in result["metric_results"]}  # ms: ours
        for metric in result["metric_results"]:
            del metric["kind"]
    # an export of an earlier release put a unit metric's raw value in `score`, its unit in
    # `scale`: still read as the unit metric it is
    old_latency = {"score": 454.0, "scale": "ms", "threshold": 2000.0, "passed": True}
    document["report"]["results"][0]["metric_results"].append(
        {**document["report"]["results"][0]["metric_results"][0], "metric_name": "latency"}
        | old_latency
    )
    document["report"]["results"][0]["metric_results"].append(
        {
            "metric_name": "exact_grader",
            "score": 1.0,
            "threshold": None,
            "passed": True,
            "scale": None,
            "error": None,
            "retry_count": 0,
            "evaluation_time_ms": 0,
            "model_used": None,
            "reasoning": None,
        }
    )
    path = tmp_path / "hd.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    code, _, err = run_cli(capsys, "import", str(path), "--db", str(db))
    assert code == 0, err
    run = query(db, "SELECT run_id, trigger, passed, failed, errored, dataset_hash FROM eval_runs")
    assert run[0][:5] == (hashlib.sha256(path.read_bytes()).hexdigest(), "import", 2, 1, 1)
    assert run[0][5] is not None
    kinds = dict(query(db, "SELECT DISTINCT metric_name, kind FROM metric_results"))
    assert kinds == {"faithfulness": "rag", "latency": "standard", "exact_grader": "code"}
    assert query(
        db, "SELECT DISTINCT unit, direction FROM metric_results WHERE metric_name = 'latency'"
    ) == [("ms", "lower_is_better")]
    statuses = query(db, "SELECT case_id, status FROM test_results ORDER BY case_index")
    assert statuses == [
        ("refund-policy", "PASS"),
        ("order-status", "FAIL"),
        ("weather-paris", "ERROR"),
        ("escalation", "PASS"),
    ]
    summary = holodeck_import.load_run_file(path).run.report.summary
    assert (summary.passed, summary.failed, summary.errored) == (2, 1, 1)  # ERROR unfolded
    assert holodeck_import.infer_metric_kind("contextual_recall", None) == "rag"
    assert holodeck_import.infer_metric_kind("Helpfulness", None) == "geval"


def holodeck_validators() -> tuple[
    jsonschema.Draft202012Validator, jsonschema.Draft202012Validator
]:
    contracts = HOLODECK / "specs" / "031-eval-runs-dashboard" / "contracts"
    eval_run = json.loads((contracts / "eval_run.schema.json").read_text())
    prompt = json.loads((contracts / "prompt_version.schema.json").read_text())
    agent = json.loads((HOLODECK / "schemas" / "agent.schema.json").read_text())
    registry: Registry[Any] = Registry().with_resources(
        [(s["$id"], Resource.from_contents(s)) for s in (eval_run, prompt)]
    )
    return (
        jsonschema.Draft202012Validator(eval_run, registry=registry),
        jsonschema.Draft202012Validator(agent),
    )


def test_exports_validate_against_holodeck_schemas(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    need_corpus()
    ours = make_run("PFEP", day(0), run_id="ours-with-error")
    write_run(tmp_path / "results", ours)
    assert (
        run_cli(capsys, "import", str(GENERATED), str(tmp_path / "results"), "--db", str(db))[0]
        == 0
    )
    out = tmp_path / "export"
    code, _, err = run_cli(
        capsys, "export", "--format", "holodeck", "--out", str(out), "--db", str(db)
    )
    assert code == 0, err
    files = sorted(out.rglob("*.json"))
    assert len(files) == 4
    run_validator, agent_validator = holodeck_validators()
    for file in files:
        text = file.read_text(encoding="utf-8")
        assert CANARY not in text
        document = json.loads(text)
        run_validator.validate(document)
        agent_validator.validate(document["metadata"]["agent_config"])
        report = document["report"]
        assert set(report) == HD_REPORT_KEYS
        assert set(report["summary"]) == HD_SUMMARY_KEYS
        summary = report["summary"]
        assert summary["passed"] + summary["failed"] == summary["total_tests"]
        assert all(isinstance(v, str) for v in report["environment"].values())
        for result in report["results"]:
            assert set(result) == HD_RESULT_KEYS
            assert all(set(m) == HD_METRIC_KEYS for m in result["metric_results"])
            assert all(isinstance(m["passed"], bool) for m in result["metric_results"])
            # HoloDeck 0.7.1's MetricResult requires a number (latency: ms, errors: 0.0)
            assert all(isinstance(m["score"], float) for m in result["metric_results"])
    mine = json.loads((out / AGENT).joinpath(holodeck_export.holodeck_file_name(ours)).read_text())
    assert mine["report"]["summary"]["failed"] == 2  # FAIL + ERROR folded
    assert [r["passed"] for r in mine["report"]["results"]] == [True, False, False, True]
    config = mine["metadata"]["agent_config"]
    assert config["instructions"] == {"file": "prompts/system.md", "inline": None}
    assert [m["type"] for m in config["evaluations"]["metrics"]] == ["rag", "code"]
    assert "id" not in config["test_cases"][0] and "mock" not in config["tools"][0]
    assert "test_cases_file" not in config  # HoloDeck 0.7.1's Agent model forbids it

    code, _, err = run_cli(
        capsys,
        "export",
        "--format",
        "json",
        "--out",
        str(tmp_path / "json"),
        "--run",
        "ours-with-error",
        "--db",
        str(db),
    )
    assert code == 0, err
    (exported,) = (tmp_path / "json").rglob("*.json")
    # Equal to the run as its file holds it (the secret was written as '***').
    assert EvalRun.model_validate_json(exported.read_text()) == EvalRun.model_validate_json(
        ours.to_json()
    )

    code, _, err = run_cli(
        capsys,
        "export",
        "--format",
        "parquet",
        "--out",
        str(tmp_path / "pq"),
        "--agent",
        AGENT,
        "--db",
        str(db),
    )
    assert code == 0, err
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "pq" / "test_results.parquet").num_rows == 4
    assert pq.read_table(tmp_path / "pq" / "eval_runs.parquet").num_rows == 1


def test_agent_config_export_validates_for_every_sample_agent() -> None:
    need_corpus()
    import yaml

    _, agent_validator = holodeck_validators()
    configs = sorted(HOLODECK.glob("**/agent.yaml"))
    assert len(configs) >= 10
    for config in configs:
        agent = Agent.model_validate(yaml.safe_load(config.read_text(encoding="utf-8")))
        exported = holodeck_export.to_holodeck(
            make_run("P", day(0), run_id="x", agent=agent, cases=("only-case",))
        )
        agent_validator.validate(exported["metadata"]["agent_config"])


def test_export_names_runs_whose_file_is_gone(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = write_run(tmp_path / "results", make_run("PPPP", day(0), run_id="kept"))
    gone = write_run(tmp_path / "results", make_run("PPFP", day(1), run_id="gone"))
    assert run_cli(capsys, "sync", str(tmp_path / "results"), "--db", str(db))[0] == 0
    gone.unlink()
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "export", "--format", "json", "--out", str(out), "--db", str(db))
    assert code == 3
    assert str(gone.resolve()) in err and "gone" in err
    assert [p.name for p in out.rglob("*.json")] == [
        holodeck_export.holodeck_file_name(EvalRun.model_validate_json(kept.read_text()))
    ]
