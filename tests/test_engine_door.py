"""The engine is the one door (docs/architecture.md; its imports are checked in
``tests/test_layering.py``): loading a suite reads the disk once, in
``engine/suite.py::load_suite``, so that building the ``Suite`` is pure."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from holodeck_core.config.loader import load_agent
from holodeck_core.engine.suite import Suite, SuiteOptions, load_suite, read_inputs
from holodeck_core.errors import ConfigError

AGENT = """\
name: pure
model: {provider: openai, name: m, endpoint: "http://127.0.0.1:9/v1", api_key: sk-test-1234}
instructions: {file: prompt.md}
tools: [{type: function, name: f, description: d, file: tools.py, function: f}]
evaluations:
  model: {provider: openai, name: judge, endpoint: "http://127.0.0.1:9/v1", api_key: sk-test-1234}
  metrics: [{type: geval, name: Correct, criteria: 'Is it right?'}]
  judge_control: control.yaml
test_cases:
  - {id: one, input: "capital?", files: [{path: note.txt, type: text}]}
  - {id: two, input: "river?"}
"""
CONTROL = 'rows:\n  - {id: good, input: "q", output: "a", expected: "a"}\n'
WATCHED = ("open", "os.listdir", "os.scandir", "os.mkdir", "os.rename", "os.remove")
"""Audit events (docs.python.org's audit events table) that read or write the disk."""


class DiskEvents:
    """What a block opened, listed, made or removed on disk. The audit hook stays for the
    process (it cannot be removed): one, recording only inside :meth:`watch`."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] | None = None
        sys.addaudithook(self._audit)

    def _audit(self, event: str, args: tuple[object, ...]) -> None:
        if self.seen is not None and event in WATCHED:
            self.seen.append((event, str(args[0]) if args else ""))

    @contextmanager
    def watch(self) -> Iterator[list[tuple[str, str]]]:
        self.seen = seen = []
        try:
            yield seen
        finally:
            self.seen = None


DISK = DiskEvents()


def write_project(folder: Path) -> Path:
    (folder / "holodeck.yaml").write_text("agents: [agent.yaml]\n")
    (folder / "prompt.md").write_text("---\nversion: v1\n---\nAnswer briefly.\n")
    (folder / "tools.py").write_text("def f() -> str:\n    return 'x'\n")
    (folder / "note.txt").write_text("a note\n")
    (folder / "control.yaml").write_text(CONTROL)
    agent = folder / "agent.yaml"
    agent.write_text(AGENT)
    return agent


def test_loading_reads_the_disk_and_building_the_suite_does_not(tmp_path: Path) -> None:
    loaded = load_agent(str(write_project(tmp_path)))
    loaded_suite = load_suite(loaded)
    assert loaded_suite.prompt_key == "v1" and len(loaded_suite.control_rows) == 1
    options = SuiteOptions(parallel=3, trials=2)
    with DISK.watch() as reading:
        inputs = read_inputs(loaded, options)
    opened = {Path(name).name for event, name in reading if event == "open"}
    # the tool's code and the attachment are fingerprinted, the control rows read
    assert {"tools.py", "note.txt", "control.yaml"} <= opened, reading
    with DISK.watch() as building:
        suite = Suite(loaded, inputs, options)
    assert building == []
    assert suite.case_fingerprints == loaded_suite.case_fingerprints
    assert (suite.parallel, suite.trials, suite.prompt.text) == (3, 2, loaded_suite.prompt.text)
    # what changes on disk reaches the next load, never a suite already built
    (tmp_path / "note.txt").write_text("another note\n")
    reloaded = load_suite(loaded)
    assert reloaded.case_fingerprints["one"] != suite.case_fingerprints["one"]
    assert reloaded.case_fingerprints["two"] == suite.case_fingerprints["two"]


def test_an_empty_selection_is_named_before_the_judge_control_file(tmp_path: Path) -> None:
    loaded = load_agent(str(write_project(tmp_path)))
    (tmp_path / "control.yaml").unlink()  # a later problem: the empty selection is named first
    with pytest.raises(ConfigError, match="no test cases to run match --filter 'nothing'"):
        load_suite(loaded, SuiteOptions(filter="nothing"))
    with pytest.raises(ConfigError, match="judge_control"):
        load_suite(loaded)
