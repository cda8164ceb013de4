"""holodeck-pipelines' domain library: models, config, files, agents, metrics, runner,
reports, history and the CLI. It never imports Dagster."""

__version__ = "0.1.0"
