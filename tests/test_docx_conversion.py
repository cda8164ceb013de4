"""Every Word file we know converts: the corpus's and the example's.

A release of a transitive dependency once broke every DOCX conversion at once (lxml 6.2 and
markitdown's pre-pass, see the comment on ``lxml`` in ``pyproject.toml``); this module fails
when any Word file errors or loses its text, whatever the cause."""

from __future__ import annotations

from pathlib import Path

import pytest

from holodeck_core.files import WorkerPool
from holodeck_core.models.test_case import FileInput
from tests import files_helpers
from tests.conftest import CORPUS, REPO, no_shared

pool = files_helpers.pool

DOCUMENTS = CORPUS / "documents"
EXAMPLE_DOCX = REPO / "examples" / "acme-support" / "files" / "warranty.docx"


def _corpus_word_files() -> list[Path]:
    return sorted(DOCUMENTS.glob("*.docx")) if DOCUMENTS.is_dir() else []


@pytest.mark.skipif(not _corpus_word_files(), reason=no_shared(DOCUMENTS))
@pytest.mark.parametrize("path", _corpus_word_files(), ids=lambda path: path.name)
def test_every_corpus_word_file_converts(path: Path, pool: WorkerPool) -> None:
    result = files_helpers.run(FileInput(path=path.name, type="word"), DOCUMENTS, pool)
    assert result.error is None, f"{path.name}: {result.error}"
    assert result.markdown_content.strip(), f"{path.name} converted to no text"


def test_the_example_warranty_converts(pool: WorkerPool) -> None:
    result = files_helpers.run(
        FileInput(path=EXAMPLE_DOCX.name, type="word"), EXAMPLE_DOCX.parent, pool
    )
    assert result.error is None, result.error
    assert "# ACME Limited Warranty" in result.markdown_content
    assert "two-year limited warranty" in result.markdown_content
