"""``--model`` of ``holodeck test`` and ``holodeck validate``: one of the agent's model
candidates (``models:`` of its ``holodeck.yaml`` entry, docs/agent-yaml.md)."""

from __future__ import annotations

import argparse

from holodeck_core.defaults import OWN_MODEL_CANDIDATE


def add_model_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        metavar="NAME",
        help="run this model candidate of holodeck.yaml's models: (default: the agent's own "
        f"model, the first empty candidate or {OWN_MODEL_CANDIDATE!r}; docs/agent-yaml.md)",
    )
