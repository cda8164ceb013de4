"""HoloDeck's ``agent.yaml`` (docs/holodeck-fidelity.md), validated strictly.

Top-level blocks we do not use (``observability``, ``deployment``) parse and are listed by
:meth:`Agent.ignored_blocks`; of the backend blocks (``openai``, ``claude``) we apply what
shapes the agent (:mod:`holodeck_core.models.backends`). ``embedding_provider`` selects the
embeddings model of retrieval tools."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, PrivateAttr, field_validator, model_validator

from holodeck_core import defaults
from holodeck_core.models.backends import ClaudeBlock, OpenAIBlock
from holodeck_core.models.base import StrictModel
from holodeck_core.models.cost import Budget
from holodeck_core.models.evaluation import EvaluationConfig, Gate
from holodeck_core.models.llm import LLMProvider, ProviderEnum
from holodeck_core.models.test_case import TestCaseModel
from holodeck_core.models.tools import Tool
from holodeck_core.models.unused_blocks import ObservabilityConfig
from holodeck_core.stats.trials import Reducer

IGNORED_BLOCKS = ("observability", "deployment")


class Instructions(StrictModel):
    file: str | None = Field(None, description="Prompt file (Markdown with YAML frontmatter).")
    inline: str | None = Field(None, min_length=1)
    variants: list[str] = Field(
        default_factory=list,
        description="More prompt files, each its own prompt version (A/B testing).",
    )

    @model_validator(mode="after")
    def _file_or_inline(self) -> Instructions:
        if (self.file is None) == (self.inline is None):
            raise ValueError("set exactly one of 'file' or 'inline'")
        if self.variants and self.file is None:
            raise ValueError("'variants' needs 'file' (variants are prompt files too)")
        return self


def _switch(value: Any) -> Any:
    """YAML 1.1 reads a bare ``on`` / ``off`` as true / false: the mode the user wrote."""
    return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


BatchMode = Annotated[Literal["off", "auto", "on"], BeforeValidator(_switch)]
"""``execution.batch`` and holodeck.yaml's ``agents[].batch`` (docs/cost.md)."""


class ExecutionConfig(StrictModel):
    file_timeout: int | None = Field(None, gt=0, description="Seconds per file conversion.")
    llm_timeout: int | None = Field(None, gt=0, description="Seconds per model call.")
    download_timeout: int | None = Field(None, gt=0)
    cache_enabled: bool | None = None
    cache_dir: str | None = None
    verbose: bool | None = None
    quiet: bool | None = None
    parallel_test_cases: int | None = Field(None, ge=1, le=defaults.MAX_PARALLEL_TEST_CASES)
    max_tool_turns: int | None = Field(None, ge=1, le=defaults.MAX_TOOL_TURNS_LIMIT)
    tool_timeout: int | None = Field(None, gt=0, description="Seconds per function tool call.")
    max_file_mb: float | None = Field(None, gt=0)
    trials: int | None = Field(
        None,
        ge=defaults.TRIALS_MIN,
        le=defaults.TRIALS_MAX,
        description="Independent runs of every case (docs/cli.md).",
    )
    reducer: Reducer | None = Field(
        None, description="A case's status from its trials: all (default), majority, any."
    )
    budget: Budget | None = Field(
        None, description="A hard stop on the run's spend: {usd, tokens} (docs/cost.md)."
    )
    anthropic_path: Literal["claude_agent_sdk", "direct"] | None = Field(
        None,
        description=(
            "anthropic/ollama agents: HoloDeck's Claude Agent SDK (default) or `direct`, our "
            "faster Messages loop, which is not HoloDeck's agent (docs/holodeck-fidelity.md)."
        ),
    )
    batch: BatchMode | None = Field(
        None,
        description="Agent turns and judges through the providers' batch APIs: off (default "
        "for holodeck test), auto (where the path can), on (and an agent that cannot is an "
        "error) (docs/cost.md).",
    )
    batch_max_wait: float | None = Field(
        None,
        gt=0,
        description=f"Seconds a run waits on its batches in all (default "
        f"{defaults.BATCH_MAX_WAIT_S:g}); then what is pending is sent as ordinary calls.",
    )


class Agent(StrictModel):
    name: str = Field(min_length=1)
    description: str | None = None
    author: str | None = None
    model: LLMProvider
    instructions: Instructions
    response_format: dict[str, Any] | str | None = Field(
        None, description="JSON Schema for structured output, inline or a file path."
    )
    tools: list[Tool] | None = None
    evaluations: EvaluationConfig | None = None
    test_cases: list[TestCaseModel] | None = None
    test_cases_file: str | None = None
    execution: ExecutionConfig | None = None
    observability: ObservabilityConfig | None = None
    deployment: dict[str, Any] | None = None
    embedding_provider: LLMProvider | None = None
    openai: OpenAIBlock | None = Field(
        None, description="HoloDeck's openai-agents settings (openai, azure_openai agents)."
    )
    claude: ClaudeBlock | None = Field(
        None, description="HoloDeck's Claude Agent SDK settings (anthropic, ollama agents)."
    )

    _warnings: list[str] = PrivateAttr(default_factory=list)

    @field_validator("tools")
    @classmethod
    def _unique_tools(cls, tools: list[Any] | None) -> list[Any] | None:
        counts = Counter(tool.name for tool in tools or [])
        duplicates = sorted(n for n, count in counts.items() if count > 1)
        if duplicates:
            raise ValueError(f"tool names must be unique; repeated: {', '.join(duplicates)}")
        return tools

    @field_validator("test_cases")
    @classmethod
    def _unique_ids(cls, cases: list[TestCaseModel] | None) -> list[TestCaseModel] | None:
        counts = Counter(case.id for case in cases or [] if case.id)
        repeated = sorted(i for i, n in counts.items() if n > 1)
        if repeated:
            raise ValueError(f"test case ids must be unique; repeated: {', '.join(repeated)}")
        return cases

    @model_validator(mode="after")
    def _assign_case_ids(self) -> Agent:
        """Give every case its stable id (docs/architecture.md); derived ids that collide get
        ``-2``, ``-3`` and a warning."""
        cases = self.test_cases or []
        taken = {case.id for case in cases if case.id}
        for case in cases:
            if case.id:
                continue
            base = case.derived_id()
            candidate, n = base, 1
            while candidate in taken:
                n += 1
                candidate = f"{base}-{n}"
            if candidate != base:
                self._warnings.append(
                    f"test case {case.name or base!r}: derived id {base!r} is taken; "
                    f"using {candidate!r} (set an explicit 'id' to keep it stable)"
                )
            case.id = candidate
            taken.add(candidate)
        return self

    @model_validator(mode="after")
    def _one_turn_limit(self) -> Agent:
        ours = self.execution.max_tool_turns if self.execution else None
        key = self._turns_key
        if ours is not None and key is not None and ours != self.max_turns:
            raise ValueError(
                f"execution.max_tool_turns ({ours}) and {key} ({self.max_turns}) both limit "
                f"the agent's model calls per turn; keep {key} (HoloDeck reads it)"
            )
        return self

    @property
    def on_openai_agents(self) -> bool:
        """HoloDeck 0.7.1 runs this agent on its openai-agents backend (else Claude's)."""
        return self.model.provider in (ProviderEnum.OPENAI, ProviderEnum.AZURE_OPENAI)

    @property
    def backend_block(self) -> OpenAIBlock | ClaudeBlock | None:
        """The block of the backend HoloDeck runs this agent on."""
        return self.openai if self.on_openai_agents else self.claude

    @property
    def _turns_key(self) -> str | None:
        block = self.backend_block
        if block is None or "max_turns" not in block.model_fields_set:
            return None
        return f"{'openai' if isinstance(block, OpenAIBlock) else 'claude'}.max_turns"

    @property
    def max_turns(self) -> int:
        """Model calls a case turn may make: HoloDeck's ``openai.max_turns`` (or
        ``claude.max_turns``), else ``execution.max_tool_turns``, else HoloDeck's 20."""
        block = self.backend_block
        if self._turns_key is not None and block is not None and block.max_turns is not None:
            return block.max_turns
        ours = self.execution.max_tool_turns if self.execution else None
        return ours or defaults.MAX_TOOL_TURNS

    @property
    def max_turns_source(self) -> str:
        """Where :attr:`max_turns` comes from (``holodeck validate``)."""
        if self._turns_key is not None:
            return self._turns_key
        has_ours = self.execution is not None and self.execution.max_tool_turns is not None
        return "execution.max_tool_turns" if has_ours else "default, HoloDeck's"

    @property
    def openai_settings(self) -> OpenAIBlock | None:
        """The ``openai:`` block when HoloDeck applies it (an openai/azure_openai agent)."""
        block = self.backend_block
        return block if isinstance(block, OpenAIBlock) else None

    @property
    def offered_tools(self) -> list[Tool]:
        """The tools the agent is given: HoloDeck drops the ``openai:`` block's disallowed
        ones (by their config name)."""
        settings = self.openai_settings
        blocked = settings.disallowed if settings else set()
        return [tool for tool in self.tools or [] if tool.name not in blocked]

    @property
    def warnings(self) -> list[str]:
        return list(self._warnings)

    def ignored_blocks(self) -> list[str]:
        """HoloDeck blocks present in the config that this engine does not use."""
        return [block for block in IGNORED_BLOCKS if getattr(self, block) is not None]

    @property
    def cases(self) -> list[TestCaseModel]:
        return list(self.test_cases or [])

    @property
    def parallel_test_cases(self) -> int:
        configured = self.execution.parallel_test_cases if self.execution else None
        return configured or defaults.PARALLEL_TEST_CASES

    @property
    def gate(self) -> Gate | None:
        """``evaluations.gate`` (None: no gate, docs/cli.md)."""
        return self.evaluations.gate if self.evaluations else None

    @property
    def max_error_share(self) -> float | None:
        """``evaluations.max_error_share`` (None: the default, docs/cli.md)."""
        return self.evaluations.max_error_share if self.evaluations else None
