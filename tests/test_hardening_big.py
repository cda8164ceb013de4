"""Big inputs (issue 25, class 10): a retrieval source of too many files, one file too big,
all of them too big, each a config error naming the tool and the field before any file is
read or any model called; just under the caps, the source indexes. The caps are lowered here
(the real ones: holodeck_core/defaults.py; what the big inputs cost: bench/hostile_bench.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from holodeck_core.testing import run_model_server
from holodeck_core.tools.retrieval import sources
from tests.hostile import no_traceback, run_cli
from tests.test_retrieval import tool_of, write_agent

FILE = "Returns are accepted within 30 days of purchase. " * 4  # 200 bytes


def corpus(folder: Path, files: int, size: int = len(FILE)) -> None:
    (folder / "docs").mkdir(parents=True)
    for i in range(files):
        (folder / "docs" / f"d{i:03d}.md").write_text((FILE * (size // len(FILE) + 1))[:size])


@pytest.mark.parametrize(
    ("shape", "files", "size", "code", "message"),
    [
        ("at every cap", 10, 200, 0, ""),
        ("too many files", 11, 200, 2, "holds 11 files; a retrieval source may hold at most 10"),
        ("a file too big", 1, 1001, 2, "docs/d000.md is 1,001 bytes; a retrieval source file"),
        ("all too big", 10, 201, 2, "holds 2,010 bytes; a retrieval source may hold at most 2,000"),
    ],
)
def test_a_source_past_its_caps_is_a_config_error_before_any_model_call(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shape: str,
    files: int,
    size: int,
    code: int,
    message: str,
) -> None:
    monkeypatch.setattr(sources, "MAX_SOURCE_FILES", 10)
    monkeypatch.setattr(sources, "MAX_SOURCE_FILE_BYTES", 1000)
    monkeypatch.setattr(sources, "MAX_SOURCE_BYTES", 2000)
    corpus(tmp_path, files, size)
    rules = {"default": {"reply": "ok"}}
    with run_model_server(rules) as server:
        cases = [{"name": "q", "input": "returns?", "ground_truth": "ok"}]
        agent = write_agent(tmp_path, server, [tool_of(source="docs")], cases=cases)
        proc = run_cli(["test", str(agent)])
        calls = server.stats()["total_calls"]
    no_traceback(proc)
    assert proc.returncode == code, (shape, proc.stderr)
    assert message in proc.stderr
    if code:
        assert "tools[0] (kb).source" in proc.stderr and calls == 0, shape
        assert not (tmp_path / "results").exists()
