"""engine/loop.py: a command's coroutine runs to its end and its value is never formatted on
the way out (asyncio.run's SIGINT handler restore formats the main task, result included)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from holodeck_core.engine.loop import run_to_end

REPO = Path(__file__).resolve().parents[1]


class Costly:
    """A value that counts how often it is formatted (a whole EvalRun, in a real run)."""

    def __init__(self) -> None:
        self.formatted = 0

    def __repr__(self) -> str:
        self.formatted += 1
        return "Costly()"


async def produce(value: Costly) -> Costly:
    await asyncio.sleep(0)
    return value


def test_asyncio_run_formats_the_value_it_returns() -> None:
    """The reason for run_to_end: if Python stops doing this, the helper can go."""
    value = Costly()
    assert asyncio.run(produce(value)) is value
    assert value.formatted >= 1


def test_run_to_end_hands_back_the_value_without_formatting_it() -> None:
    value = Costly()
    assert run_to_end(produce(value)) is value
    assert value.formatted == 0


def test_run_to_end_raises_what_the_coroutine_raised() -> None:
    async def fail() -> None:
        raise ValueError("the run's own error")

    with pytest.raises(ValueError, match="the run's own error"):
        run_to_end(fail())


ALLOWED = {  # coroutines that return nothing worth formatting
    "holodeck_core/agents/targets/host_main.py",
    "holodeck_core/cli/model_server.py",
    "holodeck_core/engine/loop.py",
}


def test_the_commands_and_steps_run_their_coroutines_through_run_to_end() -> None:
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for package in ("holodeck_core", "holodeck_pipelines")
        for path in sorted((REPO / package).rglob("*.py"))
        if str(path.relative_to(REPO)) not in ALLOWED
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\basyncio\.run\(", line)
    ]
    assert found == []
