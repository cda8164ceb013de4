"""``--target`` of ``holodeck test`` and ``holodeck validate`` (docs/targets.md)."""

from __future__ import annotations

import argparse


def add_target_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        metavar="YAML",
        help="evaluate the agent where it runs: a YAML file holding a target, or one inline, "
        "e.g. '{holodeck_serve: {url: \"http://127.0.0.1:8000\"}}' (docs/targets.md; "
        "wins over holodeck.yaml's)",
    )
