"""The use cases, with no argparse and no printing (docs/architecture.md): run a suite and record it
(:mod:`.run`, :mod:`.record`), score a stored run again (:mod:`.rescore`), plan the cases and
trials a comparison needs (:mod:`.plan`), the stages the Dagster assets call one by one
(:mod:`.stages`), the suites of orchestrated runs (:mod:`.suite`) and what their checks read
(:mod:`.checks`). The CLI and the pipelines call these; nothing below imports them.

The names below are the model-free helpers the pipelines use as they are (a wrapper would add
nothing): the cached agent loader, where the history is, the redaction of secrets and the
quoting of outside names."""

from holodeck_core.config.cached import loaded_agent
from holodeck_core.history.backend import resolve_history
from holodeck_core.history.failures import record_failed_run
from holodeck_core.history.store import History
from holodeck_core.redaction import redact, redact_text
from holodeck_core.tools.untrusted import shown_name

__all__ = [
    "History",
    "loaded_agent",
    "record_failed_run",
    "redact",
    "redact_text",
    "resolve_history",
    "shown_name",
]
