"""A real ``holodeck serve`` (HoloDeck 0.7.1 from ``bench/peer_setup.sh``) of a corpus sample,
against the loopback model server, evaluated through the ``holodeck_serve`` target: every
case scored, tool calls matched; and the same sample evaluated in-process gives the same
verdicts (the fidelity differential). Slow: HoloDeck takes seconds to start."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from holodeck_core.cli.main import main
from holodeck_core.models import EvalRun, Status
from holodeck_core.testing import run_model_server
from tests.conftest import REPO, corpus_path
from tests.services import free_port

PEER = REPO / "bench" / ".peer-venv" / "bin" / "holodeck"
RULES = {
    "default": {"reply": "I don't know."},
    "rules": [
        {  # the model gets Rome's name wrong: the regex expectation fails, both ways
            "match": {"user": "Weather in Rome", "tool_result": False},
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "rome"}}],
        },
        {
            "match": {"user": "Weather in (\\w+)", "tool_result": False},
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "$1"}}],
        },
        {
            "match": {"user": "Weather\\?", "tool_result": False},
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
        },
        {"match": {"tool_result": True}, "reply": "The capital of France is Paris."},
    ],
}


def _verdicts(folder: Path, slug: str) -> tuple[dict[str, Status], EvalRun]:
    path = sorted((folder / "results" / slug).glob("*.json"))[-1]
    run = EvalRun.model_validate_json(path.read_text())
    return {r.test_name or "": r.status for r in run.report.results}, run


def _wait_ready(url: str, process: subprocess.Popen[bytes], seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"holodeck serve exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"holodeck serve did not answer {url}/health in {seconds:g} s")


@pytest.mark.slow
def test_a_real_holodeck_serve_scores_what_the_file_scores(tmp_path: Path) -> None:
    if not PEER.is_file():
        pytest.skip(f"HoloDeck 0.7.1 is not set up at {PEER}: `bash bench/peer_setup.sh`")
    sample = corpus_path("holodeck", "generated", "tool_calls")
    served, local = tmp_path / "served", tmp_path / "local"
    for folder in (served, local):
        shutil.copytree(sample, folder, ignore=shutil.ignore_patterns("*.json", "*.txt"))
    text = (local / "agent.yaml").read_text()
    with run_model_server(RULES) as server:
        endpoint = f'  name: gpt-4o-mini\n  endpoint: "{server.openai_base_url}"\n  api_key: k-1\n'
        (local / "agent.yaml").write_text(text.replace("  name: gpt-4o-mini\n", endpoint, 1))
        assert main(["test", str(local / "agent.yaml"), "-q"]) == 1
        port = free_port()
        env = {
            **os.environ,
            "OPENAI_BASE_URL": server.openai_base_url,
            "OPENAI_API_KEY": "k-1",
            "OPENAI_AGENTS_DISABLE_TRACING": "1",
        }
        process = subprocess.Popen(
            [str(PEER), "serve", "agent.yaml", "--port", str(port), "--protocol", "rest", "-q"],
            cwd=served,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_ready(url, process)
            target = f'{{holodeck_serve: {{url: "{url}"}}}}'
            code = main(["test", str(served / "agent.yaml"), "-q", "--target", target])
        finally:
            process.terminate()
            process.wait(30)
    in_process, _ = _verdicts(local, "tools-probe")
    through_serve, run = _verdicts(served, "tools-probe")
    assert code == 1
    assert (
        through_serve
        == in_process
        == {
            "weather_ok": Status.PASS,
            "weather_wrong_arg": Status.FAIL,
            "weather_legacy_name_only": Status.PASS,
        }
    )
    calls = {
        r.test_name: [(t.name, t.args) for t in r.tool_invocations] for r in run.report.results
    }
    assert calls["weather_ok"] == [("get_weather", {"city": "Paris"})]
    assert calls["weather_wrong_arg"] == [("get_weather", {"city": "rome"})]
    usage = run.report.summary.token_usage
    assert usage is not None and usage.total_tokens > 0
