"""PDFs as HoloDeck 0.7.1 converts them (``lib/pdf_processor/heading_extractor.py``, which its
``FileProcessor`` applies to every PDF before markitdown; agent side, docs/holodeck-fidelity.md).

pdfminer.six's text lines, one output line each (stripped, empty ones dropped). With bookmarks,
a line whose normalised text is a bookmark's title (that page's bookmarks first, then those
whose page is unknown), or holds a title of 8 characters or more (the longest wins), becomes a
Markdown heading of the bookmark's level; when fewer lines match than 30 % of the bookmarks,
or the PDF has none, a line's first character's font size decides: 14 pt and up ``#``, 12 pt
and up ``##``. markitdown converts the file only when this fails (:mod:`.convert`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIN_SUBSTRING_TITLE = 8
MIN_MATCH_RATE = 0.3
FONT_LEVELS = ((14.0, 1), (12.0, 2))
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class _Line:
    text: str
    size: float | None


def _normalize(text: str) -> str:
    return _SPACES.sub(" ", text.lower().strip())


def _pages(path: Path) -> list[list[_Line]]:
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTChar, LTTextContainer, LTTextLine

    pages: list[list[_Line]] = []
    for layout in extract_pages(str(path)):
        lines: list[_Line] = []
        for element in layout:
            if not isinstance(element, LTTextContainer):
                continue
            for line in element:
                text = line.get_text().strip() if isinstance(line, LTTextLine) else ""
                if text:
                    size = next((c.size for c in line if isinstance(c, LTChar)), None)
                    lines.append(_Line(text, size))
        pages.append(lines)
    return pages


def _target(dest: Any, action: Any) -> Any:
    """The page reference a bookmark points at (its ``dest``, else its action's ``D``)."""
    from pdfminer.pdftypes import PDFObjRef

    for where in (dest, action.get("D") if isinstance(action, dict) else None):
        if isinstance(where, list) and where:
            return where[0]
        if isinstance(where, PDFObjRef):
            return where
    return None


def _bookmarks(path: Path) -> list[tuple[str, int, int | None]]:
    """(normalised title, level, 0-based page or None) of every outline entry."""
    from pdfminer.pdfdocument import PDFDocument, PDFNoOutlines
    from pdfminer.pdfpage import PDFPage
    from pdfminer.pdfparser import PDFParser
    from pdfminer.pdftypes import PDFObjRef

    with path.open("rb") as handle:
        document = PDFDocument(PDFParser(handle))
        try:
            outlines = list(document.get_outlines())
        except PDFNoOutlines:
            return []
        if not outlines:
            return []
        pages = {page.pageid: n for n, page in enumerate(PDFPage.create_pages(document))}
    found = []
    for level, title, dest, action, _ in outlines:
        ref = _target(dest, action)
        page = pages.get(ref.objid) if isinstance(ref, PDFObjRef) else None
        found.append((_normalize(title), level, page))
    return found


def _level(line: str, bookmarks: list[tuple[str, int]]) -> int | None:
    for title, level in bookmarks:
        if title and title == line:
            return level
    inside = [(len(t), -n, level) for n, (t, level) in enumerate(bookmarks) if t in line]
    best = max((m for m in inside if m[0] >= MIN_SUBSTRING_TITLE), default=None)
    return best[2] if best else None  # the longest title, the first of equal length


def _by_bookmarks(pages: list[list[_Line]], path: Path) -> str | None:
    bookmarks = _bookmarks(path)
    if not bookmarks:
        return None
    on_page: dict[int, list[tuple[str, int]]] = {}
    for title, level, page in bookmarks:
        if page is not None:
            on_page.setdefault(page, []).append((title, level))
    unplaced = [(title, level) for title, level, page in bookmarks if page is None]
    out: list[str] = []
    matched = 0
    for number, lines in enumerate(pages):
        for line in lines:
            text = _normalize(line.text)
            heading = _level(text, on_page.get(number, [])) if text else None
            if heading is None and unplaced and text:
                heading = _level(text, unplaced)
            if heading is not None:
                matched += 1
            out.append(f"{'#' * heading} {line.text}" if heading is not None else line.text)
    return "\n".join(out) if matched / len(bookmarks) >= MIN_MATCH_RATE else None


def _by_font_size(pages: list[list[_Line]]) -> Iterator[str]:
    for lines in pages:
        for line in lines:
            level = next((n for size, n in FONT_LEVELS if line.size and line.size >= size), 0)
            yield f"{'#' * level} {line.text}" if level else line.text


def pdf_markdown(path: Path) -> str:
    """The PDF at ``path`` as HoloDeck's heading extractor writes it; raises what pdfminer
    raises (the caller falls back to markitdown, as HoloDeck does)."""
    pages = _pages(path)
    try:
        by_bookmarks = _by_bookmarks(pages, path)
    except Exception:  # HoloDeck's fallback: a broken outline is a PDF without one
        by_bookmarks = None
    return by_bookmarks if by_bookmarks is not None else "\n".join(_by_font_size(pages))
