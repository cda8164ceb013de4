"""holodeck-pipelines' domain library, in layers (each imports only those before it; see
``tests/test_layering.py``): models; config, testing; calls, files; agents, tools, metrics;
runner; history, reports; commands and the CLI. It never imports Dagster or
holodeck_pipelines."""

__version__ = "0.1.0"
