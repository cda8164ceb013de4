"""``holodeck test`` and the Dagster ``eval_history`` step record a finished run through one
function, :func:`holodeck_core.engine.record.recording` (docs/architecture.md): the same
preparation of the rows, the same writer, the same errors."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from holodeck_core.cli.main import main
from holodeck_core.engine import record
from holodeck_core.testing import run_model_server

AGENT = """\
name: one-path
model: {{provider: openai, name: m, endpoint: "{url}", api_key: sk-test-123456}}
instructions: {{inline: Answer briefly.}}
evaluations:
  metrics: [{{type: standard, metric: equality}}]
test_cases:
  - {{name: c1, input: "capital of France?", ground_truth: Paris}}
"""


def test_the_cli_records_its_run_through_the_one_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []
    original = record.recording

    @contextlib.contextmanager
    def spy(*args: Any, **kwargs: Any) -> Iterator[record.Recording]:
        calls.append({"runs": args[1], **kwargs})
        with original(*args, **kwargs) as opened:
            yield opened

    monkeypatch.setattr(record, "recording", spy)
    agent = tmp_path / "agent.yaml"
    with run_model_server({"rules": [{"match": {"user": "capital"}, "reply": "Paris"}]}) as server:
        agent.write_text(AGENT.format(url=server.openai_base_url))
        assert main(["test", str(agent), "-q"]) == 0
    [call] = calls
    [(run, path)] = call["runs"].values()
    assert path.is_file() and call["lock_timeout"] == 5.0
    db = Path(os.environ["HOLODECK_HOME"]) / "history.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT run_id FROM eval_runs").fetchall() == [(run.metadata.run_id,)]
