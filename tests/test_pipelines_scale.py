"""Dagster at scale (docs/scale-out.md): the history step opens the history once, the pools
are checked at a run's start, and a backfill of many prompt versions runs as one run."""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from holodeck_core.cli.main import main
from holodeck_core.config.project import Project
from holodeck_core.errors import ConfigError
from holodeck_core.testing import run_model_server
from holodeck_pipelines.builder import build_definitions
from holodeck_pipelines.pools import (
    HISTORY_POOL,
    LLM_POOL,
    apply_pools,
    pool_limits,
    pool_problems,
)
from tests.dagster_helpers import materialize, register
from tests.test_pipelines import RULES, make_project

IN_OPEN = 0x20
IN_CLOSE = 0x08 | 0x10  # after writing, after reading


@contextmanager
def opens_of(path: Path) -> Iterator[list[int]]:
    """Count the times any process opens ``path`` (Linux inotify); the count is in the list
    when the block ends. Closes are watched too: inotify merges an event with an identical
    one still queued, and an open is then never next to another open."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    assert fd >= 0, os.strerror(ctypes.get_errno())
    assert libc.inotify_add_watch(fd, str(path).encode(), IN_OPEN | IN_CLOSE) >= 0
    counted: list[int] = []

    def drain() -> int:
        events = 0
        while True:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                return events
            offset = 0
            while offset < len(data):
                _, mask, _, length = struct.unpack_from("iIII", data, offset)
                offset += 16 + length
                events += bool(mask & IN_OPEN)

    try:
        yield counted
        counted.append(drain())
    finally:
        os.close(fd)


def connection_opens(path: Path) -> int:
    """How many file opens one DuckDB connection to ``path`` makes (its probes included)."""
    with opens_of(path) as counted:
        duckdb.connect(str(path), read_only=True).close()
    return counted[0]


@pytest.mark.skipif(not Path("/proc/sys/fs/inotify").is_dir(), reason="needs Linux inotify")
def test_the_history_step_opens_the_duckdb_file_once(tmp_path: Path) -> None:
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path, server.openai_base_url)
        defs = build_definitions(project)
        register(defs, instance)
        assert materialize(defs, instance, "v1").success  # creates the history
        per_connection = connection_opens(project.history_db)
        with opens_of(project.history_db) as counted:
            result = materialize(defs, instance, "v2")
    assert result.success
    # the write and the regression, drift and agreement checks share one connection; the
    # run's other reader is processed_files' cost estimate (docs/cost.md: measured tokens per case)
    assert counted[0] == 2 * per_connection, (counted, per_connection)


def test_a_run_without_its_pools_fails_at_its_start_naming_the_command(tmp_path: Path) -> None:
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path, server.openai_base_url)
        defs = build_definitions(project)
        register(defs, instance)
        instance.event_log_storage.delete_concurrency_limit(HISTORY_POOL)
        result = materialize(defs, instance, "v1")
        failures = [event for event in result.all_events if event.is_step_failure]
        calls = server.stats()["by_route"]
    assert not result.success
    [failure] = failures  # the first step, never retried
    assert failure.step_key == "geo_agent__processed_files"
    message = failure.step_failure_data.error.message  # type: ignore[union-attr]
    assert "the Dagster pool history_db has no limit on this instance" in message
    assert "`dagster instance concurrency set history_db 1`" in message
    assert not calls  # no model call was made


def test_history_db_above_one_is_refused_for_the_duckdb_file_and_allowed_for_a_lake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path, "http://127.0.0.1:9/v1")
    with dg.instance_for_test() as instance:
        apply_pools(instance, project)
        assert pool_problems(instance, project) == []
        instance.event_log_storage.set_concurrency_slots(HISTORY_POOL, 3)
        [problem] = pool_problems(instance, project)
        assert "history_db allows 3 writers, but the history is a DuckDB file" in problem
        assert "`dagster instance concurrency set history_db 1`" in problem
        (tmp_path / "holodeck.yaml").write_text(
            "agents: [agents/geo/agent.yaml]\nhistory_db_pool_limit: 3\n"
        )
        with pytest.raises(ConfigError, match="history_db_pool_limit 3, but the history is"):
            pool_limits(Project.discover(tmp_path))
        monkeypatch.setenv("HOLODECK_HISTORY_URL", str(tmp_path / "lake"))
        lake = Project.discover(tmp_path)
        assert pool_limits(lake) == {LLM_POOL: 4, HISTORY_POOL: 3}
        assert pool_problems(instance, lake) == []
        # unset, a lake's history_db takes llm_api's limit; the file's stays 1
        (tmp_path / "holodeck.yaml").write_text(
            "agents: [agents/geo/agent.yaml]\nllm_api_pool_limit: 6\n"
        )
        assert pool_limits(Project.discover(tmp_path)) == {LLM_POOL: 6, HISTORY_POOL: 6}
        monkeypatch.delenv("HOLODECK_HISTORY_URL")
        assert pool_limits(Project.discover(tmp_path)) == {LLM_POOL: 6, HISTORY_POOL: 1}


def test_holodeck_pools_sets_every_pool_from_holodeck_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make_project(tmp_path, "http://127.0.0.1:9/v1")
    (tmp_path / "holodeck.yaml").write_text(
        "agents: [agents/geo/agent.yaml]\nllm_api_pool_limit: 6\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    assert main(["pools"]) == 0
    assert capsys.readouterr().out.splitlines() == ["pool llm_api: 6", "pool history_db: 1"]
    with dg.DagsterInstance.get() as instance:
        limits = {p.name: p.limit for p in instance.event_log_storage.get_pool_limits()}
    assert limits == {LLM_POOL: 6, HISTORY_POOL: 1}
