"""The journal's group commit: many cases finishing at once share writes and fsyncs, yet each
is awaited until its line is on disk, a cancelled run keeps every finished case, and another
run of the same suite sees them all (docs/architecture.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from holodeck_core.runner import journal as journal_module
from holodeck_core.runner.case_run import CaseRun, TurnRun
from holodeck_core.runner.journal import Journal

SECRET = "sk-canary-journal-0000000000"


def case(i: int) -> CaseRun:
    return CaseRun(
        case_id=f"c{i}",
        fingerprint=f"{i:064x}",
        turns=[TurnRun(input="q", response=f"answer {i} with {SECRET}")],
        execution_time_ms=1,
        timestamp="2026-12-01T00:00:00Z",
    )


def counted_appends(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Lines per call of the journal's write boundary (each call is one write and fsync)."""
    lines: list[int] = []
    real = journal_module.append_line

    def counting(path: Path, data: bytes) -> None:
        real(path, data)
        lines.append(data.count(b"\n"))

    monkeypatch.setattr(journal_module, "append_line", counting)
    return lines


def test_cases_finishing_together_share_fsyncs_and_all_reach_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = counted_appends(monkeypatch)
    journal = Journal(tmp_path, "agent", "suite", frozenset({SECRET}))
    journal.load()

    async def write_all() -> list[bool]:
        async def one(i: int) -> bool:
            await journal.write(case(i))
            return (f"{i:064x}", 0) in Journal(tmp_path, "agent", "suite").load()  # on disk

        return await asyncio.gather(*(one(i) for i in range(60)))

    assert all(asyncio.run(write_all()))  # each write returned only once its line was on disk
    assert sum(lines) == 60 and len(lines) < 60  # grouped: fewer fsyncs than cases
    assert SECRET not in journal.path.read_text()  # redacted before it reached the disk
    other = Journal(tmp_path, "agent", "suite")
    assert sorted(other.load()) == sorted((f"{i:064x}", 0) for i in range(60))
    assert journal.finished(f"{7:064x}") is not None  # its own lines, known without rereading


def test_a_cancelled_run_keeps_every_case_that_finished(tmp_path: Path) -> None:
    journal = Journal(tmp_path, "agent", "suite")
    journal.load()

    async def cancelled_mid_commit() -> None:
        tasks = [asyncio.ensure_future(journal.write(case(i))) for i in range(20)]
        await asyncio.sleep(0)  # every write queued, the first commit under way
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(cancelled_mid_commit())
    assert len(Journal(tmp_path, "agent", "suite").load()) == 20


def test_a_case_another_run_journaled_is_seen_by_lookup(tmp_path: Path) -> None:
    mine, theirs = Journal(tmp_path, "agent", "suite"), Journal(tmp_path, "agent", "suite")
    mine.load()
    theirs.load()

    async def scenario() -> tuple[CaseRun | None, CaseRun | None]:
        await mine.write(case(1))
        before = await mine.lookup(f"{2:064x}")
        await theirs.write(case(2))  # the file changed behind this run's back
        return before, await mine.lookup(f"{2:064x}")

    before, after = asyncio.run(scenario())
    assert before is None and after is not None and after.case_id == "c2"


def test_errored_cases_are_not_journaled(tmp_path: Path) -> None:
    journal = Journal(tmp_path, "agent", "suite")
    journal.load()
    failed = case(1).model_copy(
        update={"turns": [TurnRun(input="q", error="HTTP 500", error_kind="model_transient")]}
    )
    asyncio.run(journal.write(failed))
    assert not journal.path.exists()
