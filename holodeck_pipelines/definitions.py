"""The Dagster entry point (``workspace.yaml`` → ``holodeck_pipelines.definitions``).

The project is the nearest folder holding ``holodeck.yaml``, from ``HOLODECK_PROJECT_ROOT``
or the working directory."""

import os
from pathlib import Path

from holodeck_core.config.project import Project
from holodeck_pipelines.builder import build_definitions

defs = build_definitions(Project.discover(Path(os.environ.get("HOLODECK_PROJECT_ROOT", "."))))
