"""The Dagster instance the project's commands (``holodeck partitions``, ``pools``, ``agents
add``, ``demo``) work on: the one in ``DAGSTER_HOME``, by default the project root, where
``dagster.yaml`` lives."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from holodeck_core.errors import ConfigError


@contextmanager
def project_instance(root: Path) -> Iterator[dg.DagsterInstance]:
    """The instance in ``DAGSTER_HOME`` (set to ``root`` when unset); a ``DAGSTER_HOME`` that
    is not a folder is a config error saying how to fix it, not Dagster's traceback."""
    home = Path(os.environ.setdefault("DAGSTER_HOME", str(root)))
    if not home.is_dir():
        raise ConfigError(
            f"DAGSTER_HOME={home} is not a folder: create it (mkdir -p {home}) or unset "
            f"DAGSTER_HOME to use the project root, {root}"
        )
    with dg.DagsterInstance.get() as instance:
        yield instance
