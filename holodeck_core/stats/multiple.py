"""Many comparisons, one error rate (docs/cli.md): the p-values of one family of verdicts (the
``no_regression`` checks of one schedule tick; the pass fraction and metrics of one ``history
compare``) are adjusted together, so 20 checks at 0.05 do not call a false regression a night.

Benjamini-Hochberg (the default) controls the false discovery rate, the expected share of
false calls among the calls made: the right trade for a nightly screen whose hits a person
then reads. Holm controls the family-wise error rate (any false call at all): stricter, for
gates. The adjusted p-values are scipy's ``false_discovery_control`` (BH) and Holm's step-down
maxima; a verdict compares the adjusted p with alpha and shows the raw one beside it."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from holodeck_core.stats.estimates import scipy_stats


class Adjustment(StrEnum):
    BH = "bh"
    HOLM = "holm"
    NONE = "none"


ADJUSTMENT_NAMES = {
    Adjustment.BH: "Benjamini-Hochberg",
    Adjustment.HOLM: "Holm",
    Adjustment.NONE: "unadjusted",
}


def adjust_pvalues(pvalues: Sequence[float], method: Adjustment = Adjustment.BH) -> list[float]:
    """The adjusted p-values of one family, in the order given."""
    m = len(pvalues)
    if m == 0 or method is Adjustment.NONE:
        return list(pvalues)
    if method is Adjustment.BH:
        return [float(p) for p in scipy_stats().false_discovery_control(list(pvalues))]
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted
