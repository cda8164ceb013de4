"""Load a suite: everything a run's plan reads from disk (the project, the prompt store, the
judge-control file, the tool code and attachments it fingerprints), read once here, so that
building the :class:`~holodeck_core.runner.suite.Suite` itself is pure (docs/architecture.md).
``holodeck test`` and the Dagster assets both start here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from holodeck_core.config.loader import LoadedAgent, load_agent
from holodeck_core.config.project import Project
from holodeck_core.errors import ConfigError
from holodeck_core.metrics.judge_control import load_control
from holodeck_core.runner import fingerprint as fp
from holodeck_core.runner.options import SuiteOptions, resolve_prompt, select_cases
from holodeck_core.runner.suite import Suite, SuiteInputs

__all__ = ["Suite", "SuiteOptions", "load_suite", "read_inputs"]


def load_suite(
    agent: str | Path | LoadedAgent,
    options: SuiteOptions | None = None,
    *,
    project: Project | None = None,
    prompt_key: str | None = None,
) -> Suite:
    """The suite of ``agent`` (an ``agent.yaml`` path, or an agent already loaded) under
    ``options``; ``project`` defaults to the one around the agent file and ``prompt_key``
    (a registered prompt version) overrides the options'. Raises
    :class:`~holodeck_core.errors.ConfigError` when no case is selected, the prompt version
    is unknown or the judge-control file is bad, before anything is run."""
    loaded = agent if isinstance(agent, LoadedAgent) else load_agent(str(agent))
    options = options or SuiteOptions()
    if prompt_key is not None:
        options = replace(options, prompt_key=prompt_key)
    return Suite(loaded, read_inputs(loaded, options, project), options)


def read_inputs(
    loaded: LoadedAgent, options: SuiteOptions, project: Project | None = None
) -> SuiteInputs:
    """What the suite reads from disk, in the order a mistake is best reported in."""
    project = project or Project.discover(loaded.base_dir)
    cases = select_cases(loaded.agent.cases, options)
    if not cases:
        raise ConfigError(
            "no test cases to run"
            + (f" match --filter {options.filter!r}" if options.filter else ""),
            file=loaded.display,
        )
    prompt, key = resolve_prompt(loaded, project, options.prompt_key)
    control_rows = load_control(loaded.agent, loaded.resolve)
    dataset = fp.dataset_hash(cases)
    suite_fp = fp.suite_fingerprint(loaded, prompt.text, dataset)
    tools_fp = fp.tools_fingerprint(loaded)
    return SuiteInputs(
        project=project,
        cases=cases,
        prompt=prompt,
        prompt_key=key,
        control_rows=control_rows,
        dataset_hash=dataset,
        suite_fingerprint=suite_fp,
        case_fingerprints={
            case.id or "": fp.case_fingerprint(loaded, suite_fp, tools_fp, case) for case in cases
        },
    )
