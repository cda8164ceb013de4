"""``python -m holodeck_core.cli``: the ``holodeck`` command."""

from holodeck_core.cli.main import entrypoint

entrypoint()
