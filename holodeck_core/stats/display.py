"""Numbers as people read them, in one notation everywhere: differences of rates in
percentage points (``+32.0 pp``), p-values to three significant digits or ``p < 0.001``, money
to three significant digits, any other number to four significant digits without an exponent,
with its unit."""

from __future__ import annotations

import math

NOISE = 1e-9
"""Below this a difference is floating-point rounding (``1.11e-16``), shown as 0."""
MIN_SHOWN_P = 0.001
MAX_DECIMALS = 6
DIGITS = 4
MONEY_DIGITS = 3
"""Dollars to three significant digits (``$0.000286``), down to a call of a few tokens."""
MAX_MONEY_DECIMALS = 10
PERCENT_DECIMALS = 1
"""Of a rate in percent (``91.7``), as ``points`` shows a difference of two."""


def points(difference: float, *, unit: bool = True, sign: bool = True) -> str:
    """A difference of two rates (fractions) in percentage points: ``+32.0 pp`` (``+32.0``
    without ``unit``, for a range that names it once; ``5.0 pp`` without ``sign``, a size)."""
    value = 0.0 if abs(difference) < NOISE else difference * 100
    return f"{value:{'+' if sign else ''}.{PERCENT_DECIMALS}f}" + (" pp" if unit else "")


def p_value(p: float) -> str:
    """``p = 0.0026``, or ``p < 0.001`` (an exact 0 or a p past the test's precision)."""
    return f"p < {MIN_SHOWN_P:g}" if p < MIN_SHOWN_P else f"p = {p:.3g}"


def number(
    value: float,
    *,
    sign: bool = False,
    unit: str = "",
    digits: int = DIGITS,
    max_decimals: int = MAX_DECIMALS,
) -> str:
    """Four significant digits (``digits``), no exponent, thousands separated: ``1,235``,
    ``0.8944``, ``+0.000123``; rounding noise is 0."""
    if not math.isfinite(value):
        return str(value)
    if abs(value) < NOISE:
        value = 0.0
    decimals = _decimals(value, digits, max_decimals)
    text = f"{value:{'+' if sign else ''},.{decimals}f}"
    return f"{text} {unit}" if unit else text


def rounded(value: float) -> float:
    """The value :func:`number` shows, as a number (for Dagster's plots): ``0.003608``."""
    if not math.isfinite(value):
        return value
    if abs(value) < NOISE:
        return 0.0
    return round(value, _decimals(value, DIGITS, MAX_DECIMALS))


def _decimals(value: float, digits: int, max_decimals: int) -> int:
    """Decimals that keep ``digits`` significant digits (at most ``max_decimals``)."""
    magnitude = 0 if value == 0 else math.floor(math.log10(abs(value)))
    return min(max_decimals, max(0, digits - 1 - magnitude))


def money(usd: float | None, *, sign: bool = False) -> str:
    """US dollars to three significant digits: ``$0.000286``, ``$1,234``, ``+$0.00120``,
    ``-$0.000300``; ``unknown`` when a model had no price (never 0). Every screen and report
    shows a run's cost with it (docs/cost.md)."""
    if usd is None:
        return "unknown"
    text = number(abs(usd), digits=MONEY_DIGITS, max_decimals=MAX_MONEY_DECIMALS)
    if text.strip("0.,") == "":
        return "+$0" if sign else "$0"
    return f"{'-' if usd < 0 else '+' if sign else ''}${text}"
