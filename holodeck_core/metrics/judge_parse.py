"""Reading judge replies: the first JSON object in a text, and score distributions from
log-probabilities (G-Eval's probability-weighted score)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_DECODER = json.JSONDecoder()
_PREFIX_CHARS = 40
_SCORE_KEY = re.compile(r'"score"\s*:\s*"?\s*$')


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (prose, code fences and trailing text around it
    are ignored); ``None`` when there is none."""
    start = text.find("{")
    while start != -1:
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


@dataclass(frozen=True)
class NumberToken:
    """A number token of a judge reply with the probabilities of its number alternatives.

    ``prefix`` is the reply text just before the token (to find which number is the score);
    ``distribution`` maps each integer among the token's top log-probabilities (and the
    token itself) to its probability.
    """

    prefix: str
    value: int
    distribution: Mapping[int, float]

    def to_json(self) -> dict[str, Any]:
        return {
            "prefix": self.prefix,
            "value": self.value,
            "distribution": {str(k): v for k, v in self.distribution.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NumberToken:
        return cls(
            prefix=str(data["prefix"]),
            value=int(data["value"]),
            distribution={int(k): float(v) for k, v in dict(data["distribution"]).items()},
        )


def _integer(token: object) -> int | None:
    if not isinstance(token, str):
        return None
    core = token.strip()
    return int(core) if core.isascii() and core.isdecimal() else None


def number_tokens(logprobs: Sequence[Mapping[str, Any]] | None) -> list[NumberToken] | None:
    """The number tokens of an OpenAI chat ``logprobs.content`` list (``None`` if the
    provider gave no log-probabilities). Only these are kept: they are all a score needs,
    and they keep judge-cache entries small."""
    if not logprobs:
        return None
    found: list[NumberToken] = []
    text = ""
    for entry in logprobs:
        token = entry.get("token")
        value = _integer(token)
        if value is not None:
            distribution: dict[int, float] = {}
            for alt in entry.get("top_logprobs") or []:
                alt_value = _integer(alt.get("token"))
                logprob = alt.get("logprob")
                if alt_value is None or not isinstance(logprob, int | float):
                    continue
                distribution[alt_value] = distribution.get(alt_value, 0.0) + math.exp(logprob)
            chosen = entry.get("logprob")
            if value not in distribution and isinstance(chosen, int | float):
                distribution[value] = math.exp(chosen)
            found.append(NumberToken(text[-_PREFIX_CHARS:], value, distribution))
        text += token if isinstance(token, str) else ""
    return found


def weighted_score(
    tokens: Sequence[NumberToken] | None, score: int, low: int, high: int
) -> float | None:
    """The probability-weighted mean of the integer score tokens in ``low..high``.

    The score token is the first number right after the ``"score"`` key whose value is the
    parsed ``score``. ``None`` when there are no log-probabilities or no such token (the
    caller then uses the integer score).
    """
    for token in tokens or ():
        if token.value != score or not _SCORE_KEY.search(token.prefix):
            continue
        in_range = {v: p for v, p in token.distribution.items() if low <= v <= high and p > 0}
        total = sum(in_range.values())
        if total <= 0:
            return None
        return sum(v * p for v, p in in_range.items()) / total
    return None


# --- checks of parsed replies (``None``: usable; else the problem, sent back to the judge) ---


def check_string_list(
    key: str, *, allow_empty: bool = True
) -> Callable[[dict[str, Any]], str | None]:
    """``{key: ["...", ...]}``."""

    def check(data: dict[str, Any]) -> str | None:
        value = data.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return f'"{key}" must be a list of strings'
        if not allow_empty and not [v for v in value if v.strip()]:
            return f'"{key}" must not be empty'
        return None

    return check


def check_verdicts(
    allowed: frozenset[str], *, count: int | None = None, text_key: str | None = None
) -> Callable[[dict[str, Any]], str | None]:
    """``{"verdicts": [{"verdict": one of allowed, "reason": "..."}, ...]}``, exactly
    ``count`` of them when given, each with a string ``text_key`` when given."""
    choices = "/".join(sorted(allowed))

    def check(data: dict[str, Any]) -> str | None:
        verdicts = data.get("verdicts")
        if not isinstance(verdicts, list):
            return '"verdicts" must be a list'
        if count is not None and len(verdicts) != count:
            return f"expected {count} verdicts, one per item in order, got {len(verdicts)}"
        for i, item in enumerate(verdicts, 1):
            if not isinstance(item, dict):
                return f"verdict {i} must be an object"
            verdict = item.get("verdict")
            if not isinstance(verdict, str) or verdict.strip().lower() not in allowed:
                return f'verdict {i} must have "verdict": {choices}'
            if text_key is not None and not isinstance(item.get(text_key), str):
                return f'verdict {i} must have a "{text_key}" string'
        return None

    return check


def verdict_of(item: Mapping[str, Any]) -> str:
    return str(item.get("verdict", "")).strip().lower()


def reason_of(item: Mapping[str, Any]) -> str:
    reason = item.get("reason")
    return reason.strip() if isinstance(reason, str) else ""


def score_number(value: object) -> float | None:
    """A score as the judge wrote it: a number or a numeric string (not a bool)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def check_score(low: int, high: int) -> Callable[[dict[str, Any]], str | None]:
    """``{"score": <number in low..high>, "reason": "..."}``."""

    def check(data: dict[str, Any]) -> str | None:
        number = score_number(data.get("score"))
        if number is None or not low <= number <= high:
            return f'"score" must be an integer from {low} to {high}'
        return None

    return check
