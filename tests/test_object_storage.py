"""Object storage (docs/scale-out.md): stage data, EvalRuns and the history lake in an S3 bucket,
through the real ``s3fs``/``boto3`` clients against moto's S3 server on 127.0.0.1
(tests/services.py). Credentials come from the environment only and never reach a file, the bucket
or Dagster."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from holodeck_core.cli.main import main
from holodeck_core.config.project import Project
from holodeck_core.history import store
from holodeck_core.history.backend import project_history
from holodeck_core.history.ducklake import DuckLake
from holodeck_core.testing import run_model_server
from holodeck_pipelines.builder import build_definitions
from tests.dagster_helpers import materialize, register
from tests.history_helpers import run_cli
from tests.services import S3, s3_server
from tests.test_pipelines import RULES, make_project

BUCKET = "holodeck-scale-out"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3]:
    with s3_server() as server:
        for variable, value in server.env().items():
            monkeypatch.setenv(variable, value)
        server.client().create_bucket(Bucket=BUCKET)
        yield server


def bucket_objects(server: S3) -> dict[str, bytes]:
    client = server.client()
    listed = client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    return {
        item["Key"]: client.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read()
        for item in listed
    }


def supersets(server: S3) -> dict[str, bytes]:
    """The bucket's EvalRun supersets (``results/<slug>/holodeck-pipelines/``), without the
    HoloDeck-shaped files beside them."""
    return {
        key: body for key, body in bucket_objects(server).items() if "/holodeck-pipelines/" in key
    }


def test_a_partition_lands_in_the_bucket_and_history_sync_reads_it_back(
    tmp_path: Path, s3: S3, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path, server.openai_base_url)
        settings = (tmp_path / "holodeck.yaml").read_text()
        (tmp_path / "holodeck.yaml").write_text(
            settings
            + f"artifacts_url: s3://{BUCKET}/artifacts\n"
            + f"results_url: s3://{BUCKET}/results\n"
            + f"history_url: ducklake:{tmp_path}/catalog.ducklake?data=s3://{BUCKET}/history\n"
        )
        project = type(project).discover(tmp_path)
        defs = build_definitions(project)
        register(defs, instance)
        result = materialize(defs, instance, "v2")
        assert result.success
        events = [
            str(record.event_log_entry)
            for record in instance.get_records_for_run(result.run_id).records
        ]
    objects = bucket_objects(s3)
    stages = {key for key in objects if key.startswith("artifacts/")}
    assert stages == {
        f"artifacts/geo_agent/{asset}/default/v2.json"
        for asset in (
            "processed_files",
            "agent_responses",
            "metric_results",
            "report_summary",
            "eval_history",
        )
    }
    run_keys = sorted(key for key in objects if key.startswith("results/geo-agent/"))
    [holodeck_key, eval_run_key] = run_keys  # HoloDeck's file and our superset
    assert eval_run_key == holodeck_key.replace("geo-agent/", "geo-agent/holodeck-pipelines/")
    eval_run = json.loads(objects[eval_run_key])
    assert "partition_key" not in json.loads(objects[holodeck_key])["metadata"]
    assert eval_run["metadata"]["partition_key"] == "v2"
    assert not (tmp_path / "agents" / "geo" / "results").exists()  # nothing on local disk
    assert (tmp_path / "catalog.ducklake").is_file()  # the lake's catalog; its data: S3
    # credentials: from the environment only, never written anywhere
    for where, text in (
        *((key, value.decode(errors="ignore")) for key, value in objects.items()),
        *(("dagster event", event) for event in events),
    ):
        assert s3.secret not in text, where
    assert "AWS_SECRET_ACCESS_KEY" in repr(defs.resources["holodeck_io_manager"])

    # a fresh DuckDB file, filled back from the bucket's EvalRuns
    db = tmp_path / "again.duckdb"
    code, _, err = run_cli(capsys, "sync", f"s3://{BUCKET}/results", "--db", str(db))
    assert code == 0 and "synced 1 run(s)" in " ".join(err.split()), err
    with store.reader(db) as con:
        [(source, partition)] = con.execute(
            "SELECT source_path, partition_key FROM eval_runs"
        ).fetchall()
    assert source == f"s3://{BUCKET}/{eval_run_key}" and partition == "v2"
    with store.reader(project_history(project)) as con:
        assert con.execute("SELECT count(*), min(partition_key) FROM v_runs").fetchall() == [
            (1, "v2")
        ]
    out = tmp_path / "exported"  # rebuilt from the EvalRun in the bucket
    code, _, _ = run_cli(capsys, "export", "--format", "json", "--db", str(db), "--out", str(out))
    assert code == 0 and json.loads(next(out.rglob("*.json")).read_text()) == eval_run


def test_the_environment_sets_every_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from holodeck_core.config.project import Project, results_dir

    (tmp_path / "holodeck.yaml").write_text("artifacts_url: s3://from-file/artifacts\n")
    agent_file = tmp_path / "agent.yaml"
    assert Project.discover(tmp_path).artifacts_url == "s3://from-file/artifacts"
    assert results_dir(agent_file, "Geo Agent") == tmp_path / "results" / "geo-agent"
    monkeypatch.setenv("HOLODECK_ARTIFACTS_URL", f"s3://{BUCKET}/artifacts")
    monkeypatch.setenv("HOLODECK_RESULTS_URL", f"s3://{BUCKET}/results")
    lake = f"ducklake:{tmp_path}/catalog.ducklake?data=s3://{BUCKET}/history"
    monkeypatch.setenv("HOLODECK_HISTORY_URL", lake)
    project = Project.discover(tmp_path)
    assert project.artifacts_url == f"s3://{BUCKET}/artifacts"
    assert str(results_dir(agent_file, "Geo Agent")) == f"s3://{BUCKET}/results/geo-agent"
    assert project_history(project) == DuckLake.parse(lake)
    assert DuckLake.parse(lake).data == f"s3://{BUCKET}/history/"


def test_a_lake_reader_on_s3_sees_the_runs_writers_commit(s3: S3, tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from tests.history_helpers import ingest_runs, make_run

    lake = DuckLake.parse(f"ducklake:{tmp_path}/catalog.ducklake?data=s3://{BUCKET}/lake")
    count = "SELECT count(*) FROM eval_runs"
    when = datetime(2026, 1, 1, tzinfo=UTC)
    ingest_runs(lake, [make_run("PPFP", when, run_id="first")])
    with store.reader(lake) as con:
        assert con.execute(count).fetchall() == [(1,)]
    ingest_runs(lake, [make_run("PPPP", when, run_id="second")])
    with store.reader(lake) as con:
        assert con.execute(count).fetchall() == [(2,)]


def test_an_eval_run_in_the_bucket_is_rescored_into_the_bucket(
    tmp_path: Path, s3: S3, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``holodeck rescore s3://…/run.json`` (docs/scale-out.md): read from the bucket, its agent
    found among holodeck.yaml's (the file is not beside it), the new EvalRun written to the bucket
    too; a run id whose EvalRun the history knows by its URL works the same."""
    with run_model_server(RULES) as server:
        make_project(tmp_path, server.openai_base_url)
        with (tmp_path / "holodeck.yaml").open("a") as settings:
            settings.write(f"results_url: s3://{BUCKET}/results\n")
        monkeypatch.chdir(tmp_path)
        agent = tmp_path / "agents" / "geo" / "agent.yaml"
        before = set(supersets(s3))  # the bucket is shared with the module's other tests
        assert main(["test", str(agent), "-q"]) == 1  # v1 answers Lyon, not Paris
    [key] = set(supersets(s3)) - before
    original = json.loads(supersets(s3)[key])["metadata"]["run_id"]
    agent.write_text(
        agent.read_text().replace("metric: equality}", "metric: regex, pattern: Lyon}")
    )
    assert main(["rescore", f"s3://{BUCKET}/{key}"]) == 0
    assert main(["rescore", original[:12]]) == 0
    runs = [json.loads(body) for name, body in supersets(s3).items() if name not in before]
    rescored = [run for run in runs if run["metadata"]["trigger"] == "rescore"]
    assert len(runs) == 3 and len(rescored) == 2
    for run in rescored:
        assert run["metadata"]["provenance"]["rescored_from"] == original
        assert run["report"]["summary"]["passed"] == 4
    with store.reader(project_history(Project.discover(tmp_path))) as con:
        assert con.execute("SELECT count(*) FROM eval_runs").fetchall() == [(3,)]
    capsys.readouterr()
    assert main(["rescore", f"s3://{BUCKET}/results/geo-agent/gone.json"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"no EvalRun at s3://{BUCKET}/results/geo-agent/gone.json" in err
    assert "Traceback" not in err
