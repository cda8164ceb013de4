"""``hierarchical_document`` chunks and PDF conversion as HoloDeck 0.7.1 makes them (issue
26, docs/holodeck-fidelity.md): our chunks of every corpus document, for each ``document_domain``,
several ``max_chunk_tokens`` and depths, equal HoloDeck's own, recorded by
``bench/holodeck_record.py`` into ``tests/fixtures/holodeck/structured_chunks.json`` (CI never
installs HoloDeck: a change of our chunker or converter fails here). A PDF's Markdown is HoloDeck's
heading extractor's, byte for byte, through the conversion workers every source goes through."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.files import process_files
from holodeck_core.files.pdf_headings import pdf_markdown
from holodeck_core.models import FileInput
from holodeck_core.tools.retrieval.domains import DOMAIN_PATTERNS
from holodeck_core.tools.retrieval.sources import SOURCE_CONVERSION_TIMEOUT_S
from holodeck_core.tools.retrieval.structure import StructureChunker, defined_term
from holodeck_core.tools.retrieval.tokens import cl100k_tokens
from tests.conftest import corpus_path

FIXTURE = Path(__file__).parent / "fixtures" / "holodeck" / "structured_chunks.json"
CASES: list[dict[str, Any]] = json.loads(FIXTURE.read_text())["cases"]
FINANCIAL_PDF = "samples/financial-assistant/openai/data/convfinqa-source-5.pdf"


@cache
def _text(document: str) -> str:
    path = corpus_path("holodeck", *document.split("/"))
    return pdf_markdown(path) if path.suffix == ".pdf" else path.read_text()


def _digest(chunks: list[list[Any]]) -> str:  # as bench/holodeck_record.py computes it
    return hashlib.sha256(json.dumps(chunks, ensure_ascii=False).encode()).hexdigest()


@pytest.mark.parametrize(
    "case",
    CASES,
    ids=[
        f"{c['document'].split('/', 1)[1]}-{c['document_domain']}-{c['max_chunk_tokens']}"
        f"-{c['max_subsection_depth']}"
        for c in CASES
    ],
)
def test_our_chunks_are_holodecks(case: dict[str, Any]) -> None:
    text = _text(case["document"])
    if "markdown_sha256" in case:
        assert hashlib.sha256(text.encode()).hexdigest() == case["markdown_sha256"]
    patterns = DOMAIN_PATTERNS.get(case["document_domain"], ())
    chunker = StructureChunker(case["max_chunk_tokens"], patterns, case["max_subsection_depth"])
    pieces = chunker.chunks(text)
    chunks = [[p.text, list(p.parent_chain), p.section_id] for p in pieces]
    assert len(chunks) == case["count"]
    assert _digest(chunks) == case["sha256"]
    terms = [[n, defined_term(p.text)] for n, p in enumerate(pieces) if defined_term(p.text)]
    assert terms == case.get("defined_terms", [])  # their BM25 weight (search.py)


def test_the_fixture_covers_the_financial_pdf_as_holodeck_embeds_it() -> None:
    """financial-assistant's tool (``max_chunk_tokens: 1500``, domain none): 145 chunks, as
    HoloDeck 0.7.1 embeds (we made 84 of markitdown's text before)."""
    [case] = [
        c
        for c in CASES
        if c["document"] == FINANCIAL_PDF
        and c["document_domain"] == "none"
        and c["max_chunk_tokens"] == 1500
    ]
    assert case["count"] == 145
    chunks = StructureChunker(1500).chunks(_text(FINANCIAL_PDF))
    assert chunks[0].parent_chain == ("3M (MMM)", "2005")
    assert chunks[0].text.startswith("### Document ID: Single_MMM/2005/page_36.pdf-1\n")


def test_a_pdf_source_converts_to_holodecks_markdown(tmp_path: Path) -> None:
    pdf = corpus_path("holodeck", *FINANCIAL_PDF.split("/"))
    [out] = process_files(
        [FileInput(path=str(pdf), type="pdf")],
        base_dir=pdf.parent,
        cache_dir=tmp_path,
        file_timeout=SOURCE_CONVERSION_TIMEOUT_S,  # as a tool's source: a long PDF
    )
    assert out.error is None
    [case] = [c for c in CASES if c["document"] == FINANCIAL_PDF][:1]
    markdown = out.markdown_content
    assert hashlib.sha256(markdown.encode()).hexdigest() == case["markdown_sha256"]
    heading = (
        "\n# American Airlines Group (AAL)\n## 2014\n### Document ID: Double_AAL/2014/page_18.pdf\n"
    )
    assert heading in markdown  # the bookmarks' levels: company, year, document


def test_tokens_are_cl100k_base_from_the_packaged_file() -> None:
    assert cl100k_tokens("") == 0
    assert cl100k_tokens("hello world") == 2
    assert cl100k_tokens("206588") == 2  # digits in threes, as cl100k_base splits them
    assert cl100k_tokens("<|endoftext|>") > 1  # ordinary text, never a special token
