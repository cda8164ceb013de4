"""Fingerprints that decide what a journal or cache entry may be reused for (docs/architecture.md).

suite = instructions sent + model config (no endpoint, no key) + the agent's loop settings
        (``openai:``/``claude:`` blocks) + test-set hash (+ the target, + the name of a model
        candidate other than the agent's own model);
case  = suite + the case's input or turns + file content hashes + tool code and mock results
        + response_format."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from holodeck_core.config.loader import LoadedAgent
from holodeck_core.models import FunctionTool, TestCaseModel
from holodeck_core.models.base import digest
from holodeck_core.redaction import redact


def dataset_hash(cases: list[TestCaseModel]) -> str:
    return digest([case.model_dump(mode="json") for case in cases])


def config_hash(loaded: LoadedAgent, instructions: str) -> str:
    """The whole agent config, the instructions it sends (a file's frontmatter included) and
    its target, redacted: equal configs give equal hashes on every machine."""
    config = {
        "agent": redact(loaded.agent.model_dump(mode="json")),
        "instructions": _text_hash(instructions),
    }
    return digest(config if loaded.target is None else [config, loaded.target.snapshot()])


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _file_hash(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


def suite_fingerprint(loaded: LoadedAgent, instructions: str, dataset: str) -> str:
    """The suite's fingerprint; ``dataset`` is its cases' :func:`dataset_hash`."""
    identity: dict[str, Any] = {
        "instructions": _text_hash(instructions),
        "model": loaded.agent.model.fingerprint_fields(),
        "loop": _loop(loaded),
        "dataset": dataset,
    }
    if loaded.target is not None:  # another target answers differently: its own journal
        identity["target"] = loaded.target.identity()
    if loaded.candidate.name != loaded.candidates.own.name:  # one journal per candidate; the
        identity["candidate"] = loaded.candidate.name  # agent's own model keeps the one it had
    return digest(identity)[:24]


def model_fingerprint(loaded: LoadedAgent) -> str:
    """The resolved model's identity, whichever candidate named it: the model config without
    endpoint or key, and the loop settings of HoloDeck's backend block."""
    return digest({"model": loaded.agent.model.fingerprint_fields(), "loop": _loop(loaded)})[:24]


def _loop(loaded: LoadedAgent) -> dict[str, Any]:
    """What bounds and shapes the agent's loop: the turn limit and HoloDeck's backend block
    (``effort``, disallowed tools)."""
    block = loaded.agent.backend_block
    dumped = None if block is None else block.model_dump(mode="json", exclude_unset=True)
    return {"max_turns": loaded.agent.max_turns, "block": dumped}


def tools_fingerprint(loaded: LoadedAgent) -> str:
    tools = []
    for tool in loaded.agent.tools or []:
        entry: dict[str, Any] = {"config": tool.model_dump(mode="json")}
        if isinstance(tool, FunctionTool) and tool.mock is None:
            entry["code"] = _file_hash(loaded.resolve(tool.file))
        tools.append(entry)
    return digest({"tools": tools, "response_format": loaded.response_schema})


def case_fingerprint(loaded: LoadedAgent, suite: str, tools: str, case: TestCaseModel) -> str:
    files = [*(case.files or []), *(f for t in case.turns or [] for f in t.files or [])]
    return digest(
        {
            "suite": suite,
            "tools": tools,
            "id": case.id,
            "case": case.content_key,
            "files": [
                (f.model_dump(mode="json"), _file_hash(loaded.resolve(f.path)) if f.path else None)
                for f in files
            ],
        }
    )
