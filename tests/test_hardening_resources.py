"""An unlucky machine (docs/agent-yaml.md): full and read-only
disks at every write boundary of a run, office zip bombs, unbounded history queries, Ctrl-C,
orphaned temp files and two runs of the same suite at once.

Disks are never really filled: the write boundary raises ``OSError(ENOSPC)`` (or EROFS, or
DuckDB's disk-full error) in a subprocess running the real CLI."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any, cast

import duckdb
import pytest

from holodeck_core.files.jobs import ConversionJob
from holodeck_core.files.worker import WorkerPool
from holodeck_core.history.sql import run_bounded
from holodeck_core.runner.case_run import CaseRun, TurnRun
from holodeck_core.runner.journal import Journal
from holodeck_core.testing import run_model_server
from tests.conftest import REPO
from tests.hostile import agent_yaml, faulty, no_traceback, run_cli, run_cli_with_fault

FOUR_CASES = """\
- {name: one, input: q1, ground_truth: ok}
- {name: two, input: q2, ground_truth: ok}
- {name: three, input: q3, ground_truth: ok}
- {name: four, input: q4, ground_truth: ok}
"""
OK = {"default": {"reply": "ok"}}


def journal_lines(home: Path) -> list[dict[str, object]]:
    files = sorted((home / "journal").rglob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line]


def results_of(agent: Path) -> list[Path]:
    return sorted((agent.parent / "results").glob("*/holodeck-pipelines/*.json"))


def run_with_fault(
    monkeypatch: pytest.MonkeyPatch, target: str, kind: str, args: list[str], after: int = 0
) -> subprocess.CompletedProcess[str]:
    """ENOSPC through a real subprocess (as a user meets it); other kinds in this process,
    which is the same code path at a fraction of the start-up cost."""
    if kind == "ENOSPC":
        return run_cli_with_fault(target, kind, args, after=after)
    module, attr = target.rsplit(".", 1)
    real = getattr(importlib.import_module(module), attr)
    with monkeypatch.context() as patch:
        patch.setattr(target, faulty(real, kind, after))
        return run_cli(args)


@pytest.mark.parametrize("kind", ["ENOSPC", "EROFS"])
def test_journal_write_failure_keeps_what_finished_and_writes_the_eval_run(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with run_model_server(OK) as server:
        agent = agent_yaml(tmp_path / "a", server.openai_base_url, FOUR_CASES)
        proc = run_with_fault(
            monkeypatch,
            "holodeck_core.runner.journal.append_line",
            kind,
            ["test", str(agent), "--parallel", "1"],
            after=2,
        )
    no_traceback(proc)
    assert proc.returncode == 3, proc.stderr
    assert "cannot write the resume journal" in proc.stderr
    [path] = results_of(agent)
    assert f"EvalRun: {path}" in proc.stdout
    assert len(journal_lines(tmp_path / "holodeck-home")) == 0  # closed: the run is complete
    done = list((tmp_path / "holodeck-home" / "journal").rglob("*.jsonl.done"))
    assert len(done[0].read_text().splitlines()) == 2  # what finished before the disk filled


@pytest.mark.parametrize("kind", ["ENOSPC", "EROFS", "EACCES"])
def test_eval_run_write_failure_is_exit_3_and_the_rerun_pays_nothing(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = "holodeck_core.reports.eval_run_file.write_new_file"
    with run_model_server(OK) as server:
        agent = agent_yaml(tmp_path / "a", server.openai_base_url, FOUR_CASES)
        proc = run_with_fault(monkeypatch, target, kind, ["test", str(agent)])
        calls = server.stats()["total_calls"]
        rerun = run_cli(["test", str(agent), "-q"])
        assert server.stats()["total_calls"] == calls  # everything came from the journal
    no_traceback(proc)
    assert proc.returncode == 3, proc.stderr
    assert "EvalRun could not be written" in proc.stderr and "journal" in proc.stderr
    assert results_of(agent) and rerun.returncode == 0
    assert not list((agent.parent / "results").rglob(".tmp-*"))


@pytest.mark.parametrize(
    ("target", "kind"),
    [
        ("holodeck_core.history.tabular.insert", "duckdb"),
        ("holodeck_core.history.store.connect_with_retry", "ENOSPC"),
    ],
)
def test_a_full_disk_during_the_history_write_is_a_clear_error(
    tmp_path: Path, target: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exit 3 (docs/cli.md: the history misses the run, as after a lock that outlived its
    retries), nothing lost: the EvalRun is there and a later sync ingests it."""
    with run_model_server(OK) as server:
        agent = agent_yaml(tmp_path / "a", server.openai_base_url, FOUR_CASES)
        proc = run_with_fault(monkeypatch, target, kind, ["test", str(agent)])
    no_traceback(proc)
    assert proc.returncode == 3, proc.stderr
    assert "the run history was not updated" in proc.stderr
    assert "ROLLBACK" not in proc.stderr and "TransactionContext" not in proc.stderr
    [path] = results_of(agent)
    assert f"EvalRun: {path}" in proc.stdout
    sync = run_cli(["history", "sync", str(agent.parent / "results")])
    assert sync.returncode == 0 and "synced 1 run(s)" in sync.stderr


def test_orphaned_temp_files_are_not_ingested(tmp_path: Path) -> None:
    with run_model_server(OK) as server:
        agent = agent_yaml(tmp_path / "a", server.openai_base_url, FOUR_CASES)
        assert run_cli(["test", str(agent), "-q"]).returncode == 0
    [path] = results_of(agent)
    (path.parent / ".tmp-k1ll3d.json").write_text(path.read_text())  # complete, never linked
    (path.parent / ".tmp-torn.json").write_text(path.read_text()[:100])  # cut short
    sync = run_cli(["history", "sync", str(agent.parent / "results")])
    assert sync.returncode == 0, sync.stderr
    assert "synced 0 run(s); 1 already in the history" in sync.stderr


def _history(tmp_path: Path) -> None:
    with run_model_server(OK) as server:
        agent = agent_yaml(tmp_path / "a", server.openai_base_url, FOUR_CASES)
        assert run_cli(["test", str(agent), "-q"]).returncode == 0


@pytest.mark.parametrize(
    ("args", "rows"),
    [
        (["SELECT * FROM range(10000000000)", "--max-rows", "7"], 7),
        (["SELECT * FROM range(100000) ORDER BY range DESC"], 10_000),
        (["WITH r AS (SELECT * FROM range(50)) SELECT * FROM r", "--max-rows", "50"], 50),
    ],
)
def test_history_sql_fetches_at_most_max_rows(tmp_path: Path, args: list[str], rows: int) -> None:
    _history(tmp_path)
    proc = run_cli(["history", "sql", *args, "--format", "csv"])
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == rows + 1  # the header
    assert ("only the first" in proc.stderr) is (rows != 50)


@pytest.mark.parametrize(
    "query",
    [
        "SELECT count(*) FROM range(1000000) a, range(1000000) b",
        "SELECT max(a.range + b.range) FROM range(100000) a CROSS JOIN range(100000) b",
    ],
)
def test_history_sql_stops_at_its_timeout(tmp_path: Path, query: str) -> None:
    _history(tmp_path)
    proc = run_cli(["history", "sql", query, "--timeout", "0.5"])
    no_traceback(proc)
    assert proc.returncode == 2 and "stopped after 0.5s" in proc.stderr, proc.stderr


@pytest.mark.parametrize("bad", [["--max-rows", "0"], ["--timeout", "nan"], ["--timeout", "-1"]])
def test_history_sql_bounds_must_make_sense(tmp_path: Path, bad: list[str]) -> None:
    proc = run_cli(["history", "sql", "SELECT 1", *bad])
    assert proc.returncode == 2 and "must be" in proc.stderr


QUERY_CPU_S = 1.0
"""CPU seconds the CLI must have spent after opening the history before it is sent Ctrl-C:
what it does there before the query starts costs a few milliseconds, so the query is running."""


def _wait_until_query_runs(proc: subprocess.Popen[str], history: Path) -> None:
    """Return once ``proc`` has the history open and has burnt :data:`QUERY_CPU_S` since:
    the signal lands in DuckDB's statement, however slowly a loaded machine imports."""
    opened_at: float | None = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        fds = Path(f"/proc/{proc.pid}/fd")
        try:
            stat = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
            if opened_at is None and any(os.readlink(fd) == str(history) for fd in fds.iterdir()):
                opened_at = cpu
        except OSError:  # a descriptor closed while it was read
            continue
        if opened_at is not None and cpu - opened_at >= QUERY_CPU_S:
            return
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"the query never ran: {proc.communicate()[1]}")


@pytest.mark.parametrize("entry", [["-m", "holodeck_core.cli"], ["-m", "holodeck_core.cli.main"]])
def test_ctrl_c_during_history_sql_is_a_message(tmp_path: Path, entry: list[str]) -> None:
    _history(tmp_path)
    query = "SELECT count(*) FROM range(1000000) a, range(1000000) b"
    # --timeout far beyond the wait below: only the Ctrl-C can end the query in time
    argv = [sys.executable, *entry, "history", "sql", query, "--timeout", "3600"]
    proc = subprocess.Popen(
        argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    _wait_until_query_runs(proc, (tmp_path / "holodeck-home" / "history.duckdb").resolve())
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and "interrupted" in err, err
    assert proc.returncode == 3


class _SignalledFirst:
    """A connection that is sent Ctrl-C just before its statement starts, when DuckDB
    would forget an interrupt."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def execute(self, query: str) -> duckdb.DuckDBPyConnection:
        signal.raise_signal(signal.SIGINT)
        return self.con.execute(query)

    def interrupt(self) -> None:
        self.con.interrupt()


def test_ctrl_c_just_before_the_query_starts_still_stops_it() -> None:
    started = time.monotonic()
    with duckdb.connect() as con, pytest.raises(KeyboardInterrupt):
        run_bounded(
            cast("duckdb.DuckDBPyConnection", _SignalledFirst(con)),
            "SELECT count(*) FROM range(1000000) a, range(1000000) b",
            max_rows=1,
            timeout_s=30,
        )
    assert time.monotonic() - started < 10  # not the timeout's 30 s


def _ooxml(path: Path, main_part: str, content_type: str, size: int) -> Path:
    """A valid-looking Office package whose main part unpacks to ``size`` bytes."""
    filler = b"<x>lol</x>" * (size // 10)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as package:
        package.writestr(
            "[Content_Types].xml",
            f'<Types><Override PartName="/{main_part}" ContentType="{content_type}"/></Types>',
        )
        package.writestr(main_part, b"<root>" + filler + b"</root>")
    return path


@pytest.mark.parametrize(
    ("suffix", "kind", "part"),
    [
        (".docx", "word", "word/document.xml"),
        (".xlsx", "excel", "xl/workbook.xml"),
        (".pptx", "powerpoint", "ppt/presentation.xml"),
    ],
)
def test_office_zip_bombs_are_file_errors(
    tmp_path: Path, suffix: str, kind: str, part: str
) -> None:
    bomb = _ooxml(tmp_path / f"bomb{suffix}", part, "application/xml", 30 * 1024 * 1024)
    assert bomb.stat().st_size < 1024 * 1024
    files = f"[{{path: {bomb.name}, type: {kind}}}]"
    cases = f"- {{name: bomb, input: read it, ground_truth: ok, files: {files}}}\n"
    with run_model_server(OK) as server:
        agent = agent_yaml(
            tmp_path, server.openai_base_url, cases, extra="execution: {max_file_mb: 1}\n"
        )
        proc = run_cli(["test", str(agent), "-v"])
        assert server.stats()["total_calls"] == 0
    no_traceback(proc)
    assert proc.returncode == 3, proc.stderr
    assert "unpacks to 30.0 MB" in proc.stderr and "ZIP bomb" in proc.stderr


@pytest.mark.parametrize("limit_mb", [900])
def test_conversion_workers_run_under_an_address_space_cap(tmp_path: Path, limit_mb: int) -> None:
    small = _ooxml(tmp_path / "ok.docx", "word/document.xml", "application/xml", 100)
    with WorkerPool(1, memory_limit=limit_mb * 1024 * 1024) as pool:
        pool.run(ConversionJob(path=str(small), type="word"), 60)
        worker = pool._idle.get_nowait()  # the worker that just converted
        limits = Path(f"/proc/{worker.process.pid}/limits").read_text()
        pool._idle.put(worker)
    [line] = [row for row in limits.splitlines() if row.startswith("Max address space")]
    assert line.split()[3:5] == [str(limit_mb * 1024 * 1024)] * 2


def test_two_concurrent_runs_of_one_suite_pay_once(tmp_path: Path) -> None:
    """The second run starts while the first one's calls are in flight (a loaded machine may
    start two processes seconds apart: a second that starts after the first finished is a
    rerun, not a concurrent run)."""
    slow = {"default": {"reply": "ok", "latency": 6}}
    with run_model_server(slow) as server:
        agent = agent_yaml(tmp_path / "a", server.openai_base_url, FOUR_CASES)
        command = [sys.executable, "-m", "holodeck_core.cli", "test", str(agent), "-q"]

        def start() -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )

        runs = [start()]
        deadline = time.monotonic() + 60
        while server.stats()["in_flight"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        runs.append(start())
        codes = [run.wait(timeout=120) for run in runs]
        assert server.stats()["total_calls"] == 4
    assert codes == [0, 0]
    assert len(results_of(agent)) == 2


def test_a_claimed_case_is_reused_after_the_claimer_closed_the_journal(tmp_path: Path) -> None:
    first = Journal(tmp_path, "agent", "suite")
    second = Journal(tmp_path, "agent", "suite")
    assert first.load() == {} and second.load() == {}
    run = CaseRun(
        case_id="c",
        fingerprint="ab" * 32,
        turns=[TurnRun(input="q", response="ok")],
        execution_time_ms=1,
        timestamp="2026-12-01T00:00:00Z",
    )
    first.append(run)
    first.close()
    assert second.finished("ab" * 32) is not None  # it waited; the other run finished it
    third = Journal(tmp_path, "agent", "suite")
    third.load()
    assert third.finished("ab" * 32) is None  # a later run starts fresh


def test_a_lookup_during_a_read_never_takes_a_paid_case_for_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Journal.lookup`` answers from memory when the file's size equals what was read and
    the closed file is the one seen; ``finished`` reads on a worker thread meanwhile. The
    offset and the closed file's identity must move only once the entries they cover are in,
    else a lookup between the two calls the model again for a case another run paid for (two
    concurrent runs paid 5 calls for 4 cases, now and then)."""
    from holodeck_core.runner import journal as journal_module

    writer = Journal(tmp_path, "agent", "suite")
    reader = Journal(tmp_path, "agent", "suite")
    assert writer.load() == {} and reader.load() == {}
    runs = [
        CaseRun(
            case_id=name,
            fingerprint=name * 64,
            turns=[TurnRun(input="q", response="ok")],
            execution_time_ms=1,
            timestamp="2026-12-01T00:00:00Z",
        )
        for name in ("a", "b")
    ]
    answered_while_parsing: list[bool] = []
    parse = journal_module._parse

    def parsing(data: bytes) -> Any:
        # what a lookup on the event loop would answer at this moment, for the run being read
        fast = journal_module._size(reader.path) == reader._offset and (
            journal_module._identity(reader._done) == reader._done_at_load
        )
        answered_while_parsing.append(fast)
        return parse(data)

    monkeypatch.setattr(journal_module, "_parse", parsing)
    writer.append(runs[0])
    assert reader.finished("a" * 64) is not None  # read from the open journal
    writer.append(runs[1])
    writer.close()
    assert reader.finished("b" * 64) is not None  # read from the closed one
    assert answered_while_parsing == [False, False]  # no lookup answered from memory mid-read
