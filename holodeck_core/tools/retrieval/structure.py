"""``hierarchical_document`` chunks as HoloDeck 0.7.1's ``StructuredChunker`` cuts them
(``lib/structured_chunker.py``; agent side, docs/holodeck-fidelity.md: the chunks are what the model
reads).

* Headings: Markdown ``#`` lines outside code blocks (a ``document_domain`` pattern matching
  the title sets its level), plus every line a domain pattern matches (``(a) title``), in
  document order. No heading at all: sentences packed up to ``max_chunk_tokens``.
* Sections: the text before the first heading; then one per heading up to the split level
  (deeper ones stay inside), from the heading to the next such one, the ancestors its parent
  chain. With domain patterns the heading line and the body are two sections, the body's
  wrapped lines joined into paragraphs and its chain ending with the heading.
* A section over ``max_chunk_tokens`` (tiktoken ``cl100k_base``) is cut at sentence ends
  (a longer sentence stays whole); heading-only chunks are dropped, as HoloDeck drops its
  ``HEADER`` chunks before embedding.
* Section ids: ``<prefix>_<normalised heading path>`` (prefix the domain pattern's name for
  the level, else ``h1``…``h6``), ``chunk_<n>`` for a body or preamble chunk (``n`` counts
  the dropped heading-only chunks too)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from holodeck_core.tools.retrieval.chunking import Piece
from holodeck_core.tools.retrieval.domains import SubsectionPattern
from holodeck_core.tools.retrieval.tokens import cl100k_tokens

_HEADING = re.compile(r"^(#{1,6})\s+(.+)$", re.MULTILINE)
_CODE_BLOCK = re.compile(r"```[\s\S]*?```", re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_ID_CLEANUP = re.compile(r"[^a-z0-9]+")
_BLOCK_START = re.compile(r"^(?:#{1,6}\s|[-*+]\s|\d+\.\s|\([a-zA-Z0-9]+\)\s|```|>\s)")
_SENTENCE_AT_END = re.compile(r"[.!?]\s*$")
_DEFINED_TERM = re.compile(r'"([^"]+)"\s+(means|shall mean)', re.IGNORECASE)
MIN_SUBSTANTIVE_LENGTH = 150
CHUNKER = "holodeck-0.7.1"
"""In the index key: the chunks are HoloDeck 0.7.1's."""


def defined_term(content: str) -> str:
    """The term a chunk defines (the first ``"X" means`` / ``"X" shall mean``), or "":
    HoloDeck 0.7.1 classifies such a chunk ``DEFINITION`` and puts its term three more times
    in the chunk's BM25 document (a chunk under a "Definitions" heading without the phrase
    is a ``DEFINITION`` with no term)."""
    found = _DEFINED_TERM.search(content)
    return found.group(1) if found else ""


@dataclass(frozen=True)
class _Heading:
    level: int
    title: str
    position: int


@dataclass(frozen=True)
class _Section:
    content: str
    chain: tuple[str, ...]
    level: int = 0
    title: str = ""


@dataclass(frozen=True)
class StructureChunker:
    """``patterns``: the domain's patterns (all of them: they name the id prefixes);
    ``depth``: how many of them find headings (``max_subsection_depth``)."""

    max_tokens: int
    patterns: tuple[SubsectionPattern, ...] = ()
    depth: int | None = None

    @property
    def split_level(self) -> int:
        return len(self.patterns) // 2 if self.patterns else 6

    def chunks(self, markdown: str) -> list[Piece]:
        headings = self._headings(markdown)
        if not headings:
            return [Piece(t, (), f"chunk_{n}") for n, t in enumerate(self._flat(markdown))]
        pieces: list[Piece] = []
        index = 0
        for section in self._sections(markdown, headings):
            for text in self._sized(section.content):
                if not self._header_only(text, section):
                    pieces.append(Piece(text, section.chain, self._section_id(section, index)))
                index += 1
        return pieces

    def _headings(self, markdown: str) -> list[_Heading]:
        masked = _CODE_BLOCK.sub(lambda m: " " * len(m.group(0)), markdown)
        finding = self.patterns[: self.depth] if self.depth is not None else self.patterns
        found: list[_Heading] = []
        for match in _HEADING.finditer(masked):
            title = match.group(2).strip()
            level = next((p.level for p in finding if p.regex.match(title)), len(match.group(1)))
            found.append(_Heading(level, title, match.start()))
        blocks = [(m.start(), m.end()) for m in _CODE_BLOCK.finditer(markdown)]
        for pattern in finding:
            for match in pattern.regex.finditer(markdown):
                if any(start <= match.start() < end for start, end in blocks):
                    continue
                after = (match.group(2) or "") if (match.lastindex or 0) >= 2 else ""
                first = after.strip().split("\n")[0].strip()
                title = f"({match.group(1)}) {first}" if first else f"({match.group(1)})"
                found.append(_Heading(pattern.level, title, match.start()))
        return sorted(found, key=lambda h: h.position)

    def _sections(self, markdown: str, headings: list[_Heading]) -> list[_Section]:
        sections: list[_Section] = []
        preamble = markdown[: headings[0].position].strip()
        if preamble:
            sections.append(_Section(preamble, ()))
        splits = [h for h in headings if h.level <= self.split_level]
        if not splits:  # only inline headings: the whole text, once more, as one section
            return [*sections, _Section(_paragraphs(markdown.strip()), ())]
        stack: list[_Heading] = []
        for i, heading in enumerate(splits):
            while stack and stack[-1].level >= heading.level:
                stack.pop()
            chain = tuple(h.title for h in stack)
            end = splits[i + 1].position if i + 1 < len(splits) else len(markdown)
            text = markdown[heading.position : end].strip()
            if self.patterns:
                line, _, body = text.partition("\n")
                sections.append(_Section(line.strip(), chain, heading.level, heading.title))
                if body.strip():
                    sections.append(_Section(_paragraphs(body.strip()), (*chain, heading.title)))
            else:
                sections.append(_Section(text, chain, heading.level, heading.title))
            stack.append(heading)
        return sections

    def _pack(self, sentences: list[str]) -> list[str]:
        out: list[list[str]] = []
        tokens = 0
        for sentence in sentences:
            n = cl100k_tokens(sentence)
            if out and tokens + n > self.max_tokens:
                out.append([sentence])
                tokens = n
            else:
                out[-1:] = [[*(out[-1] if out else []), sentence]]
                tokens += n
        return [" ".join(group) for group in out]

    def _sized(self, text: str) -> list[str]:
        if cl100k_tokens(text) <= self.max_tokens:
            return [text]
        return self._pack(_SENTENCE_END.split(text))

    def _flat(self, text: str) -> list[str]:
        return self._pack([s.strip() for s in _SENTENCE_END.split(text) if s.strip()])

    def _header_only(self, text: str, section: _Section) -> bool:
        if not section.title or section.level <= 0:
            return False
        stripped = text.strip()
        if stripped == f"{'#' * section.level} {section.title}".strip():
            return True
        return (
            section.level >= 3
            and bool(self.patterns)
            and "\n" not in stripped
            and len(stripped) < MIN_SUBSTANTIVE_LENGTH
            and not _SENTENCE_AT_END.search(stripped)
        )

    def _section_id(self, section: _Section, index: int) -> str:
        segments = [s for s in map(_normalize, (*section.chain, section.title)) if s]
        if not section.title or not segments:
            return f"chunk_{index}"
        names = {p.level: p.name for p in reversed(self.patterns)}  # the first per level
        prefix = names.get(section.level) or f"h{section.level}"
        return f"{prefix}_{'_'.join(segments)}"


def _normalize(text: str) -> str:
    return _ID_CLEANUP.sub("_", text.lower()).strip("_")


def _paragraphs(text: str) -> str:
    """Wrapped lines joined into paragraphs (HoloDeck's ``_normalize_paragraphs``): a line
    not ending a sentence, a clause or a list, followed by a line starting lower-case that is
    not a block (heading, list item, ``(a)``, code fence, quote), is joined with a space."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    in_code = False
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            in_code = not in_code
        elif not in_code and stripped and not _BLOCK_START.match(stripped):
            while i + 1 < len(lines):
                following = lines[i + 1].strip()
                if not following or _BLOCK_START.match(following):
                    break
                if line.rstrip().endswith((".", ":", ";", "!", "?")):
                    break
                if not following[:1].islower():
                    break
                i += 1
                line = f"{line.rstrip()} {following}"
        out.append(line)
        i += 1
    return "\n".join(out)
