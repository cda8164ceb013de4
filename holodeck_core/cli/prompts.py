"""``holodeck prompts register|list AGENT_YAML``: by hand what the Dagster sensor does
(docs/architecture.md): snapshot the agent's prompt files, list the registered versions."""

from __future__ import annotations

import argparse
import sys

from holodeck_core.errors import ExitCode


def add_prompts_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
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


def _prompts_register(args: argparse.Namespace) -> int:
    from holodeck_core.config.loader import load_agent
    from holodeck_core.engine.prompts import register_prompts

    for prompt, registration in register_prompts(load_agent(args.agent)):
        state = "registered" if registration.created else "already registered"
        print(f"{registration.key}: {state} ({prompt.version.file_path or 'inline'})")
        if registration.warning:
            print(f"warning: {registration.warning}", file=sys.stderr)
    return ExitCode.OK


def _prompts_list(args: argparse.Namespace) -> int:
    from holodeck_core.config.loader import load_agent
    from holodeck_core.engine.prompts import registered_prompts

    loaded = load_agent(args.agent)
    active = {p.version.body_hash for p in loaded.active_prompts}
    snapshots = registered_prompts(loaded)
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
