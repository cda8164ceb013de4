"""``document_domain`` subsection patterns, as HoloDeck 0.7.1 defines them: lines that act as
implicit headings (``SEC. 3.``, ``(a)``, ``1.1``, ``Step 2``, ``Article IV`` …), each with the
heading level it stands for. Group 1 is the marker, group 2 the text after it."""

from __future__ import annotations

import re
from dataclasses import dataclass

_M = re.MULTILINE
_MI = re.MULTILINE | re.IGNORECASE


@dataclass(frozen=True)
class SubsectionPattern:
    name: str
    regex: re.Pattern[str]
    level: int


def _patterns(*rows: tuple[str, str, int, int]) -> tuple[SubsectionPattern, ...]:
    return tuple(
        SubsectionPattern(name, re.compile(rx, flags), lvl) for name, rx, lvl, flags in rows
    )


_SEP = r"[.:\-—]?"
DOMAIN_PATTERNS: dict[str, tuple[SubsectionPattern, ...]] = {
    "us_legislative": _patterns(
        ("title", rf"^TITLE\s+([IVXLCDM]+|\d+){_SEP}\s*(.*)$", 1, _MI),
        ("chapter", rf"^CHAPTER\s+(\d+){_SEP}\s*(.*)$", 2, _MI),
        ("section", rf"^SEC\.?\s+(\d+){_SEP}\s*(.*)$", 3, _MI),
        ("subsection", r"^\(([a-z])\)\s*(.*)$", 4, _M),
        ("paragraph", r"^\((\d+)\)\s*(.*)$", 5, _M),
        ("subparagraph", r"^\(([A-Z])\)\s*(.*)$", 6, _M),
    ),
    "au_legislative": _patterns(
        ("part", rf"^Part\s+(\d+){_SEP}\s*(.*)$", 1, _MI),
        ("division", rf"^Division\s+(\d+){_SEP}\s*(.*)$", 2, _MI),
        ("section", rf"^(?:Section\s+)?(\d+){_SEP}\s+(.+)$", 3, _MI),
        ("subsection", r"^\((\d+)\)\s*(.*)$", 4, _M),
        ("paragraph", r"^\(([a-z])\)\s*(.*)$", 5, _M),
        ("subparagraph", r"^\((i{1,3}|iv|v|vi{0,3})\)\s*(.*)$", 6, _MI),
    ),
    "academic": _patterns(
        ("section", r"^(\d+)\.\s+(.*)$", 3, _M),
        ("subsection", r"^(\d+\.\d+)\s+(.*)$", 4, _M),
        ("subsubsection", r"^(\d+\.\d+\.\d+)\s+(.*)$", 5, _M),
        ("paragraph", r"^(\d+\.\d+\.\d+\.\d+)\s+(.*)$", 6, _M),
    ),
    "technical": _patterns(
        ("step", r"^Step\s+(\d+)[.:]?\s*(.*)$", 3, _MI),
        ("substep", r"^(\d+\.\d+)[.:]?\s*(.*)$", 4, _M),
        ("note", r"^(Note)[.:]?\s*(.*)$", 4, _MI),
        ("warning", r"^(Warning|Caution)[.:]?\s*(.*)$", 4, _MI),
    ),
    "legal_contract": _patterns(
        ("article", r"^Article\s+([IVXLCDM]+|\d+)[.:]?\s*(.*)$", 3, _MI),
        ("section", r"^Section\s+(\d+(?:\.\d+)?)[.:]?\s*(.*)$", 4, _MI),
        ("clause", r"^\(([a-z])\)\s*(.*)$", 5, _M),
        ("subclause", r"^\((\d+)\)\s*(.*)$", 6, _M),
    ),
}
