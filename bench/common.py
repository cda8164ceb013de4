"""Shared helpers of the bench scripts (throughput, startup, memory).

Everything here talks only to the loopback model server on 127.0.0.1, bounds every wait, and
ends only the processes it started (by process id). The scripts import it as ``common`` (they
run as ``.venv/bin/python bench/<script>.py``, which puts ``bench/`` on ``sys.path``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
LOOPBACK = "127.0.0.1"
EQUAL_CONCURRENCY = 20  # docs/benchmarks.md: C = 20 is "equal concurrency"
PEER_MAX_CASES = 1000  # HoloDeck 0.7.1 refuses more: "Maximum 1000 test cases per agent"
SYSTEM_PROMPT = "You are a benchmark agent. Answer with the short answer only.\n"
OFFLINE_KEY = "sk-bench-offline-not-a-key"
ENDPOINT_VAR = "HOLODECK_BENCH_ENDPOINT"

# One rule answers every generated case correctly; the `equality` metric then passes.
RULES_YAML = """\
default: {reply: "I don't know."}
rules:
  - name: bench
    match: {user: "bench case (\\\\d+)"}
    reply: "answer $1"
"""

# Variables that would make a benchmark run read or write someone's real state.
_OUR_STATE_VARS = ("HOLODECK_HOME", "HOLODECK_HISTORY_DB", "HOLODECK_AGENTS", "DAGSTER_HOME")


# --------------------------------------------------------------------------- executables


def our_holodeck() -> Path:
    """Our console script: the one beside the running interpreter, else the repo's venv."""
    beside = Path(sys.executable).parent / "holodeck"
    if beside.is_file():
        return beside
    fallback = REPO / ".venv" / "bin" / "holodeck"
    if fallback.is_file():
        return fallback
    raise SystemExit("cannot find our `holodeck` console script; run with .venv/bin/python")


def precompile_ours() -> None:
    """Write the bytecode of our packages and of the venv's installed ones, as pip does for
    every installed wheel (the peers' included): an editable install compiles nothing, nor
    does ``uv sync`` by default, and with ``PYTHONDONTWRITEBYTECODE=1`` every run (ours and
    the floor's) would recompile what it imports (openai alone: ~1 s). Up-to-date files are
    skipped, so only the first bench run on a new venv pays (~1 min)."""
    python = str(our_holodeck().parent / "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    packages = ["holodeck_core", "holodeck_pipelines", purelib]
    cmd = [python, "-m", "compileall", "-q", *packages]
    subprocess.run(cmd, cwd=REPO, check=True, capture_output=True, timeout=900)


def peer_holodeck(path: str) -> Path:
    """HoloDeck 0.7.1's ``holodeck`` from a venv folder (``bench/.peer-venv``) or the script."""
    candidate = Path(path).expanduser().absolute()
    if candidate.is_dir():
        candidate = candidate / "bin" / "holodeck"
    if not candidate.is_file():
        raise SystemExit(
            f"--peer: no holodeck executable at {candidate}; create the peer venv with "
            "`bash bench/peer_setup.sh` (it makes bench/.peer-venv)"
        )
    return candidate


# --------------------------------------------------------------------------- environment


def base_env() -> dict[str, str]:
    """The current environment, with loopback traffic kept away from any proxy."""
    env = dict(os.environ)
    no_proxy = ",".join(p for p in (env.get("NO_PROXY", ""), LOOPBACK, "localhost") if p)
    env["NO_PROXY"] = env["no_proxy"] = no_proxy
    return env


def our_env(home: Path, base_url: str) -> dict[str, str]:
    """Our CLI: a fresh ``HOLODECK_HOME`` (nothing resumed, no history mixed in)."""
    env = base_env()
    for name in _OUR_STATE_VARS:
        env.pop(name, None)
    env["HOLODECK_HOME"] = str(home)
    env[ENDPOINT_VAR] = base_url
    return env


def peer_env(base_url: str) -> dict[str, str]:
    """HoloDeck 0.7.1: openai-agents reads the endpoint from ``OPENAI_BASE_URL``."""
    env = base_env()
    env["OPENAI_BASE_URL"] = base_url
    env["OPENAI_API_KEY"] = OFFLINE_KEY
    env["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    return env


# --------------------------------------------------------------------------- machine


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return float("nan")


def _git(*args: str) -> str:
    try:
        proc = subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def machine_line() -> str:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    commit = _git("rev-parse", "--short", "HEAD") or "?"
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return (
        f"machine: {cpus} CPUs ({_cpu_model()}), {_mem_total_gib():.1f} GiB RAM, "
        f"Python {platform.python_version()}, load average {load}; "
        f"commit {commit}{' + uncommitted changes' if dirty else ''}; "
        f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '(unset)')}"
    )


# --------------------------------------------------------------------------- agents


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(text)


def case_input(i: int) -> str:
    return f"bench case {i}: what is the answer?"


def write_agent(
    folder: Path,
    n_cases: int,
    *,
    name: str = "bench-agent",
    peer: bool = False,
    parallel: int | None = None,
    file_name: str = "agent.yaml",
) -> Path:
    """An agent with ``n_cases`` single-turn cases and one ``equality`` metric.

    Ours reads the endpoint from ``$HOLODECK_BENCH_ENDPOINT``; HoloDeck's config has no endpoint
    (it uses ``OPENAI_BASE_URL``). ``parallel`` sets ``execution.parallel_test_cases``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "instructions").mkdir(exist_ok=True)
    (folder / "instructions" / "system-prompt.md").write_text(SYSTEM_PROMPT, encoding="utf-8")
    lines = [
        f"name: {name}",
        "description: Generated by bench/ (single-turn cases, equality metric)",
        "model:",
        "  provider: openai",
        "  name: gpt-4o-mini",
        "  temperature: 0.0",
    ]
    if not peer:
        lines += [f"  endpoint: ${{{ENDPOINT_VAR}}}", f"  api_key: {OFFLINE_KEY}"]
    lines += [
        "instructions:",
        "  file: instructions/system-prompt.md",
        "evaluations:",
        "  metrics:",
        "    - type: standard",
        "      metric: equality",
    ]
    if parallel is not None:
        lines += ["execution:", f"  parallel_test_cases: {parallel}"]
    lines.append("test_cases:")
    for i in range(n_cases):
        lines += [
            f"  - name: {_q(f'case {i:05d}')}",
            f"    input: {_q(case_input(i))}",
            f"    ground_truth: {_q(f'answer {i}')}",
        ]
    path = folder / file_name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def latest_eval_run(agent_dir: Path) -> dict[str, Any] | None:
    """The newest EvalRun our CLI wrote under ``<agent dir>/results/<slug>/holodeck-pipelines/``
    (``results/<slug>/*.json`` beside it is HoloDeck's own file of the run)."""
    files = sorted(
        (agent_dir / "results").glob("*/holodeck-pipelines/*.json"),
        key=lambda p: p.stat().st_mtime,
    )
    if not files:
        return None
    try:
        data: dict[str, Any] = json.loads(files[-1].read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data


# --------------------------------------------------------------------------- processes


@dataclass
class Timed:
    """One finished subprocess: wall seconds, exit code, peak RSS (of it and its children)."""

    wall: float
    returncode: int
    max_rss_mb: float
    stdout: str
    stderr: str
    timed_out: bool = False
    cpu: float = 0.0  # user + system CPU seconds of it and the descendants it waited for

    def tail(self, lines: int = 12, width: int = 300) -> str:
        text = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return "\n".join(
            line if len(line) <= width else line[:width] + " …" for line in text[-lines:]
        )


def run_timed(
    cmd: Sequence[str | Path],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 600.0,
) -> Timed:
    """Run ``cmd`` to the end; wall time from just before spawn to reaping; peak RSS from
    ``wait4`` (this child and the descendants it waited for). Killed (its own process group)
    after ``timeout`` seconds."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [str(c) for c in cmd],
            env=dict(env) if env is not None else None,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        expired = threading.Event()

        def kill() -> None:
            expired.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        watchdog = threading.Timer(timeout, kill)
        watchdog.daemon = True
        watchdog.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            watchdog.cancel()
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Timed(
            wall=wall,
            returncode=proc.returncode,
            max_rss_mb=usage.ru_maxrss / 1024,  # Linux: kilobytes
            cpu=usage.ru_utime + usage.ru_stime,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
            timed_out=expired.is_set(),
        )


class ModelServer:
    """``holodeck model-server --port 0 --script RULES --latency L`` as a separate process."""

    def __init__(self, rules: Path, latency: float, *, log: Path, start_timeout: float = 30.0):
        self.rules = rules
        self.latency = latency
        self.log = log
        self.start_timeout = start_timeout
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def __enter__(self) -> ModelServer:
        cmd = [
            str(our_holodeck()),
            "model-server",
            "--host",
            LOOPBACK,
            "--port",
            "0",
            "--script",
            str(self.rules),
            "--latency",
            f"{self.latency:g}",
        ]
        with self.log.open("wb") as handle:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                env=base_env(),
                start_new_session=True,
            )
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            text = self.log.read_text(encoding="utf-8", errors="replace")
            for line in text.splitlines():
                if "listening on " in line:
                    self.url = line.split("listening on ", 1)[1].strip()
                    return self
            if self._proc.poll() is not None:
                break
            time.sleep(0.05)
        self.close()
        raise SystemExit(f"the model server did not start:\n{self.log.read_text()[-2000:]}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    def _request(self, method: str, path: str) -> dict[str, Any]:
        request = urllib.request.Request(f"{self.url}{path}", method=method)
        with self._opener.open(request, timeout=10) as response:
            data: dict[str, Any] = json.loads(response.read())
            return data

    def stats(self) -> dict[str, Any]:
        return self._request("GET", "/_stats")

    def reset(self) -> None:
        self._request("POST", "/_reset")

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


# --------------------------------------------------------------------------- numbers


def ideal(n_cases: int, concurrency: int, latency: float) -> float:
    """The ideal wall time, ``ceil(N / C) * L`` (docs/benchmarks.md)."""
    return math.ceil(n_cases / concurrency) * latency


def load1() -> float:
    """The machine's one-minute load average (printed beside every timed run)."""
    return os.getloadavg()[0]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b) or b <= 0:
        return None
    return a / b


def fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def runs_text(values: Sequence[float]) -> str:
    return "[" + " ".join(f"{v:.2f}" for v in values) + "]"


def ratio_line(pairs: Sequence[tuple[str, float | None]]) -> str:
    return "RATIOS " + " ".join(f"{key}={fmt(value)}" for key, value in pairs)
