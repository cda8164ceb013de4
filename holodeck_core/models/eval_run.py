"""An EvalRun: one finished run's report plus its provenance (docs/history.md)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, model_validator

from holodeck_core.defaults import MAX_CANDIDATE_NAME_LENGTH
from holodeck_core.models.agent import Agent
from holodeck_core.models.base import StrictModel
from holodeck_core.models.report import TestReport


class PromptVersion(StrictModel):
    version: str = Field(min_length=1)
    author: str | None = None
    description: str | None = None
    tags: list[str] = Field(default_factory=list)
    source: Literal["file", "inline"]
    file_path: str | None = None
    body_hash: str = Field(pattern=r"^[a-f0-9]{64}$")
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _source_path(self) -> PromptVersion:
        if self.source == "inline" and self.file_path is not None:
            raise ValueError("an inline prompt has no file_path")
        if self.source == "file" and not self.file_path:
            raise ValueError("a file prompt needs file_path")
        return self


class Trigger(StrEnum):
    NIGHTLY = "nightly"
    MANUAL = "manual"
    BACKFILL = "backfill"
    SENSOR = "sensor"
    CLI = "cli"
    IMPORT = "import"
    RESCORE = "rescore"


class EvalRunMetadata(StrictModel):
    agent_config: Agent = Field(description="Redacted snapshot of the validated agent.")
    prompt_version: PromptVersion
    holodeck_version: str = Field(min_length=1)
    cli_args: list[str] = Field(default_factory=list)
    git_commit: str | None = Field(None, pattern=r"^[a-f0-9]{7,40}$")
    # Ours (absent from HoloDeck 0.7.1 files, hence optional):
    run_id: str | None = None
    config_hash: str | None = Field(None, description="sha256 of the whole agent config.")
    dataset_hash: str | None = Field(None, description="sha256 of the test-case set.")
    trigger: Trigger | None = None
    started_at: str | None = None
    dagster_run_id: str | None = None
    partition_key: str | None = None
    model_candidate: str | None = Field(
        None,
        pattern=rf"^[a-z0-9_]{{1,{MAX_CANDIDATE_NAME_LENGTH}}}$",
        description="The model candidate run (holodeck.yaml models:, docs/agent-yaml.md): a "
        "partition key, as holodeck.yaml's names are.",
    )
    model_fingerprint: str | None = Field(
        None,
        description="The resolved model's identity: its config without endpoint or key, and "
        "the backend block (holodeck_core/runner/fingerprint.py).",
    )
    provenance: dict[str, Any] = Field(
        default_factory=dict,
        description="Versions that make scores comparable: price table, judge prompts, "
        "metric library signatures, provider system fingerprints.",
    )


class EvalRun(StrictModel):
    report: TestReport
    metadata: EvalRunMetadata

    @model_validator(mode="after")
    def _same_agent(self) -> EvalRun:
        if self.report.agent_name != self.metadata.agent_config.name:
            raise ValueError(
                f"report.agent_name ({self.report.agent_name!r}) must equal "
                f"metadata.agent_config.name ({self.metadata.agent_config.name!r})"
            )
        return self

    def to_json(self) -> str:
        """The canonical file form; ``EvalRun.model_validate_json`` reads it back exactly."""
        return self.model_dump_json(indent=2)
