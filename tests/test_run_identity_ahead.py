"""The run's identity worked out on the preload thread (``runner/suite.py`` ``Suite.identity``,
``engine/stages.py``) while a secret is registered: the EvalRun and its HoloDeck file are
redacted under the secrets of when they are built, whatever the preload thread saw
(docs/benchmarks.md)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from holodeck_core.config.loader import load_agent
from holodeck_core.engine.loop import run_to_end
from holodeck_core.engine.run import run_suite
from holodeck_core.engine.suite import load_suite
from holodeck_core.models import TestResult
from holodeck_core.redaction import REDACTED, register_secret
from holodeck_core.reports.eval_run_file import holodeck_json
from holodeck_core.runner import fingerprint as fp
from holodeck_core.runner import suite as suite_module
from holodeck_core.runner.suite import Suite
from holodeck_core.testing import run_model_server
from tests.test_run_overhead import write_agent

LATE = "sk-preload-race-0123456789"


class RegisterAfterTheCheck:
    """At the first finished case, waits until the preload thread has checked the agent
    config, then registers :data:`LATE` (which the agent config holds): the cases' results
    are checked after that, under it, and found clean."""

    def __init__(self, checked: threading.Event) -> None:
        self.checked = checked

    def case_done(self, result: TestResult, resumed: bool) -> None:
        if self.checked.wait(timeout=10):
            register_secret(LATE)


def test_a_secret_registered_after_the_preload_checked_the_agent_config_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = threading.Event()

    def commit_after_the_check(folder: Path) -> str | None:  # on the preload thread
        checked.set()
        return None

    monkeypatch.setattr(suite_module, "git_commit", commit_after_the_check)

    @contextlib.contextmanager
    def progress(suite: Suite) -> Iterator[RegisterAfterTheCheck]:
        yield RegisterAfterTheCheck(checked)

    rules = {"rules": [{"match": {"user": "case"}, "reply": "answer"}]}
    with run_model_server(rules) as server:
        agent = write_agent(tmp_path, server.openai_base_url, 1)
        agent.write_text(
            agent.read_text().replace(
                "name: overhead", f"name: overhead\ndescription: 'holds {LATE}'"
            )
        )
        suite = load_suite(load_agent(agent))
        run = run_to_end(run_suite(suite, progress))
    assert checked.is_set()
    assert LATE not in run.to_json() and LATE not in holodeck_json(run)
    assert run.metadata.agent_config.description == f"holds {REDACTED}"
    assert run.metadata.config_hash == fp.config_hash(suite.loaded, suite.prompt.text)
