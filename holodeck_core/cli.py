"""The ``holodeck`` command. Start-up stays light: each command imports what it needs."""

from __future__ import annotations

import argparse
import gc
import sys
from collections import Counter
from collections.abc import Callable, Sequence

from holodeck_core.errors import ExitCode, HolodeckError, safe_message

Handler = Callable[[argparse.Namespace], int]
BUILT_IN = frozenset(
    {
        "validate",
        "schema",
        "prompts",
        "test",
        "rescore",
        "history",
        "plan",
        "dashboard",
        "model-server",
    }
)
COMMANDS_GROUP = "holodeck.commands"
"""Entry point group: ``name = "module:function"``, the function adds a subparser."""


def _validate(args: argparse.Namespace) -> int:
    from holodeck_core.config.loader import load_agent
    from holodeck_core.models import MCPTool

    loaded = load_agent(args.agent)
    agent = loaded.agent
    metrics = agent.evaluations.metrics if agent.evaluations else []
    by_kind = Counter[str](metric.type for metric in metrics)
    by_type = Counter[str](tool.type for tool in agent.tools or [])
    _show(f"{loaded.display}: valid")
    _show(f"  agent:    {agent.name}")
    _show(f"  model:    {agent.model.provider.value} {agent.model.name}")
    versions = ", ".join(p.version.version for p in loaded.active_prompts)
    _show(f"  prompt:   {versions} ({loaded.prompt.version.source})")
    _show(f"  cases:    {len(agent.cases)}")
    _show(f"  metrics:  {_counts(by_kind)} ({', '.join(m.display_name for m in metrics)})")
    tool_names = ", ".join(tool.name for tool in agent.tools or [])
    _show(f"  tools:    {_counts(by_type)}" + (f" ({tool_names})" if tool_names else ""))
    tools = agent.tools or []
    for label, names in (
        ("run for real", [t.name for t in tools if t.runnable and t.mock is None]),
        ("mocked", [t.name for t in tools if t.mock is not None]),
        ("not runnable here without a `mock:` result", [t.name for t in tools if not t.runnable]),
    ):
        if names:
            _show(f"  {label}: {', '.join(names)}")
    for tool in tools:
        if (
            isinstance(tool, MCPTool)
            and "load_prompts" in tool.model_fields_set
            and tool.load_prompts
        ):
            _show(
                f"  warning:  tools ({tool.name}): load_prompts is not supported; the server's "
                "prompts are not offered to the model (its tools are)"
            )
    if agent.ignored_blocks():
        ignored = ", ".join(agent.ignored_blocks())
        _show(f"  ignored:  {ignored} (HoloDeck blocks this engine does not use)")
    for warning in loaded.warnings:
        _show(f"  warning:  {warning}")
    if any(t.type in ("vectorstore", "hierarchical_document") for t in agent.tools or []):
        from holodeck_core.tools.retrieval.settings import check_retrieval

        notes, warnings = check_retrieval(agent)
        for note in notes:
            _show(f"  note:     {note}")
        for warning in warnings:
            _show(f"  warning:  {warning}")
    return ExitCode.OK


def _show(line: str) -> None:
    """A line that holds text from a config: terminal escapes are shown, not obeyed."""
    from holodeck_core.terminal import printable

    print(printable(line))


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counter.items())) or "none"


def _schema(args: argparse.Namespace) -> int:
    import json

    from holodeck_core.models import Agent

    schema = Agent.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "HoloDeck agent.yaml (holodeck-pipelines)"
    print(json.dumps(schema, indent=2))
    return ExitCode.OK


def _prompts_register(args: argparse.Namespace) -> int:
    from holodeck_core.config.loader import load_agent
    from holodeck_core.config.project import Project
    from holodeck_core.config.prompts import PromptStore

    loaded = load_agent(args.agent)
    store = PromptStore(Project.discover(loaded.base_dir).prompts_dir, loaded.agent.name)
    for prompt in loaded.active_prompts:
        registration = store.register(prompt)
        state = "registered" if registration.created else "already registered"
        print(f"{registration.key}: {state} ({prompt.version.file_path or 'inline'})")
        if registration.warning:
            print(f"warning: {registration.warning}", file=sys.stderr)
    return ExitCode.OK


def _prompts_list(args: argparse.Namespace) -> int:
    from holodeck_core.config.loader import load_agent
    from holodeck_core.config.project import Project
    from holodeck_core.config.prompts import PromptStore

    loaded = load_agent(args.agent)
    store = PromptStore(Project.discover(loaded.base_dir).prompts_dir, loaded.agent.name)
    active = {p.version.body_hash for p in loaded.active_prompts}
    snapshots = store.list()
    if not snapshots:
        print(
            f"no prompt versions registered for {loaded.agent.name!r}; run "
            f"`holodeck prompts register {loaded.display}`"
        )
        return ExitCode.OK
    print(f"{'key':<28} {'active':<7} {'registered':<30} {'author':<16} body")
    for snap in snapshots:
        mark = "yes" if snap.prompt_version.body_hash in active else ""
        author = snap.prompt_version.author or ""
        print(
            f"{snap.key:<28} {mark:<7} {snap.registered_at:<30} {author:<16} "
            f"{snap.prompt_version.body_hash[:12]}"
        )
    return ExitCode.OK


def _model_server(argv: list[str]) -> int:
    from holodeck_core.testing import main as serve

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

    validate = commands.add_parser("validate", help="check an agent.yaml and summarize it")
    validate.add_argument("agent", metavar="AGENT_YAML")
    validate.set_defaults(handler=_validate)

    schema = commands.add_parser("schema", help="print the JSON Schema of agent.yaml")
    schema.set_defaults(handler=_schema)

    prompts = commands.add_parser("prompts", help="prompt versions and their snapshots")
    prompt_commands = prompts.add_subparsers(dest="prompts_command", required=True)
    register = prompt_commands.add_parser(
        "register", help="snapshot the agent's current prompt file and variants"
    )
    register.add_argument("agent", metavar="AGENT_YAML")
    register.set_defaults(handler=_prompts_register)
    listing = prompt_commands.add_parser("list", help="list registered prompt versions")
    listing.add_argument("agent", metavar="AGENT_YAML")
    listing.set_defaults(handler=_prompts_list)

    from holodeck_core.commands.plan import add_plan_parser
    from holodeck_core.commands.rescore import add_rescore_parser
    from holodeck_core.commands.test import add_test_parser
    from holodeck_core.dashboard.command import add_dashboard_parser
    from holodeck_core.history.cli import add_history_parser

    add_test_parser(commands)
    add_rescore_parser(commands)
    add_history_parser(commands)
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
        return ExitCode.EXECUTION  # an aborted run (§6.7)
    except Exception:  # a bug, not a user mistake: keep the evidence, never exit 1 (= FAIL)
        import traceback

        traceback.print_exc()
        print("error: holodeck failed unexpectedly (a bug: please report it)", file=sys.stderr)
        return ExitCode.EXECUTION


def entrypoint() -> None:
    code = main()
    # The process ends now: frozen, the objects of every imported module (openai's thousands
    # of pydantic types above all) skip the interpreter's final garbage collection, 0.2-0.4 s
    # of every run (bench/startup.py). atexit handlers and flushes still run; only objects
    # left in reference cycles go uncollected, and the OS frees their memory.
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    entrypoint()
