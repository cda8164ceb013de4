"""``--model`` of ``holodeck test`` and ``holodeck validate``: one of the agent's model
candidates (``models:`` of its ``holodeck.yaml`` entry, docs/agent-yaml.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from holodeck_core.defaults import OWN_MODEL_CANDIDATE

if TYPE_CHECKING:
    from holodeck_core.config.loader import LoadedAgent


def add_model_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        metavar="NAME",
        help="run this model candidate of holodeck.yaml's models: (default: the agent's own "
        f"model, the first empty candidate or {OWN_MODEL_CANDIDATE!r}; docs/agent-yaml.md)",
    )


def check_other_candidates(agent: str, target: str | None, loaded: LoadedAgent) -> None:
    """``holodeck validate``: every other candidate loads too (its merged agent validated),
    else a :class:`~holodeck_core.errors.ConfigError` with all their problems."""
    from holodeck_core.config.loader import load_agent
    from holodeck_core.errors import ConfigError

    problems = []
    for name in loaded.candidates.names:
        if name != loaded.candidate.name:
            try:
                load_agent(agent, target=target, model=name)
            except ConfigError as exc:
                problems += exc.problems
    if problems:
        raise ConfigError(problems)


def candidate_lines(loaded: LoadedAgent) -> list[str]:
    """``holodeck validate``'s line per candidate: what it changes and where it is declared,
    the one loaded marked (its settings' sources are the ``setting:`` lines)."""
    candidates = loaded.candidates
    shown = [candidates.own, *(c for c in candidates.declared if c.name != candidates.own.name)]
    lines = []
    for candidate in shown:
        changes = ", ".join(f"{k}={_shown(k, v)}" for k, v in candidate.block.items())
        mark = " (loaded)" if candidate.name == loaded.candidate.name else ""
        where = "the agent's own model" if not candidate.block else candidate.where
        lines.append(f"{candidate.name}{mark}: {changes + '; ' if changes else ''}{where}")
    return lines


def _shown(key: str, value: object) -> str:
    from holodeck_core.redaction import REDACTED, redact_text

    return REDACTED if key == "api_key" else redact_text(str(value))
