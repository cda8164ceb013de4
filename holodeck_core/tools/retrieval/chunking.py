"""Splitting documents into chunks.

* :func:`paragraph_chunks` (vectorstore): lines packed up to ``chunk_size`` tokens as
  HoloDeck's paragraph splitter (Semantic Kernel's) packs them, without overlap (HoloDeck
  0.7.1 accepts ``chunk_overlap`` and does not apply it; neither do we, docs/holodeck-fidelity.md).
* :mod:`.structure` (hierarchical_document ``structure``): HoloDeck's structure chunker.
* :func:`token_chunks` (``token``): sentences packed up to ``max_chunk_tokens`` with
  ``chunk_overlap``.

Tokens are counted as words and punctuation marks (close to a BPE count for English prose,
and deterministic without a tokenizer download)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"\w+|[^\w\s]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


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
