"""A loaded config reused within one process while nothing it was read from changed.

A Dagster run worker loads the definitions (every ``agent.yaml``), then each of a partition's
five steps needs the same agent again; a code server's sensor and schedule reload it every
tick. :func:`loaded_agent` parses and validates a config once per process and hands out the same
:class:`LoadedAgent` for as long as nothing it was read from has changed: the files' sizes and
modification times and the environment are compared on every call (a few ``stat`` calls), so
an edit is seen by the next call. Callers treat the result as read-only."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from holodeck_core.config.loader import LoadedAgent, load_agent
from holodeck_core.config.merge import user_config_dir
from holodeck_core.config.project import PROJECT_FILE, Project
from holodeck_core.defaults import OWN_MODEL_CANDIDATE

FRESH_NS = 1_000_000_000
Stamp = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True)
class _Entry:
    sources: tuple[Path, ...]
    stamp: Stamp
    environment: int
    loaded: LoadedAgent


_entries: dict[tuple[Path, str | None], _Entry] = {}
_lock = threading.Lock()


def _stamp(paths: tuple[Path, ...]) -> Stamp:
    """Size and mtime of each path (-1 for one that does not exist, so creating it counts)."""
    out = []
    for path in paths:
        try:
            info = path.stat()
        except OSError:
            out.append((str(path), -1, -1))
        else:
            out.append((str(path), info.st_mtime_ns, info.st_size))
    return tuple(out)


def _environment() -> int:
    """``${VAR}`` substitution reads the process environment."""
    return hash(frozenset(os.environ.items()))


def _sources(loaded: LoadedAgent) -> tuple[Path, ...]:
    """Every file ``load_agent`` reads for this agent: the agent file, the ``.env`` files and
    the ``config.yaml`` files HoloDeck reads (where they would be: creating one counts), the
    test-cases file, the prompt files, a response-schema file, and the project's
    ``holodeck.yaml`` (and its ``.env``) and other agent files (the slug check reads their
    names)."""
    agent = loaded.agent
    relative = [agent.test_cases_file, agent.instructions.file, *agent.instructions.variants]
    if isinstance(agent.response_format, str):
        relative.append(agent.response_format)
    project = Project.discover(loaded.base_dir)
    folders = (loaded.base_dir, user_config_dir())
    return (
        loaded.file,
        Path.cwd() / ".env",
        loaded.base_dir / ".env",
        user_config_dir() / ".env",
        *(folder / name for folder in folders for name in ("config.yml", "config.yaml")),
        *(loaded.resolve(path) for path in relative if path),
        project.root / PROJECT_FILE,
        project.root / ".env",  # a target's ${VAR}s in holodeck.yaml
        *project.agent_paths(),
    )


def loaded_agent(path: Path, model: str | None = None) -> LoadedAgent:
    """``load_agent(path, model=model)`` (a model candidate, default the agent's own model),
    reused while its sources and the environment are unchanged; the own model by any of its
    names is one entry."""
    own = _loaded(path, None)
    if model is None or model in (own.candidates.own.name, OWN_MODEL_CANDIDATE):
        return own
    return _loaded(path, model)


def _loaded(path: Path, model: str | None) -> LoadedAgent:
    key = (path.expanduser().resolve(), model)
    with _lock:
        entry = _entries.get(key)
    if (
        entry is not None
        and entry.environment == _environment()
        and entry.stamp == _stamp(entry.sources)
    ):
        return entry.loaded
    environment, started = _environment(), time.time_ns()
    loaded = load_agent(path, model=model)
    sources = _sources(loaded)
    stamp = _stamp(sources)
    # a file changed since the load began (or within the clock's granularity of it) may
    # hold what this load did not see: load it again next time rather than keep this one
    if all(mtime < started - FRESH_NS for _, mtime, _ in stamp):
        with _lock:
            _entries[key] = _Entry(sources, stamp, environment, loaded)
    return loaded
