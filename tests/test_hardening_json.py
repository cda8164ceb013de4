"""Deep or huge JSON in files we read (docs/agent-yaml.md): an EvalRun to sync, import or
rescore, and retrieval records. Bounded parsing: exit 2 naming the file, no traceback, and
one bad file never keeps ``history sync`` from ingesting the others."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holodeck_core.defaults import MAX_JSON_DEPTH
from holodeck_core.models import bounded_json
from holodeck_core.testing import run_model_server
from tests.hostile import agent_yaml, no_traceback, run_cli


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def deep_inside(run: dict[str, Any], levels: int) -> str:
    """A valid EvalRun with a deep value where ``Any`` is allowed (a tool result)."""
    run = json.loads(json.dumps(run))
    run["metadata"]["run_id"] = f"deep-{levels}"
    run["report"]["results"][0]["metadata"] = {"x": json.loads(nested(levels))}
    return json.dumps(run)


def huge_int(run: dict[str, Any], digits: int) -> str:
    text = json.dumps({**run, "metadata": {**run["metadata"], "run_id": "huge"}})
    return text.replace('"passed": 1', '"passed": 1' + "0" * digits, 1)


BAD: dict[str, Callable[[dict[str, Any]], str]] = {
    "levels-300": lambda run: nested(300),
    "levels-100000": lambda run: nested(100_000),
    "deep-value": lambda run: deep_inside(run, 400),
    "int-5000": lambda run: huge_int(run, 5000),
    "int-20000": lambda run: huge_int(run, 20_000),
}


@pytest.fixture(scope="module")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("good")
    with run_model_server({"default": {"reply": "ok"}}) as server:
        agent = agent_yaml(folder, server.openai_base_url, "- {input: q, ground_truth: ok}\n")
        assert run_cli(["test", str(agent), "-q"]).returncode == 0
    return sorted((folder / "results").glob("*/holodeck-pipelines/*.json"))[0]


def count_runs(db: Path) -> int:
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute("SELECT count(*) FROM eval_runs").fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("shape", list(BAD))
def test_sync_ingests_the_good_runs_around_a_bad_file_and_names_it(
    tmp_path: Path, good_run: Path, shape: str
) -> None:
    run = json.loads(good_run.read_text())
    results = tmp_path / "results" / "hostile"
    results.mkdir(parents=True)
    (results / "a-good.json").write_text(good_run.read_text())
    (results / "b-bad.json").write_text(BAD[shape](run))
    second = {**run, "metadata": {**run["metadata"], "run_id": "second-good"}}
    (results / "c-good.json").write_text(json.dumps(second))
    db = tmp_path / "h.duckdb"
    proc = run_cli(["history", "sync", str(tmp_path / "results"), "--db", str(db)])
    no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert "b-bad.json" in proc.stderr and "not read" in proc.stderr, proc.stderr
    assert "synced 2 run(s)" in proc.stderr
    assert count_runs(db) == 2


@pytest.mark.parametrize("shape", ["levels-100000", "deep-value", "int-5000"])
@pytest.mark.parametrize("command", ["import", "rescore"])
def test_import_and_rescore_of_a_bad_file_is_exit_2_naming_it(
    tmp_path: Path, good_run: Path, shape: str, command: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(BAD[shape](json.loads(good_run.read_text())))
    args = (
        ["history", "import", str(bad), "--db", str(tmp_path / "h.duckdb")]
        if command == "import"
        else ["rescore", str(bad)]
    )
    proc = run_cli(args)
    no_traceback(proc)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "bad.json" in proc.stderr


@settings(max_examples=200, deadline=None)
@given(levels=st.integers(min_value=0, max_value=3000), digits=st.integers(0, 6000))
def test_bounded_loads_either_reads_or_refuses_clearly(levels: int, digits: int) -> None:
    text = "[" * levels + "1" + "0" * digits + "]" * levels
    try:
        value = bounded_json.loads(text)
    except bounded_json.BoundedJSONError as exc:
        assert levels > MAX_JSON_DEPTH or digits >= 4300, exc
    else:
        assert levels <= MAX_JSON_DEPTH and bounded_json.depth(value, 10_000) == levels
