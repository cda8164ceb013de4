"""Splitting documents into chunks.

* :func:`paragraph_chunks` (vectorstore): lines packed up to ``chunk_size`` tokens as
  HoloDeck's paragraph splitter (Semantic Kernel's) packs them, without overlap (HoloDeck
  0.7.1 accepts ``chunk_overlap`` and does not apply it; neither do we, DESIGN §8.1).
* :func:`structure_chunks` (hierarchical_document ``structure``): one section per Markdown
  heading (and per ``document_domain`` implicit heading up to the split level), keeping its
  heading path; sections over ``max_chunk_tokens`` split at sentence ends.
* :func:`token_chunks` (``token``): sentences packed up to ``max_chunk_tokens`` with
  ``chunk_overlap``.

Tokens are counted as words and punctuation marks (close to a BPE count for English prose,
and deterministic without a tokenizer download)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from holodeck_core.tools.retrieval.domains import SubsectionPattern

_TOKEN = re.compile(r"\w+|[^\w\s]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_HEADING = re.compile(r"^(#{1,6})\s+(.+)$", re.MULTILINE)
_CODE_BLOCK = re.compile(r"```[\s\S]*?```")
_ID_CLEANUP = re.compile(r"[^a-z0-9]+")


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


@dataclass(frozen=True)
class Piece:
    """A chunk before embedding: its text and where in the document it sits."""

    text: str
    parent_chain: tuple[str, ...] = ()
    section_id: str = ""


def _split_words(text: str, max_tokens: int) -> list[str]:
    out: list[str] = []
    current: list[str] = []
    tokens = 0
    for word in text.split():
        n = count_tokens(word)
        if current and tokens + n > max_tokens:
            out.append(" ".join(current))
            current, tokens = [], 0
        current.append(word)
        tokens += n
    if current:
        out.append(" ".join(current))
    return out


def _tail(text: str, overlap: int) -> str:
    """The last words of ``text`` holding at most ``overlap`` tokens."""
    words = text.split()
    taken: list[str] = []
    tokens = 0
    for word in reversed(words):
        tokens += count_tokens(word)
        if tokens > overlap:
            break
        taken.append(word)
    return " ".join(reversed(taken))


def pack(units: list[str], max_tokens: int, overlap: int = 0, joiner: str = " ") -> list[str]:
    """Greedily pack ``units`` into chunks of at most ``max_tokens`` (a unit that alone is
    larger is split at words); each chunk after the first starts with the last ``overlap``
    tokens of the one before."""
    pieces: list[str] = []
    for unit in units:
        unit = unit.strip()
        if unit:
            pieces += [unit] if count_tokens(unit) <= max_tokens else _split_words(unit, max_tokens)
    chunks: list[str] = []
    current: list[str] = []
    tokens = 0
    for piece in pieces:
        n = count_tokens(piece)
        if current and tokens + n > max_tokens:
            chunks.append(joiner.join(current))
            carried = _tail(chunks[-1], overlap) if overlap else ""
            current = [carried] if carried and count_tokens(carried) + n <= max_tokens else []
            tokens = count_tokens(carried) if current else 0
        current.append(piece)
        tokens += n
    if current:
        chunks.append(joiner.join(current))
    return chunks


def _sk_tokens(text: str) -> int:
    """Semantic Kernel's token estimate, which HoloDeck's paragraph splitter uses."""
    return len(text) // 4


def paragraph_chunks(text: str, chunk_size: int) -> list[Piece]:
    """HoloDeck 0.7.1's vectorstore chunks (Semantic Kernel's ``split_plaintext_paragraph``
    over the text's lines): lines stripped, empty ones dropped (a line of spaces stays as an
    empty line), packed with ``\n`` while ``tokens + line + 1 < chunk_size`` (a token is 4
    characters), a last chunk under a quarter of the size merged into the one before when
    their words fit; a line over the size split at words."""
    lines: list[str] = []
    for raw in text.replace("\r\n", "\n").split("\n"):
        line = raw.strip()
        if raw and _sk_tokens(line) > chunk_size:
            lines += _split_words(line, chunk_size)
        elif raw:
            lines.append(line)
    chunks: list[str] = []
    current = ""
    for line in lines:
        if current and _sk_tokens(current) + _sk_tokens(line) + 1 >= chunk_size:
            chunks.append(current.strip())
            current = ""
        current += f"{line}\n"
    if current:
        chunks.append(current.strip())
    short = len(chunks) > 1 and _sk_tokens(chunks[-1]) < chunk_size / 4
    if short and len(chunks[-1].split(" ")) + len(chunks[-2].split(" ")) <= chunk_size:
        chunks[-2:] = [f"{chunks[-2]}\n{chunks[-1]}".strip()]
    return [Piece(t) for t in chunks if t.strip()]


def token_chunks(text: str, max_tokens: int, overlap: int) -> list[Piece]:
    sentences = _SENTENCE_END.split(" ".join(text.split()))
    return [Piece(t) for t in pack(sentences, max_tokens, overlap)]


@dataclass(frozen=True)
class _Heading:
    level: int
    title: str
    position: int
    line_end: int


def _headings(markdown: str, patterns: tuple[SubsectionPattern, ...]) -> list[_Heading]:
    masked = _CODE_BLOCK.sub(lambda m: " " * len(m.group(0)), markdown)
    found: list[_Heading] = []
    for match in _HEADING.finditer(masked):
        title = match.group(2).strip()
        level = next((p.level for p in patterns if p.regex.match(title)), len(match.group(1)))
        found.append(_Heading(level, title, match.start(), match.end()))
    taken = {h.position for h in found}
    for pattern in patterns:
        for match in pattern.regex.finditer(masked):
            if match.start() in taken:
                continue
            after = (match.group(2) or "").strip().split("\n")[0].strip()
            title = f"({match.group(1)}) {after}".strip()
            found.append(_Heading(pattern.level, title, match.start(), match.end()))
            taken.add(match.start())
    return sorted(found, key=lambda h: h.position)


def _normalize(text: str) -> str:
    return _ID_CLEANUP.sub("_", text.lower()).strip("_")


def section_id(
    title: str, level: int, chain: tuple[str, ...], patterns: tuple[SubsectionPattern, ...]
) -> str:
    """``<prefix>_<normalized heading path>``; the prefix is the domain pattern's name for
    the level (``section``, ``clause`` …) or ``h1``…``h6``."""
    segments = [s for s in map(_normalize, (*chain, title)) if s]
    if not title or not segments:
        return ""
    prefix = next((p.name for p in patterns if p.level == level), f"h{level}" if level else "sec")
    return f"{prefix}_{'_'.join(segments)}"


def structure_chunks(
    markdown: str,
    max_tokens: int,
    patterns: tuple[SubsectionPattern, ...] = (),
    split_level: int = 6,
) -> list[Piece]:
    """Sections by heading: a heading at a level up to ``split_level`` opens a section (its
    ancestors are its ``parent_chain``); deeper headings stay inside it. Heading-only
    sections are dropped; long sections are split at sentence ends."""
    headings = _headings(markdown, patterns)
    if not headings:
        return token_chunks(markdown, max_tokens, 0)
    splits = [h for h in headings if h.level <= split_level]
    pieces: list[Piece] = []
    preamble = markdown[: (splits[0].position if splits else len(markdown))].strip()
    if preamble:
        pieces += _sized(preamble, (), "", max_tokens)
    stack: list[_Heading] = []
    for i, heading in enumerate(splits):
        while stack and stack[-1].level >= heading.level:
            stack.pop()
        chain = tuple(h.title for h in stack)
        end = splits[i + 1].position if i + 1 < len(splits) else len(markdown)
        sid = section_id(heading.title, heading.level, chain, patterns)
        if patterns:  # the heading line becomes part of the path, the body the chunk
            body = markdown[heading.line_end : end].strip()
            chain = (*chain, heading.title)
        else:
            body = markdown[heading.position : end].strip()
            if body == markdown[heading.position : heading.line_end].strip():
                body = ""
        if body:
            pieces += _sized(body, chain, sid, max_tokens)
        stack.append(heading)
    return pieces


def _sized(text: str, chain: tuple[str, ...], sid: str, max_tokens: int) -> list[Piece]:
    if count_tokens(text) <= max_tokens:
        return [Piece(text, chain, sid)]
    return [Piece(t, chain, sid) for t in pack(_SENTENCE_END.split(text), max_tokens)]
