"""The ``holodeck`` entry point: the parser of every command, and what an error becomes
(a message and its exit code, docs/cli.md). Start-up stays light: each command module is
imported when the parser is built, and imports what its handler needs when it runs."""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable, Sequence

from holodeck_core.defaults import RUN_GC_YOUNG_THRESHOLD
from holodeck_core.errors import ExitCode, HolodeckError, safe_message

Handler = Callable[[argparse.Namespace], int]
BUILT_IN = frozenset(
    {
        "validate",
        "schema",
        "prompts",
        "test",
        "matrix",
        "rescore",
        "history",
        "plan",
        "dashboard",
        "model-server",
    }
)
COMMANDS_GROUP = "holodeck.commands"
"""Entry point group: ``name = "module:function"``, the function adds a subparser."""


def _model_server(argv: list[str]) -> int:
    from holodeck_core.cli.model_server import main as serve

    return serve(argv)


def _add_plugin_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Commands other packages register under the ``holodeck.commands`` entry point group
    (``holodeck demo`` comes from holodeck_pipelines): core never imports them itself."""
    from importlib.metadata import entry_points

    for entry in sorted(entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        entry.load()(commands)


def build_parser(*, plugins: bool = True) -> argparse.ArgumentParser:
    """The parser; ``plugins=False`` skips the entry point scan (~0.1 s), for a command
    line that names a built-in command."""
    parser = argparse.ArgumentParser(
        prog="holodeck",
        description="Evaluate LLM agents described in HoloDeck agent.yaml files.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from holodeck_core.cli.dashboard import add_dashboard_parser
    from holodeck_core.cli.history import add_history_parser
    from holodeck_core.cli.labels import add_labels_parser
    from holodeck_core.cli.matrix import add_matrix_parser
    from holodeck_core.cli.plan import add_plan_parser
    from holodeck_core.cli.prompts import add_prompts_parser
    from holodeck_core.cli.rescore import add_rescore_parser
    from holodeck_core.cli.test import add_test_parser
    from holodeck_core.cli.validate import add_schema_parser, add_validate_parser

    add_validate_parser(commands)
    add_schema_parser(commands)
    add_prompts_parser(commands)
    add_test_parser(commands)
    add_matrix_parser(commands)
    add_rescore_parser(commands)
    add_history_parser(commands)
    add_labels_parser(commands)
    add_plan_parser(commands)
    add_dashboard_parser(commands)
    if plugins:
        _add_plugin_commands(commands)

    # listed for --help; its own options are parsed by the server's main (see main() below)
    commands.add_parser(
        "model-server",
        help="run the loopback OpenAI/Anthropic model server (tests, benchmarks, demo)",
        add_help=False,
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; under GitHub Actions no line it prints from outside text can be a
    workflow command (:func:`~holodeck_core.terminal.workflow_commands_guarded`)."""
    from holodeck_core.terminal import workflow_commands_guarded

    with workflow_commands_guarded():
        try:
            return _main(argv)
        except KeyboardInterrupt:  # before a command ran (while importing or parsing)
            print("interrupted", file=sys.stderr)
            return ExitCode.EXECUTION


def _main(argv: Sequence[str] | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["model-server"]:
        return _model_server(arguments[1:])
    if arguments[:2] == ["test", "view"]:  # HoloDeck's name for the dashboard
        arguments = ["dashboard", *arguments[2:]]
    plugins = not arguments or arguments[0] not in BUILT_IN
    args = build_parser(plugins=plugins).parse_args(arguments)
    handler: Handler = args.handler
    try:
        return int(handler(args))
    except HolodeckError as exc:
        message = safe_message(exc)
        print(f"error: {message}" if "\n" not in message else f"error:\n{message}", file=sys.stderr)
        return int(exc.exit_code)
    except OSError as exc:  # a full, read-only or unreachable disk: the machine, not a bug
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"error: {safe_message(exc.strerror or exc)}{where}", file=sys.stderr)
        return ExitCode.EXECUTION
    except KeyboardInterrupt:
        if args.command != "test":
            print("interrupted", file=sys.stderr)
            return ExitCode.EXECUTION
        print(
            "interrupted: no EvalRun was written; finished cases are journaled, so the same "
            "command resumes (--fresh starts over)",
            file=sys.stderr,
        )
        return ExitCode.EXECUTION  # an aborted run (docs/cli.md)
    except Exception:  # a bug, not a user mistake: keep the evidence, never exit 1 (= FAIL)
        import traceback

        traceback.print_exc()
        print("error: holodeck failed unexpectedly (a bug: please report it)", file=sys.stderr)
        return ExitCode.EXECUTION


def entrypoint() -> None:
    # the young generation collected every RUN_GC_YOUNG_THRESHOLD allocations from now on,
    # before the commands' imports (docs/benchmarks.md)
    young, *older = gc.get_threshold()
    gc.set_threshold(max(young, RUN_GC_YOUNG_THRESHOLD), *older)
    code = main()
    # The process ends now: frozen, the objects of every imported module (openai's thousands
    # of pydantic types above all) skip the interpreter's final garbage collection, 0.2-0.4 s
    # of every run (bench/startup.py). atexit handlers and flushes still run; only objects
    # left in reference cycles go uncollected, and the OS frees their memory.
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    entrypoint()
