"""``holodeck prompts``: by hand what the Dagster sensor does (docs/architecture.md): snapshot
an agent's prompt files into the project's prompt store, and list the versions stored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from holodeck_core.config.project import Project
from holodeck_core.config.prompts import PromptStore

if TYPE_CHECKING:
    from holodeck_core.config.loader import LoadedAgent
    from holodeck_core.config.prompts import Prompt, PromptSnapshot, Registration


def _store(loaded: LoadedAgent) -> PromptStore:
    return PromptStore(Project.discover(loaded.base_dir).prompts_dir, loaded.agent.name)


def register_prompts(loaded: LoadedAgent) -> Iterator[tuple[Prompt, Registration]]:
    """Every active prompt (the prompt file and its variants) registered in turn, each with
    what the store made of it (its key, whether it was new, a warning)."""
    store = _store(loaded)
    for prompt in loaded.active_prompts:
        yield prompt, store.register(prompt)


def registered_prompts(loaded: LoadedAgent) -> list[PromptSnapshot]:
    """The versions the store holds for the agent, oldest first."""
    return _store(loaded).list()
