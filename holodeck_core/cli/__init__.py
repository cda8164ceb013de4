"""The command line, the only home of argparse and of printing for people (docs/architecture.md).

:mod:`.main` is the ``holodeck`` entry point; each command (or family) has its module:
:mod:`.validate` (``validate``, ``schema``), :mod:`.prompts`, :mod:`.test`, :mod:`.rescore`,
:mod:`.plan`, :mod:`.history` (with :mod:`.history_render`), :mod:`.dashboard`,
:mod:`.model_server`; :mod:`.console` prints a run, :mod:`.argtypes` and
:mod:`.history_option` are the arguments several commands share. The use cases they call
live in :mod:`holodeck_core.engine` and below; nothing there imports this package.

Nothing is imported here: start-up stays light, each command imports what it needs."""
