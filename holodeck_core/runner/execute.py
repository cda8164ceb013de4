"""Run the agent on one case: attachments → turns → the tool loop → a :class:`CaseRun`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from holodeck_core.agents.loop import ConversationRunner, TurnInput, TurnOutcome
from holodeck_core.calls.errors import ModelCallError
from holodeck_core.calls.ledger import BudgetStop
from holodeck_core.files import FileLimits, aprocess_files, load_image
from holodeck_core.models import FileInput, ProcessedFileInput, TestCaseModel
from holodeck_core.providers.messages import Image
from holodeck_core.runner.case_run import CaseRun, TurnRun


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class CaseExecutor:
    agent: ConversationRunner
    base_dir: Path
    cache_dir: Path | None
    limits: FileLimits

    async def run(self, case: TestCaseModel, fingerprint: str) -> CaseRun:
        started = time.perf_counter()
        specs = (
            [(case.input or "", case.files or [])]
            if case.turns is None
            else [(turn.input, turn.files or []) for turn in case.turns]
        )
        turns: list[TurnRun] = []
        inputs: list[TurnInput] = []
        for text, files in specs:
            processed = await self._files(files)
            turns.append(TurnRun(input=text, processed_files=processed))
            failed = [p for p in processed if p.error]
            if failed:
                turns[-1].error = "; ".join(
                    f"file {p.original.path or p.original.url}: {p.error}" for p in failed
                )
                turns[-1].error_kind = "file"
                break
            inputs.append(self._turn_input(text, processed))
        if len(inputs) == len(specs):
            for turn, outcome in zip(turns, await self.agent.run(inputs), strict=True):
                _record(turn, outcome)
        return CaseRun(
            case_id=case.id or "",
            fingerprint=fingerprint,
            turns=turns,
            execution_time_ms=int((time.perf_counter() - started) * 1000),
            timestamp=now_iso(),
        )

    async def _files(self, files: list[FileInput]) -> list[ProcessedFileInput]:
        if not files:
            return []
        return await aprocess_files(
            files, base_dir=self.base_dir, cache_dir=self.cache_dir, **self.limits.model_dump()
        )

    def _turn_input(self, text: str, processed: list[ProcessedFileInput]) -> TurnInput:
        """The message as HoloDeck 0.7.1's executor composes it (``_compose_agent_input``):
        ``File: <path or url>`` and each file's Markdown, those with some, then the input;
        an image (ours only: HoloDeck sends none) goes as an image part, named after it."""
        images: list[Image] = []
        files: list[str] = []
        markers: list[str] = []
        for number, item in enumerate(processed, start=1):
            if item.original.type == "image":
                image = load_image(item, base_dir=self.base_dir)
                images.append(Image(image.mime_type, image.base64()))
                name = item.original.description or item.original.path or item.original.url
                markers.append(f"[Attached image {number}: {name}]")
            elif item.markdown_content:
                name = item.original.path or item.original.url or "file"
                files.append(f"File: {name}\n{item.markdown_content}")
        parts = [*files, text, *markers]
        return TurnInput("\n\n".join(parts), images, message=text, files=processed)


def _record(turn: TurnRun, outcome: TurnOutcome) -> None:
    turn.response = outcome.response
    turn.tool_invocations = outcome.invocations
    turn.usage = outcome.usage
    turn.model_ms = outcome.model_ms
    turn.system_fingerprint = outcome.system_fingerprint
    turn.notes = outcome.notes
    if outcome.error is None:
        return
    turn.error = str(outcome.error)
    if outcome.skipped:
        turn.error_kind = "skipped"
    elif isinstance(outcome.error, BudgetStop):
        turn.error_kind = "budget"
    elif isinstance(outcome.error, ModelCallError):
        turn.error_kind = "model_transient" if outcome.error.transient else "model"
    else:
        turn.error_kind = "tool_loop"
