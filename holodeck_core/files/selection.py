"""Selecting PDF pages and PowerPoint slides *before* conversion.

markitdown's whole-PDF output has no reliable page boundaries (pdfplumber joins pages with
blank lines, pdfminer with form feeds, depending on content), so we write a
temporary document holding only the selected pages and convert that. Page numbers are 1-based.
PDFs are cut with pypdfium2 (installed by markitdown's ``pdf`` extra through pdfplumber),
decks with python-pptx (the ``pptx`` extra)."""

from __future__ import annotations

import re
from pathlib import Path

import pypdfium2  # type: ignore[import-untyped]

from holodeck_core.files.errors import FileProcessingError

_SLIDE_MARKER = re.compile(r"^<!-- Slide number: (\d+) -->$", re.MULTILINE)


def _check_range(pages: list[int], total: int, unit: str, container: str) -> None:
    beyond = [page for page in pages if page > total]
    if beyond:
        listed = ", ".join(str(page) for page in beyond)
        plural = "s" if len(beyond) > 1 else ""
        verb = "are" if len(beyond) > 1 else "is"
        total_unit = unit if total == 1 else f"{unit}s"
        raise FileProcessingError(
            f"{unit}{plural} {listed} {verb} out of range: the {container} has {total} {total_unit}"
        )


def pdf_page_count(path: Path) -> int:
    """Pages of a PDF; raises :class:`FileProcessingError` if pdfium cannot open it."""
    try:
        document = pypdfium2.PdfDocument(str(path))
    except pypdfium2.PdfiumError as exc:
        raise FileProcessingError(f"not a readable PDF: {exc}") from None
    try:
        return len(document)
    finally:
        document.close()


def pdf_subset(path: Path, pages: list[int], out: Path) -> int:
    """Write the ``pages`` (1-based) of ``path`` to ``out``; return the source's page count."""
    try:
        source = pypdfium2.PdfDocument(str(path))
    except pypdfium2.PdfiumError as exc:
        raise FileProcessingError(f"not a readable PDF: {exc}") from None
    try:
        total = len(source)
        _check_range(pages, total, "page", "document")
        subset = pypdfium2.PdfDocument.new()
        try:
            subset.import_pages(source, [page - 1 for page in pages])
            subset.save(str(out))
        finally:
            subset.close()
    finally:
        source.close()
    return total


def pptx_subset(path: Path, slides: list[int], out: Path) -> int:
    """Write a copy of the deck with only ``slides`` (1-based) to ``out``; return the slide
    count. Slides are dropped from the slide list of the original package (not copied into a
    new deck, which loses charts' relationships: MANIFEST, test.pptx slide 4)."""
    from pptx import Presentation
    from pptx.exc import PackageNotFoundError

    try:
        deck = Presentation(str(path))
    except (PackageNotFoundError, KeyError, ValueError, OSError) as exc:
        raise FileProcessingError(f"not a readable PowerPoint file: {exc}") from None
    slide_ids = deck.slides._sldIdLst  # python-pptx has no public API to remove a slide
    entries = list(slide_ids)
    _check_range(slides, len(entries), "slide", "presentation")
    keep = set(slides)
    for number, entry in enumerate(entries, start=1):
        if number not in keep:
            relationship_id = entry.rId
            slide_ids.remove(entry)
            deck.part.drop_rel(relationship_id)
    deck.save(str(out))
    return len(entries)


def renumber_slides(markdown: str, slides: list[int]) -> str:
    """markitdown numbers the slides of the subset 1..n; put the original numbers back, so
    ``<!-- Slide number: 4 -->`` means slide 4 of the user's deck."""
    seen = 0

    def original(match: re.Match[str]) -> str:
        nonlocal seen
        seen += 1
        if int(match.group(1)) != seen or seen > len(slides):
            return match.group(0)
        return f"<!-- Slide number: {slides[seen - 1]} -->"

    return _SLIDE_MARKER.sub(original, markdown)


def count_slides(markdown: str) -> int:
    return len(_SLIDE_MARKER.findall(markdown))
