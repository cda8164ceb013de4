"""The use cases, with no argparse and no printing (docs/architecture.md): run a suite and record it
(:mod:`.run`), score a stored run again (:mod:`.rescore`), plan the cases and trials a
comparison needs (:mod:`.plan`), and the stages the Dagster assets call one by one
(:mod:`.stages`), after loading the suite (:mod:`.suite`). The CLI and the pipelines call these;
nothing below imports them."""

from holodeck_core.runner.options import SuiteOptions

__all__ = ["SuiteOptions"]
