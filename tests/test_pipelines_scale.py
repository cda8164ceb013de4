"""Dagster at scale (issue 29, Deliver 3): the history step opens the history once, the pools
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

from holodeck_core.testing import run_model_server
from holodeck_pipelines.builder import build_definitions
from tests.test_pipelines import RULES, make_project, materialize, register

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
    # the write and the regression, drift and agreement checks share one connection
    assert counted[0] == per_connection, (counted, per_connection)
