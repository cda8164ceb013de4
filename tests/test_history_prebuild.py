"""A new history's schema is built while the run's model calls are in flight, under a temporary
name, and linked into place only when the run is recorded (``history/store.py`` ``prebuild``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from holodeck_core.cli import console
from holodeck_core.cli.main import main
from holodeck_core.testing import run_model_server
from tests.test_run_overhead import run_on_agent, write_agent

RULES = {"rules": [{"match": {"user": "case"}, "reply": "answer"}]}


def prebuilt(history: Path) -> list[Path]:
    return sorted(history.parent.glob(f".{history.name}.*.tmp"))


def wait_for_prebuilt(history: Path) -> list[Path]:
    """The preload thread builds the schema while the cases run (a fraction of a second)."""
    import time

    deadline = time.monotonic() + 30
    while not prebuilt(history) and time.monotonic() < deadline:
        time.sleep(0.01)
    return prebuilt(history)


def test_a_first_run_builds_the_history_while_its_cases_run_and_links_it_when_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = tmp_path / "holodeck-home" / "history.duckdb"
    during: list[tuple[bool, list[Path]]] = []
    case_done = console.Progress.case_done

    def seeing(self: console.Progress, *args: Any) -> None:
        if not during:  # nothing at the history's path, its schema ready beside it
            during.append((history.exists(), wait_for_prebuilt(history)))
        case_done(self, *args)

    monkeypatch.setattr(console.Progress, "case_done", seeing)
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, server.openai_base_url, 3)
        assert main(["test", str(agent), "-q"]) == 0
    [(existed, temporary)] = during
    assert not existed and len(temporary) == 1
    assert not temporary[0].exists() and prebuilt(history) == []  # taken, not copied
    con = duckdb.connect(str(history), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM v_runs").fetchone() == (1,)
    finally:
        con.close()


def test_an_interrupted_first_run_leaves_no_history_behind(tmp_path: Path) -> None:
    """Ctrl-C (a SIGINT from the first finished case) after the schema was built: no EvalRun,
    so no history file, and the temporary file is gone when the process exits."""
    history = tmp_path / "holodeck-home" / "history.duckdb"
    code = (
        "import os, signal, sys\n"
        "from holodeck_core.cli import console\n"
        "from holodeck_core.cli.main import main\n"
        "from pathlib import Path\n"
        "from tests.test_history_prebuild import wait_for_prebuilt\n"
        "def interrupt(self, *args):\n"
        f"    assert wait_for_prebuilt(Path({str(history)!r}))\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "console.Progress.case_done = interrupt\n"
        "sys.exit(main(['test', sys.argv[1], '-q']))\n"
    )
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, server.openai_base_url, 3)
        proc = run_on_agent(code, agent)
    assert proc.returncode == 3, proc.stderr
    assert "interrupted: no EvalRun was written" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not history.exists()
    assert list(history.parent.glob(f".{history.name}*")) == []


def test_the_record_is_preloaded_once_at_the_first_finished_case_never_before_the_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The preload (imports, hashing, the schema) starts when the first case has finished, by
    when the first round of calls is on the wire: started before, it held the GIL while they
    were being sent (docs/benchmarks.md). Once per run."""
    from holodeck_core.engine import run as engine_run

    finished_then: list[int] = []
    preload = engine_run.preload_history

    def spying(project: Any, suite: Any) -> None:
        finished_then.append(len(suite.runs))
        preload(project, suite)

    monkeypatch.setattr(engine_run, "preload_history", spying)
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, server.openai_base_url, 4)
        assert main(["test", str(agent), "-q", "--parallel", "2"]) == 0
    assert len(finished_then) == 1 and finished_then[0] >= 1
    assert (tmp_path / "holodeck-home" / "history.duckdb").exists()
