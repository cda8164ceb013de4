"""Hostile python targets (docs/agent-yaml.md): a target that exits the process (``SystemExit`` sync
or async, ``os._exit``), raises ``KeyboardInterrupt`` or ``GeneratorExit``, forks children that
ignore SIGTERM, never returns (a sleep loop, a coroutine swallowing its cancellation) or prints a
secret is one case ERROR with its reason: the run ends, writes its EvalRun, JUnit and history, exits
3, leaves no process behind and shows the secret nowhere; Ctrl-C still interrupts. Each through the
real CLI in a process of its own (docs/targets.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from holodeck_core.models import EvalRun, Status
from tests.conftest import REPO
from tests.hostile import everything_written, no_traceback

SECRET = "sk-target-canary-71c3e9a2b5d4"

TARGET = textwrap.dedent("""\
    import asyncio, os, signal, sys, time
    from pathlib import Path

    PIDS = Path(__file__).with_name("pids")

    def _fork() -> None:
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                time.sleep(1)
        with PIDS.open("a") as handle:
            handle.write(f"{pid}\\n")

    def sync_answer(case):
        what = case.input
        print("the key is", os.environ["HOLO_KEY"], "ok")
        sys.stderr.write("err:" + os.environ["HOLO_KEY"] + "\\x1b[31m\\n")
        if what == "exit0":
            raise SystemExit(0)
        if what == "interrupt":
            raise KeyboardInterrupt
        if what == "generator":
            raise GeneratorExit("closing")
        if what == "os_exit":
            os._exit(7)
        if what == "fork":
            _fork()
            return "forked"
        if what == "hang":
            while True:
                time.sleep(0.05)
        return "fine"

    async def async_answer(case):
        what = case.input
        print("the key is", os.environ["HOLO_KEY"], "ok")
        if what == "exit0":
            raise SystemExit(5)
        if what == "interrupt":
            raise KeyboardInterrupt
        if what == "generator":
            raise GeneratorExit
        if what == "os_exit":
            os._exit(7)
        if what == "fork":
            _fork()
            return "forked"
        if what == "hang":
            while True:
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    pass
        return "fine"
""")

AGENT = """\
name: served
model: {provider: openai, name: gpt-4o-mini, endpoint: "http://127.0.0.1:9", api_key: "${HOLO_KEY}"}
instructions: {inline: "Answer briefly."}
evaluations:
  metrics: [{type: standard, metric: equality, case_insensitive: true}]
test_cases:
"""
SHAPES = ["exit0", "interrupt", "generator", "os_exit", "fork", "hang", "fine"]
EXPECTED = {  # each hostile shape's reason (a part of the case's first error)
    "exit0": "the target tried to exit the process (SystemExit: ",
    "interrupt": "internal_error: target python my_agent:",
    "generator": "GeneratorExit",
    "os_exit": "the target's process exited with code 7 during the call",
    "hang": "timeout",
}


def _project(tmp_path: Path, function: str) -> Path:
    (tmp_path / "my_agent.py").write_text(TARGET)
    cases = "".join(f"  - {{name: {s}, input: {s}, ground_truth: fine}}\n" for s in SHAPES)
    (tmp_path / "agent.yaml").write_text(AGENT + cases)
    target = {"python": {"callable": f"my_agent:{function}", "timeout": 3, "attempts": 1}}
    (tmp_path / "holodeck.yaml").write_text(
        json.dumps({"agents": [{"path": "agent.yaml", "target": target}]})
    )
    return tmp_path / "agent.yaml"


def _holodeck(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "holodeck_core.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "HOLO_KEY": SECRET, "HOLODECK_HOME": str(tmp_path / "home")},
    )


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _left_behind(tmp_path: Path) -> list[int]:
    pids = tmp_path / "pids"
    forked = [int(p) for p in pids.read_text().split()] if pids.exists() else []
    deadline = time.monotonic() + 10  # SIGKILL is asynchronous
    while any(_alive(p) for p in forked) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in forked if _alive(p)]


@pytest.mark.parametrize("function", ["sync_answer", "async_answer"])
def test_a_hostile_python_target_is_a_case_error_and_the_run_ends(
    tmp_path: Path, function: str
) -> None:
    agent = _project(tmp_path, function)
    junit = tmp_path / "report.xml"
    proc = _holodeck(tmp_path, "test", str(agent), "--parallel", "1", "-o", str(junit))
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    no_traceback(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    assert proc.returncode == 3, err + out  # ERRORs, the run ended on its own
    [path] = (tmp_path / "results" / "served").glob("holodeck-pipelines/*.json")
    run = EvalRun.model_validate_json(path.read_text())
    results = {r.test_name: r for r in run.report.results}
    assert results["fine"].status is Status.PASS
    assert results["fork"].status is Status.FAIL  # answered "forked": scored, not an ERROR
    for shape, reason in EXPECTED.items():
        assert results[shape].status is Status.ERROR, shape
        assert reason in results[shape].errors[0], (shape, results[shape].errors)
    assert "<testsuite" in junit.read_text()
    assert _left_behind(tmp_path) == []  # the forks ignoring SIGTERM were killed too
    console = out + err
    assert "the key is *** ok" in console  # what the target printed, scrubbed
    assert "\x1b" not in console and SECRET not in console
    assert SECRET not in everything_written(tmp_path)


def test_ctrl_c_interrupts_a_run_whose_target_hangs(tmp_path: Path) -> None:
    agent = _project(tmp_path, "sync_answer")
    (tmp_path / "agent.yaml").write_text(
        AGENT + "  - {name: fork, input: fork}\n  - {name: hang, input: hang}\n"
    )
    holodeck = tmp_path / "holodeck.yaml"
    holodeck.write_text(holodeck.read_text().replace('"timeout": 3', '"timeout": 600'))
    proc = _holodeck(tmp_path, "test", str(agent), "--parallel", "1")
    deadline = time.monotonic() + 120
    while not (tmp_path / "pids").exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # the fork case has run: the hang case runs now
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()  # a run that did not stop is no one's to leave behind
    assert proc.returncode == 3 and "interrupted:" in err, err + out  # not a finished run
    assert _left_behind(tmp_path) == []
