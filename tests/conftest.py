"""Shared fixtures: the third-party corpus in ../shared (read in place, never copied)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from holodeck_core.metrics.text import pin_absl_stream
from tests.dashboard_harness import new_page

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

# Tests that import rouge-score themselves must not let absl close a capture stream (see there).
pin_absl_stream()

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CORPUS = SHARED / "corpus"
SHARED_ABSENT = "../shared is absent"
"""In the reason of every skip for want of ../shared, so the summary can count them."""


def no_shared(path: Path) -> str:
    """The skip reason of a test that needs ``path`` in ../shared."""
    return f"third-party corpus not available at {path} ({SHARED_ABSENT})"


def corpus_path(*parts: str) -> Path:
    """A path in ../shared/corpus, or a skip with the reason when the corpus is absent."""
    path = CORPUS.joinpath(*parts)
    if not path.exists():
        pytest.skip(no_shared(path))
    return path


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line saying how many tests skipped because ../shared is absent, and where: a plain
    clone passes green with part of the suite, and should say so."""
    files: Counter[str] = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        if isinstance(longrepr, tuple) and SHARED_ABSENT in str(longrepr[-1]):
            files[report.nodeid.split("::")[0].rsplit("/", 1)[-1]] += 1
    if files:
        where = ", ".join(f"{name} ({count})" for name, count in sorted(files.items()))
        terminalreporter.write_line(
            f"{sum(files.values())} tests skipped because {SHARED} is absent (the seeds and "
            f"the third-party corpus beside the checkout): {where}",
            yellow=True,
        )


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own HOLODECK_HOME and history DB: nothing leaks into the repo."""
    monkeypatch.setenv("HOLODECK_HOME", str(tmp_path / "holodeck-home"))
    monkeypatch.delenv("HOLODECK_HISTORY_DB", raising=False)
    for variable in ("HOLODECK_HISTORY_URL", "HOLODECK_RESULTS_URL", "HOLODECK_ARTIFACTS_URL"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("HOLODECK_AGENTS", raising=False)


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page of the module's ``browser`` (each browser test module opens its own, after
    the history it shows: tests/dashboard_harness.py's ``chromium``)."""
    with new_page(browser) as opened:
        yield opened
