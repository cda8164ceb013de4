"""Shared fixtures: the third-party corpus in ../shared (read in place, never copied)."""

from __future__ import annotations

from pathlib import Path

import pytest

from holodeck_core.metrics.text import pin_absl_stream

# Tests that import rouge-score themselves must not let absl close a capture stream (see there).
pin_absl_stream()

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CORPUS = SHARED / "corpus"


def corpus_path(*parts: str) -> Path:
    """A path in ../shared/corpus, or a skip with the reason when the corpus is absent."""
    path = CORPUS.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"third-party corpus not available at {path} (../shared is absent)")
    return path


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own HOLODECK_HOME and history DB: nothing leaks into the repo."""
    monkeypatch.setenv("HOLODECK_HOME", str(tmp_path / "holodeck-home"))
    monkeypatch.delenv("HOLODECK_HISTORY_DB", raising=False)
    for variable in ("HOLODECK_HISTORY_URL", "HOLODECK_RESULTS_URL", "HOLODECK_ARTIFACTS_URL"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("HOLODECK_AGENTS", raising=False)
