"""HoloDeck 0.7.1's per-backend blocks of ``agent.yaml`` (docs/holodeck-fidelity.md: the agent side
is HoloDeck's): ``openai:`` for ``openai``/``azure_openai`` agents (HoloDeck's openai-agents
backend, ``holodeck.models.openai_config``), ``claude:`` for ``anthropic``/``ollama`` ones (its
Claude Agent SDK backend). What reaches the agent is read; serve-only keys are validated as HoloDeck
validates them and have no effect on an evaluation (docs/holodeck-fidelity.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, model_validator

from holodeck_core import defaults
from holodeck_core.models.base import StrictModel

REASONING_EFFORT = {"low": "low", "medium": "medium", "high": "high", "max": "xhigh"}
"""HoloDeck's ``openai.effort`` → the Responses ``reasoning.effort``."""


class OpenAIPermissions(StrictModel):
    allowed_tools: list[str] | None = None
    disallowed_tools: list[str] | None = None


class OpenAIBlock(StrictModel):
    """``openai:``, as HoloDeck's ``OpenAIConfig`` validates it (unknown keys refused)."""

    max_concurrent_sessions: int | None = Field(None, ge=1, le=500, description="Serve only.")
    session_memory_estimate_mib: int = Field(100, ge=50, le=2000, description="Serve only.")
    max_turns: int = Field(
        defaults.MAX_TOOL_TURNS, ge=1, description="Model calls a turn may make (tool rounds)."
    )
    i_understand_this_is_unsafe: bool = Field(False, description="Hosted tools only.")
    disable_default_hooks: StrictBool = False
    disable_subprocess_env_scrub: StrictBool = False
    permissions: OpenAIPermissions | None = None
    effort: Literal["low", "medium", "high", "max"] | None = Field(
        None, description="Sent as the Responses `reasoning` ({effort, summary: auto})."
    )
    max_budget_usd: float | None = Field(None, gt=0, description="A case's spend cap.")
    fallback_model: str | None = None
    disallowed_tools: list[str] | None = Field(
        None, description="Tools removed from the agent (with permissions.disallowed_tools)."
    )

    @model_validator(mode="after")
    def _allowed_and_disallowed(self) -> OpenAIBlock:
        both = set(self.permissions.allowed_tools or []) if self.permissions else set()
        both &= self.disallowed
        if both:
            raise ValueError(
                "tools listed in both allowed_tools and disallowed_tools: "
                f"{', '.join(sorted(both))}; remove them from one list"
            )
        return self

    @property
    def disallowed(self) -> set[str]:
        """HoloDeck's union of ``disallowed_tools`` and ``permissions.disallowed_tools``."""
        listed = set(self.disallowed_tools or [])
        return listed | set(self.permissions.disallowed_tools or [] if self.permissions else [])

    @property
    def reasoning(self) -> dict[str, str] | None:
        """The Responses ``reasoning`` HoloDeck's backend sends (``summary: auto`` with it)."""
        if self.effort is None:
            return None
        return {"effort": REASONING_EFFORT[self.effort], "summary": "auto"}


class ClaudeThinking(StrictModel):
    enabled: bool = False
    budget_tokens: int = Field(10_000, ge=1_000, le=100_000)


class ClaudeBash(StrictModel):
    enabled: bool = False
    excluded_commands: list[str] = Field(default_factory=list)
    allow_unsafe: bool = False


class ClaudeFileSystem(StrictModel):
    read: bool = False
    write: bool = False
    edit: bool = False


class ClaudeSubagent(StrictModel):
    description: str = Field(min_length=1)
    prompt: str | None = None
    prompt_file: str | None = None
    tools: list[str] | None = None
    model: Literal["sonnet", "opus", "haiku", "inherit"] | None = None

    @model_validator(mode="after")
    def _one_prompt(self) -> ClaudeSubagent:
        if not self.description.strip():
            raise ValueError("subagent requires description")
        if (self.prompt is None) == (self.prompt_file is None):
            raise ValueError("give a subagent exactly one of prompt and prompt_file")
        return self


class ClaudeBlock(StrictModel):
    """``claude:``, as HoloDeck's ``ClaudeConfig`` validates it (unknown keys refused, at every
    level). Only ``max_turns`` shapes what we run: the rest configures Claude Code, which we
    do not run (docs/holodeck-fidelity.md)."""

    working_directory: str | None = None
    permission_mode: Literal["manual", "acceptEdits", "acceptAll"] = "manual"
    max_turns: int | None = Field(None, ge=1)
    max_concurrent_sessions: int | None = Field(None, ge=1, le=500, description="Serve only.")
    session_memory_estimate_mib: int = Field(500, ge=50, le=2000, description="Serve only.")
    extended_thinking: ClaudeThinking | None = None
    web_search: bool = False
    bash: ClaudeBash | None = None
    file_system: ClaudeFileSystem | None = None
    agents: dict[str, ClaudeSubagent] | None = None
    allowed_tools: list[str] | None = None
    effort: Literal["low", "medium", "high", "max"] | None = None
    max_budget_usd: float | None = Field(None, gt=0)
    fallback_model: str | None = None
    disallowed_tools: list[str] | None = None
    setting_sources: list[Literal["user", "project", "local", "all"]] | None = None
    i_understand_this_is_unsafe: bool = False
    disable_default_hooks: StrictBool = False
    disable_subprocess_env_scrub: StrictBool = False

    @model_validator(mode="before")
    @classmethod
    def _no_subagents_block(cls, data: object) -> object:
        if isinstance(data, dict) and "subagents" in data:
            raise ValueError(
                "`claude.subagents` is no longer supported (HoloDeck 0.7.1); remove it, "
                "subagents are `claude.agents`"
            )
        return data

    @model_validator(mode="after")
    def _all_alone(self) -> ClaudeBlock:
        sources = self.setting_sources or []
        if "all" in sources and len(sources) > 1:
            raise ValueError(
                "setting_sources: 'all' cannot be combined with other values; use ['all'] "
                "or a subset of ['user', 'project', 'local']"
            )
        return self
