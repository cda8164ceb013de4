"""Dagster on PostgreSQL (docs/scale-out.md): the deploy profile ``deploy/postgres/dagster.yaml``
against a real server the test starts on 127.0.0.1 (tests/services.py), a partition materialized
through it, the connection read from the environment only, and the multiprocess executor."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from holodeck_core.config.project import Project
from holodeck_core.testing import run_model_server
from holodeck_pipelines.builder import build_definitions
from tests.conftest import REPO
from tests.dagster_helpers import history_rows, materialize, register
from tests.services import PG_PASSWORD, Postgres, postgres_server
from tests.test_pipelines import RULES, make_project

PROFILE = REPO / "deploy" / "postgres" / "dagster.yaml"


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    with postgres_server() as server:
        yield server


def postgres_instance(
    home: Path, server: Postgres, monkeypatch: pytest.MonkeyPatch
) -> dg.DagsterInstance:
    """An instance from the deploy profile, as a worker would load it (DAGSTER_HOME)."""
    home.mkdir(parents=True)
    shutil.copy(PROFILE, home / "dagster.yaml")
    for variable, value in server.env().items():
        monkeypatch.setenv(variable, value)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return dg.DagsterInstance.get()


@contextmanager
def geo_on_postgres(
    tmp_path: Path, server: Postgres, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Project, dg.DagsterInstance]]:
    """The test project (its model on the loopback server) and a PostgreSQL instance."""
    with (
        run_model_server(RULES) as model,
        postgres_instance(tmp_path / "dagster-home", server, monkeypatch) as instance,
    ):
        yield make_project(tmp_path / "project", model.openai_base_url), instance


def test_the_profile_keeps_the_connection_out_of_the_file() -> None:
    text = PROFILE.read_text()
    for variable in Postgres("h", 1, "u", "p", "d").env():
        assert f"env: {variable}" in text
    assert "password: " not in text.replace("password:\n", "")


def test_a_partition_materializes_through_a_postgres_backed_instance(
    tmp_path: Path, postgres: Postgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage

    with geo_on_postgres(tmp_path, postgres, monkeypatch) as (project, instance):
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        defs = build_definitions(project)
        assert register(defs, instance) == ["v1", "v2"]
        result = materialize(defs, instance, "v2")
        assert result.success
        run = instance.get_run_by_id(result.run_id)
        assert run is not None and run.is_success
        assert run.tags["dagster/partition"] == "default|v2"
        materialized = instance.get_materialized_partitions(
            dg.AssetKey(["geo_agent", "eval_history"])
        )
        assert materialized == {"default|v2"}
    assert history_rows(project, "SELECT partition_key, dagster_run_id FROM eval_runs") == [
        ("v2", result.run_id)
    ]
    # the password lives only in the environment: not in the instance folder
    for path in (tmp_path / "dagster-home").rglob("*"):
        if path.is_file():
            assert PG_PASSWORD not in path.read_text(errors="ignore"), path


def eval_job() -> Any:
    """The agent's job, rebuilt by each step process of the multiprocess executor."""
    project = Project.discover(Path(os.environ["HOLODECK_PROJECT_ROOT"]))
    return build_definitions(project).resolve_job_def("Geo_agent_eval")


def test_the_multiprocess_executor_runs_each_step_in_its_own_process(
    tmp_path: Path, postgres: Postgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    with geo_on_postgres(tmp_path, postgres, monkeypatch) as (project, instance):
        with (tmp_path / "project" / "holodeck.yaml").open("a") as settings:
            settings.write("executor: multiprocess\n")
        monkeypatch.setenv("HOLODECK_PROJECT_ROOT", str(tmp_path / "project"))
        register(build_definitions(project), instance)
        with dg.execute_job(
            # step processes import eval_job by its package name (from the repository root)
            dg.build_reconstructable_job("tests.test_postgres", "eval_job"),
            instance=instance,
            tags={"dagster/partition": "default|v2"},
        ) as result:
            assert result.success
            pids = {
                event.pid for event in result.all_events if event.event_type_value == "STEP_START"
            }
    assert len(pids) == 5 and os.getpid() not in pids  # five steps, five processes
    assert history_rows(project, "SELECT partition_key, pass_rate FROM eval_runs") == [("v2", 1.0)]
