"""Big inputs (docs/agent-yaml.md): a retrieval source of too many files, one file too big,
all of them too big, each a config error naming the tool and the field before any file is
read or any model called; just under the caps, the source indexes. The caps are lowered here
(the real ones: holodeck_core/defaults.py; what the big inputs cost: bench/hostile_bench.py)."""

from __future__ import annotations

import json
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


def test_the_dashboard_shows_the_start_of_a_huge_response_and_links_the_rest(
    tmp_path: Path,
) -> None:
    """A 2 MB response and input (``history sync`` accepts them): the explorer page carries
    20,000 characters of each and a "show all" link; the link serves the whole text, plain."""
    from plotly.utils import PlotlyJSONEncoder

    from holodeck_core.dashboard.app import create_app
    from holodeck_core.dashboard.explorer_view import page
    from tests.history_helpers import day, ingest_runs, make_run

    db = tmp_path / "history.duckdb"
    run = make_run("PPPP", day(0), run_id="huge")
    huge = "<b>" + "word " * 400_000 + "END-OF-RESPONSE"
    first = run.report.results[0].model_copy(update={"agent_response": huge, "test_input": huge})
    run.report.results[0] = first
    assert ingest_runs(db, [run]).ingested
    case_id = "refund-policy"
    shown = json.dumps(page(db, {"run": ["huge"], "case": [case_id]}), cls=PlotlyJSONEncoder)
    assert len(shown) < 200_000 and "END-OF-RESPONSE" not in shown
    assert shown.count("20,000 of 2,000,018 characters shown") == 2 and "show all" in shown
    client = create_app(db).server.test_client()
    for field in ("agent_response", "test_input"):
        whole = client.get(f"/text?run=huge&case={case_id}&field={field}")
        assert whole.status_code == 200 and whole.mimetype == "text/plain"
        assert whole.get_data(as_text=True) == huge
    assert client.get(f"/text?run=huge&case={case_id}&field=run_id").status_code == 400
    assert client.get("/text?run=nope&case=x&field=agent_response").status_code == 404


def test_sources_are_read_in_bounded_batches_in_their_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Documents stream into the index (docs/agent-yaml.md): at most a batch of files and
    bytes is held as text at once, every file once, in the source's order (so chunk ids and
    the index are what reading them all at once made); a file past the bytes is alone."""
    monkeypatch.setattr(sources, "DOCUMENT_BATCH_FILES", 3)
    monkeypatch.setattr(sources, "DOCUMENT_BATCH_BYTES", 500)
    files = []
    for i, size in enumerate([100, 100, 100, 100, 450, 600, 10, 10]):
        path = tmp_path / f"{i}.md"
        path.write_text("x" * size)
        files.append(sources.SourceFile(path, str(i), ""))
    batches = list(sources.document_batches(files))
    assert [file for batch in batches for file in batch] == files
    assert [[f.display for f in b] for b in batches] == [
        ["0", "1", "2"],
        ["3"],
        ["4"],
        ["5"],
        ["6", "7"],
    ]
