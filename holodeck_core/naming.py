"""Names shared by the CLI and the pipelines (DESIGN §6.4)."""

from __future__ import annotations

import re

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def slugify(name: str) -> str:
    """Lowercase, runs of ``[^a-z0-9]`` become ``-``, trimmed: ``Customer Support!`` →
    ``customer-support``. Used for results folders and file names."""
    return _NON_ALNUM.sub("-", name.lower()).strip("-")


def dagster_name(name: str) -> str:
    """The slug with ``-`` → ``_``: a valid Dagster group, asset-key prefix and check name."""
    return slugify(name).replace("-", "_")


def partitions_def_name(agent_name: str) -> str:
    return f"{dagster_name(agent_name)}_prompt_versions"
