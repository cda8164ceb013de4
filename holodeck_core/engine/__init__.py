"""The use cases, with no argparse and no printing (docs/architecture.md): load a suite
(:mod:`.suite`), run it and record it (:mod:`.run`, :mod:`.record`), score a stored run again
(:mod:`.rescore`), plan the cases and trials a comparison needs (:mod:`.plan`), the stages the
Dagster assets call one by one (:mod:`.stages`), the suites of orchestrated runs
(:mod:`.launch`), the cells of one run run together (:mod:`.cells`) and what their checks read
(:mod:`.checks`), what a run says to a person
(:mod:`.report`), and the history's commands (:mod:`.history`). The CLI and the pipelines call
these; nothing below imports them.

The names below are model-free helpers used as they are (a wrapper would add nothing): how
dollars and percentage points are written, the cached agent loader, where the history is, the
redaction of secrets and the quoting of outside names."""

from holodeck_core.config.cached import loaded_agent
from holodeck_core.history.backend import resolve_history
from holodeck_core.history.failures import FailedCell, record_failed_run
from holodeck_core.history.store import History
from holodeck_core.redaction import redact, redact_text
from holodeck_core.reports.cost import usd
from holodeck_core.stats.display import points
from holodeck_core.tools.untrusted import shown_name

__all__ = [
    "FailedCell",
    "History",
    "loaded_agent",
    "points",
    "record_failed_run",
    "redact",
    "redact_text",
    "resolve_history",
    "shown_name",
    "usd",
]
