"""argparse types that refuse nonsense at the command line (exit 2 with usage), so
``--limit -1`` cannot run all but one case and ``--timeout nan`` or ``0`` cannot slip
through to a default."""

from __future__ import annotations

import argparse
import math

from holodeck_core.defaults import TRIALS_MAX, TRIALS_MIN


def positive_int(text: str) -> int:
    """An integer ≥ 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def trial_count(text: str) -> int:
    """``--trials K``: a whole number from :data:`TRIALS_MIN` to :data:`TRIALS_MAX`."""
    value = positive_int(text)
    if not TRIALS_MIN <= value <= TRIALS_MAX:
        raise argparse.ArgumentTypeError(
            f"must be between {TRIALS_MIN} and {TRIALS_MAX}, got {value}"
        )
    return value


def positive_seconds(text: str) -> float:
    """A finite number of seconds > 0."""
    return _seconds(text, zero=False)


def non_negative_seconds(text: str) -> float:
    """A finite number of seconds ≥ 0."""
    return _seconds(text, zero=True)


def _seconds(text: str, *, zero: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        bound = ">= 0" if zero else "> 0"
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds {bound}, got {text}")
    return value
