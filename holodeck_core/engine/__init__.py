"""The use cases, with no argparse and no printing (docs/architecture.md): load a suite
(:mod:`.suite`), run it and record it (:mod:`.run`), score a stored run again
(:mod:`.rescore`), plan the cases and trials a comparison needs (:mod:`.plan`), the stages the
Dagster assets call one by one (:mod:`.stages`), and what a run says to a person
(:mod:`.report`). The CLI and the pipelines call these; nothing below imports them.

Re-exported as they are: how dollars and percentage points are written, for the lines the
CLI composes itself."""

from holodeck_core.reports.cost import usd
from holodeck_core.stats.display import points

__all__ = ["points", "usd"]
