"""Tokens as HoloDeck 0.7.1's structure chunker counts them: tiktoken's ``cl100k_base``.

tiktoken downloads its encodings on first use, and nothing here may reach the network, so the
encoding's file (OpenAI's ``cl100k_base.tiktoken``, MIT, the file tiktoken itself fetches) ships
with this package and is checked against tiktoken's own hash of it before use."""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from pathlib import Path

import tiktoken

_FILE = Path(__file__).with_name("data") / "cl100k_base.tiktoken"
_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"""
    r"""[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


@cache
def cl100k() -> tiktoken.Encoding:
    data = _FILE.read_bytes()
    if hashlib.sha256(data).hexdigest() != _SHA256:
        raise RuntimeError(f"{_FILE} is damaged (its sha256 is not tiktoken's); reinstall")
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in data.splitlines() if line)
    }
    return tiktoken.Encoding(
        "cl100k_base", pat_str=_PATTERN, mergeable_ranks=ranks, special_tokens=_SPECIAL
    )


def cl100k_tokens(text: str) -> int:
    """``len(encode(text))``, as HoloDeck's ``StructuredChunker._count_tokens`` (special
    tokens in the text are ordinary text there too: tiktoken refuses them by default)."""
    return len(cl100k().encode(text, disallowed_special=())) if text else 0
