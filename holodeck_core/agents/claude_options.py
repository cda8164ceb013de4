"""``ClaudeAgentOptions`` as HoloDeck 0.7.1's Claude backend builds them for ``holodeck test``
(its ``lib/backends/claude_backend.py``), for the runner of
:mod:`holodeck_core.agents.claude_sdk`; where we differ, docs/holodeck-fidelity.md says why."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions
from claude_agent_sdk.types import McpSdkServerConfig

from holodeck_core.defaults import CLAUDE_TOOL_DESCRIPTION_CHARS
from holodeck_core.errors import ConfigError
from holodeck_core.models import LLMProvider
from holodeck_core.models.backends import ClaudeBlock
from holodeck_core.models.llm import AuthProvider
from holodeck_core.providers.factory import api_key_for
from holodeck_core.providers.messages import ToolSpec
from holodeck_core.providers.table import provider_spec

TOOL_SERVER = "holodeck_tools"
"""The in-process MCP server the agent's tools are offered on (``mcp__holodeck_tools__<name>``)."""
RISKY_BUILTIN_TOOLS = frozenset({"Bash", "Write", "Edit", "WebFetch"})
"""Claude Code's built-ins HoloDeck disallows unless the ``claude:`` block declares them."""
OFFLINE_ENV = {
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_UPDATES": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_GROWTHBOOK": "1",
    "DISABLE_INSTALLATION_CHECKS": "1",
    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
}
"""What keeps the bundled CLI from updating itself, phoning home or fetching anything: its model
requests go to the agent's endpoint only (docs/holodeck-fidelity.md)."""
_KEY_VARIABLE = {
    AuthProvider.CUSTOM: "ANTHROPIC_AUTH_TOKEN",
    AuthProvider.OAUTH_TOKEN: "CLAUDE_CODE_OAUTH_TOKEN",
}


def tool_name(name: str) -> str:
    """The name the model calls one of the agent's tools by."""
    return f"mcp__{TOOL_SERVER}__{name}"


def tool_description(spec: ToolSpec) -> str:
    """The description the model reads: HoloDeck's adapters cut the agent's own tools' to
    :data:`CLAUDE_TOOL_DESCRIPTION_CHARS` (``...`` last); an MCP server's stays whole."""
    text, limit = spec.description, CLAUDE_TOOL_DESCRIPTION_CHARS
    if spec.from_server or len(text) <= limit:
        return text
    return text[: limit - 3] + "..."


def cli_env(model: LLMProvider, home: Path, *, fallback_key: str | None = None) -> dict[str, str]:
    """The CLI's environment over ours: HoloDeck's (its credentials, ``CLAUDECODE`` empty, the
    scrub flags), the endpoint, and a ``HOME`` of its own, so nothing it writes lands in the
    agent's folder or the user's (docs/holodeck-fidelity.md)."""
    auth = model.auth_provider or AuthProvider.API_KEY
    if auth not in (AuthProvider.API_KEY, *_KEY_VARIABLE):
        raise ConfigError(
            f"model.auth_provider: {auth.value} is not supported by this engine; use "
            "api_key, custom or oauth_token"
        )
    variable = _KEY_VARIABLE.get(auth, "ANTHROPIC_API_KEY")
    key = os.environ.get(variable) if auth is AuthProvider.OAUTH_TOKEN else None
    env = {
        "CLAUDECODE": "",
        variable: key or api_key_for(model, fallback=fallback_key),
        "CLAUDE_CODE_SUBPROCESS_ENV_SCRUB": "1",
        "CLAUDE_CODE_MCP_ALLOWLIST_ENV": "1",
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "TMPDIR": str(home),
        "CLAUDE_CODE_TMPDIR": str(home),
        **OFFLINE_ENV,
    }
    endpoint = model.endpoint or provider_spec(model.provider).default_endpoint
    if endpoint:  # the CLI appends /v1/messages
        env["ANTHROPIC_BASE_URL"] = endpoint.rstrip("/").removesuffix("/v1")
    return env


def _disallowed(claude: ClaudeBlock | None) -> list[str]:
    declared: set[str] = set()
    if claude is not None:
        if claude.bash is not None and claude.bash.enabled:
            declared.add("Bash")
        files = claude.file_system
        if files is not None:
            declared |= {name for name, on in (("Write", files.write), ("Edit", files.edit)) if on}
        declared.update(claude.allowed_tools or [])
    explicit = set(claude.disallowed_tools or []) if claude else set()
    return sorted(explicit | (RISKY_BUILTIN_TOOLS - declared))


def _setting_sources(claude: ClaudeBlock | None) -> Any:
    """HoloDeck's default ``[]``: the CLI reads no settings, plugins, skills or hooks."""
    sources = list(claude.setting_sources or []) if claude else []
    return ["user", "project", "local"] if sources == ["all"] else sources


def _permission_mode(claude: ClaudeBlock | None) -> Any:
    if claude is None:
        return None
    if claude.permission_mode == "acceptAll":
        if not claude.i_understand_this_is_unsafe:
            raise ConfigError(
                "claude.permission_mode: acceptAll turns off Claude Code's permissions; add "
                "claude.i_understand_this_is_unsafe: true, or declare the tools the agent needs"
            )
        return "bypassPermissions"
    return "acceptEdits" if claude.permission_mode == "acceptEdits" else "default"


def claude_options(
    *,
    model: LLMProvider,
    system: str,
    claude: ClaudeBlock | None,
    max_turns: int,
    tools: list[str],
    tool_server: McpSdkServerConfig | None,
    response_schema: dict[str, Any] | None,
    home: Path,
    env: dict[str, str],
    resume: str | None,
    stderr: Any,
) -> ClaudeAgentOptions:
    """One turn's options: HoloDeck's, with ``cwd`` and ``HOME`` the run's own folder."""
    allowed = [tool_name(name) for name in tools]
    allowed += claude.allowed_tools or [] if claude else []
    if claude is not None and claude.web_search:
        allowed.append("WebSearch")
    extra: dict[str, Any] = {}
    if claude is not None:
        if claude.extended_thinking is not None and claude.extended_thinking.enabled:
            extra["max_thinking_tokens"] = claude.extended_thinking.budget_tokens
        if claude.effort is not None:
            extra["effort"] = claude.effort
        if claude.fallback_model is not None:
            extra["fallback_model"] = claude.fallback_model
        if claude.max_budget_usd is not None:
            extra["max_budget_usd"] = claude.max_budget_usd
    return ClaudeAgentOptions(
        model=model.name,
        system_prompt=system,
        permission_mode=_permission_mode(claude),
        max_turns=max_turns,
        mcp_servers={TOOL_SERVER: tool_server} if tool_server is not None else {},
        allowed_tools=allowed,
        disallowed_tools=_disallowed(claude),
        env=env,
        cwd=home,
        output_format=(
            {"type": "json_schema", "schema": response_schema} if response_schema else None
        ),
        setting_sources=_setting_sources(claude),
        resume=resume,
        stderr=stderr,
        **extra,
    )
