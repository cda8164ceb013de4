"""The Dagster entry point (``workspace.yaml`` → ``holodeck_pipelines.definitions``)."""

import dagster as dg

defs = dg.Definitions()
