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
from holodeck_core.config.project import PROJECT_FILE, Project

FRESH_NS = 1_000_000_000
Stamp = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True)
class _Entry:
    sources: tuple[Path, ...]
    stamp: Stamp
    environment: int
    loaded: LoadedAgent


_entries: dict[Path, _Entry] = {}
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
    """Every file ``load_agent`` reads for this agent: the agent file and the ``.env`` beside
    it, the test-cases file, the prompt files, a response-schema file, and the project's
    ``holodeck.yaml`` (and its ``.env``) and other agent files (the slug check reads their
    names)."""
    agent = loaded.agent
    relative = [agent.test_cases_file, agent.instructions.file, *agent.instructions.variants]
    if isinstance(agent.response_format, str):
        relative.append(agent.response_format)
    project = Project.discover(loaded.base_dir)
    return (
        loaded.file,
        loaded.base_dir / ".env",
        *(loaded.resolve(path) for path in relative if path),
        project.root / PROJECT_FILE,
        project.root / ".env",  # a target's ${VAR}s in holodeck.yaml
        *project.agent_paths(),
    )


def loaded_agent(path: Path) -> LoadedAgent:
    """``load_agent(path)``, reused while its sources and the environment are unchanged."""
    key = path.expanduser().resolve()
    with _lock:
        entry = _entries.get(key)
    if (
        entry is not None
        and entry.environment == _environment()
        and entry.stamp == _stamp(entry.sources)
    ):
        return entry.loaded
    environment, started = _environment(), time.time_ns()
    loaded = load_agent(path)
    sources = _sources(loaded)
    stamp = _stamp(sources)
    # a file changed since the load began (or within the clock's granularity of it) may
    # hold what this load did not see: load it again next time rather than keep this one
    if all(mtime < started - FRESH_NS for _, mtime, _ in stamp):
        with _lock:
            _entries[key] = _Entry(sources, stamp, environment, loaded)
    return loaded
