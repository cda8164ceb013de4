"""Running a coroutine to its end from synchronous code (the CLI's commands, Dagster's steps)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_to_end(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, the value handed back outside the main task. When ``asyncio.run``
    puts the SIGINT handler back, the ``signal`` module turns the replaced handler (which holds
    the main task) into an enum and formats it into an error it discards; a task's repr holds
    its result's, so a whole EvalRun or matrix was formatted for nothing (~0.1 s at 2,000 cases,
    bench/run_phases.py). The main task returns nothing here, so its repr stays short."""
    box: list[T] = []

    async def keep() -> None:
        box.append(await main)

    asyncio.run(keep())
    return box[0]
