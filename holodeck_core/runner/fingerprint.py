"""Fingerprints that decide what a journal or cache entry may be reused for (DESIGN §6.9).

suite = prompt body + model config (no endpoint, no key) + test-set hash (+ the target);
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


def config_hash(loaded: LoadedAgent) -> str:
    """The whole agent config (and its target), redacted: equal configs give equal hashes on
    every machine."""
    config = redact(loaded.agent.model_dump(mode="json"))
    return digest(config if loaded.target is None else [config, loaded.target.snapshot()])


def _file_hash(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


def suite_fingerprint(loaded: LoadedAgent, body_hash: str, cases: list[TestCaseModel]) -> str:
    identity: dict[str, Any] = {
        "prompt": body_hash,
        "model": loaded.agent.model.fingerprint_fields(),
        "dataset": dataset_hash(cases),
    }
    if loaded.target is not None:  # another target answers differently: its own journal
        identity["target"] = loaded.target.identity()
    return digest(identity)[:24]


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
