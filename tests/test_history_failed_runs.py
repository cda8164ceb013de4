"""`holodeck history runs` lists the orchestrated runs that failed before writing an EvalRun
(``failed_runs``), marked and with their reason as inert text; `--hide-failed` hides them."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from holodeck_core.history.failures import FailedCell, record_failed_run
from tests import history_helpers

history = history_helpers.history
db = history_helpers.db

REASONS = {
    "d-outage-1": "step evaluate failed: model server refused the connection (127.0.0.1:9)",
    "d-markup-22": "[bold red]not markup[/bold red] \x1b[31mred\x1b[0m\nsecond line",
    "d-empty-333": None,
}
CELLS = [FailedCell("v3", "v3", "default"), FailedCell("v3", "v3", "large")]
"""The cells of a failed run (one row each); the newest failed run names none."""


def holodeck(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "400"}
    return subprocess.run(
        [sys.executable, "-m", "holodeck_core.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.fixture
def failed(history: Path) -> Path:
    for day, (run_id, reason) in enumerate(REASONS.items(), start=10):
        record_failed_run(
            history,
            dagster_run_id=run_id,
            job_name="Support_bot_eval",
            agent_slug="support-bot",
            cells=CELLS if day < 12 else [],
            trigger="nightly",
            failed_at=datetime(2026, 1, day, 2, tzinfo=UTC),
            error=reason,
        )
    return history


def test_history_runs_lists_failed_runs_with_their_reason(failed: Path) -> None:
    proc = holodeck("history", "runs", "--db", str(failed))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "FAILED runs (no EvalRun" in out
    for run_id in REASONS:
        assert run_id in out
    assert "model server refused the connection" in out
    assert "no reason recorded" in out
    # outside text stays text: no escape reaches the terminal, markup is shown as written
    assert "\x1b" not in out and "[bold red]not markup[/bold red]" in out
    failed_block = out[out.index("FAILED runs") :]
    assert failed_block.index("d-empty-333") < failed_block.index("d-outage-1")  # newest first
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--hide-failed"], set()),
        (["--prompt-version", "v3"], {"d-outage-1", "d-markup-22"}),
        (["--format", "csv"], set()),  # machine formats keep their columns: EvalRuns only
        (["--agent", "Support Bot"], set(REASONS)),
        (["--agent", "other-bot"], set()),
    ],
    ids=["hidden", "by-partition", "csv", "by-agent", "other-agent"],
)
def test_history_runs_filters_failed_runs(
    failed: Path, args: list[str], expected: set[str]
) -> None:
    proc = holodeck("history", "runs", "--db", str(failed), *args)
    assert proc.returncode == 0, proc.stderr
    assert {run_id for run_id in REASONS if run_id in proc.stdout} == expected
    assert ("FAILED runs" in proc.stdout) == bool(expected)
