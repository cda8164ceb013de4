"""Numbers as people read them, in one notation everywhere: differences of rates in
percentage points (``+32.0 pp``), p-values to three significant digits or ``p < 0.001``, any
other number to four significant digits without an exponent, with its unit."""

from __future__ import annotations

import math

NOISE = 1e-9
"""Below this a difference is floating-point rounding (``1.11e-16``), shown as 0."""
MIN_SHOWN_P = 0.001
MAX_DECIMALS = 6
PERCENT_DECIMALS = 1
"""Of a rate in percent (``91.7``), as ``points`` shows a difference of two."""


def points(difference: float, *, unit: bool = True) -> str:
    """A difference of two rates (fractions) in percentage points: ``+32.0 pp`` (``+32.0``
    without ``unit``, for a range that names it once)."""
    value = 0.0 if abs(difference) < NOISE else difference * 100
    return f"{value:+.1f}" + (" pp" if unit else "")


def p_value(p: float) -> str:
    """``p = 0.0026``, or ``p < 0.001`` (an exact 0 or a p past the test's precision)."""
    return f"p < {MIN_SHOWN_P:g}" if p < MIN_SHOWN_P else f"p = {p:.3g}"


def number(value: float, *, sign: bool = False, unit: str = "") -> str:
    """Four significant digits, no exponent, thousands separated: ``1,235``, ``0.8944``,
    ``+0.000123``; rounding noise is 0."""
    if not math.isfinite(value):
        return str(value)
    if abs(value) < NOISE:
        value = 0.0
    text = f"{value:{'+' if sign else ''},.{_decimals(value)}f}"
    return f"{text} {unit}" if unit else text


def rounded(value: float) -> float:
    """The value :func:`number` shows, as a number (for Dagster's plots): ``0.003608``."""
    if not math.isfinite(value) or abs(value) < NOISE:
        return 0.0 if math.isfinite(value) else value
    return round(value, _decimals(value))


def _decimals(value: float) -> int:
    """Decimals that keep four significant digits (at most ``MAX_DECIMALS``)."""
    magnitude = 0 if value == 0 else math.floor(math.log10(abs(value)))
    return min(MAX_DECIMALS, max(0, 3 - magnitude))
