"""``anthropic`` and ``ollama`` agents as HoloDeck 0.7.1 runs them: through the Claude Agent SDK,
which starts the Claude Code CLI its wheel bundles, one process per case turn
(docs/holodeck-fidelity.md). Our side stays ours: each turn is one call of the call scheduler
(its endpoint's limit, the call timeout, the budget charged with the usage of the SDK's result),
at most :data:`~holodeck_core.defaults.CLAUDE_CLI_PROCESSES` processes at once, the agent's tools
run by our :class:`~holodeck_core.tools.toolbox.ToolBox` behind the SDK's in-process MCP server,
and every case in a temporary ``HOME`` and working folder of its own, removed after it."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import claude_agent_sdk as sdk
from claude_agent_sdk.types import McpSdkServerConfig

from holodeck_core.agents.claude_options import claude_options, cli_env, tool_description
from holodeck_core.agents.loop import TurnInput, TurnOutcome
from holodeck_core.calls.errors import CallErrorKind, ModelCallError
from holodeck_core.calls.scheduler import CallScheduler, endpoint_key
from holodeck_core.defaults import CLAUDE_CLI_PROCESSES
from holodeck_core.models import LLMProvider, TokenUsage, ToolInvocation
from holodeck_core.models.backends import ClaudeBlock
from holodeck_core.providers.base import valid_reply
from holodeck_core.providers.charges import chat_charge
from holodeck_core.providers.messages import Message, ModelReply, ToolCall
from holodeck_core.tools.runtime import ToolCrashedError
from holodeck_core.tools.toolbox import ToolBox, tool_message

STDERR_LINES = 20
"""The CLI's last stderr lines kept for the error of a turn it failed (never printed)."""


@dataclass
class _TurnTools:
    """The agent's tools on the SDK's in-process MCP server for one turn, recording what the
    model called."""

    toolbox: ToolBox
    invocations: list[ToolInvocation] = field(default_factory=list)
    crashed: ToolCrashedError | None = None

    def server(self) -> McpSdkServerConfig:
        tools = [
            sdk.SdkMcpTool(
                spec.name, tool_description(spec), spec.parameters, self._handler(spec.name)
            )
            for spec in self.toolbox.specs
        ]
        return sdk.create_sdk_mcp_server("holodeck_tools", tools=tools)

    def _handler(self, name: str) -> Any:
        async def handle(arguments: dict[str, Any]) -> dict[str, Any]:
            call_id = f"call_{len(self.invocations) + 1}"
            call = ToolCall(call_id, name, json.dumps(arguments), arguments)
            try:
                invocation = await self.toolbox.invoke(call)
            except ToolCrashedError as exc:
                self.crashed = exc
                return {"content": [{"type": "text", "text": f"Error: {exc}"}], "is_error": True}
            self.invocations.append(invocation)
            message = tool_message(invocation)
            return {
                "content": [{"type": "text", "text": message.text}],
                "is_error": message.is_error,
            }

        return handle


async def _prompt(text: str) -> Any:
    """The user message as a stream: a string prompt closes the CLI's stdin, and the in-process
    MCP server answers on it."""
    yield {
        "type": "user",
        "session_id": "",
        "message": {"role": "user", "content": text},
        "parent_tool_use_id": None,
    }


def _usage(result: sdk.ResultMessage) -> TokenUsage:
    usage = result.usage or {}
    prompt = sum(
        int(usage.get(key) or 0)
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    completion = int(usage.get("output_tokens") or 0)
    return TokenUsage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


def _reply(texts: list[str], result: sdk.ResultMessage | None, elapsed_ms: int) -> ModelReply:
    """The turn's answer as HoloDeck reads it: its text blocks joined, or the structured output."""
    if result is None:
        raise ModelCallError(CallErrorKind.MALFORMED, "the Claude CLI ended without a result")
    if result.is_error:
        detail = "; ".join(result.errors or []) or result.result or result.subtype
        kind = CallErrorKind.BAD_REQUEST if "max_turns" in result.subtype else CallErrorKind.SERVER
        raise ModelCallError(kind, f"the Claude CLI's turn failed ({result.subtype}): {detail}")
    text = "".join(texts)
    if result.structured_output is not None:
        text = json.dumps(result.structured_output)
    return valid_reply(ModelReply(text, [], _usage(result), elapsed_ms, result.stop_reason))


@dataclass
class ClaudeAgentRunner:
    """A :class:`~holodeck_core.agents.loop.ConversationRunner` on the Claude Agent SDK; shared
    by all cases of a suite. A case's later turns resume its session, as HoloDeck's do."""

    model: LLMProvider
    scheduler: CallScheduler
    system: str
    claude: ClaudeBlock | None
    toolbox: ToolBox | None = None
    response_schema: dict[str, Any] | None = None
    max_turns: int = 20
    timeout: float | None = None
    fallback_key: str | None = None
    processes: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(CLAUDE_CLI_PROCESSES)
    )

    def __post_init__(self) -> None:
        cli_env(self.model, Path(), fallback_key=self.fallback_key)  # a config error now, once

    async def run(self, turns: list[TurnInput]) -> list[TurnOutcome]:
        home = Path(tempfile.mkdtemp(prefix="holodeck-claude-"))
        try:
            outcomes: list[TurnOutcome] = []
            session: list[str] = []
            for turn in turns:
                if outcomes and outcomes[-1].error is not None:
                    outcomes.append(
                        TurnOutcome(skipped=True, error="skipped: an earlier turn failed")
                    )
                    continue
                outcomes.append(await self._turn(turn, home, session))
            return outcomes
        finally:
            shutil.rmtree(home, ignore_errors=True)

    async def _turn(self, turn: TurnInput, home: Path, session: list[str]) -> TurnOutcome:
        tools = _TurnTools(self.toolbox) if self.toolbox else None
        outcome = TurnOutcome()
        specs = self.toolbox.specs if self.toolbox else None
        charge = chat_charge("agent", self.model, self.system, [Message("user", turn.text)], specs)
        try:
            reply = await self.scheduler.call(
                lambda: self._query(turn.text, home, session, tools),
                endpoint=endpoint_key(self.model),
                timeout=self.timeout,
                attempts=1,  # a turn is not replayed: its tools may have run
                charge=charge,
            )
        except ModelCallError as exc:
            outcome.error = exc
        else:
            outcome.response, outcome.usage, outcome.model_ms = (
                reply.text,
                reply.usage,
                reply.model_ms,
            )
            outcome.notes.extend(reply.notes)
        if tools is not None:
            outcome.invocations = tools.invocations
            for invocation in tools.invocations:
                outcome.notes.extend(invocation.notes or ())
            if tools.crashed is not None:
                outcome.error = ModelCallError(CallErrorKind.TOOL_CRASHED, str(tools.crashed))
                outcome.response = None
        return outcome

    async def _query(
        self, text: str, home: Path, session: list[str], tools: _TurnTools | None
    ) -> ModelReply:
        stderr: deque[str] = deque(maxlen=STDERR_LINES)
        options = claude_options(
            model=self.model,
            system=self.system,
            claude=self.claude,
            max_turns=self.max_turns,
            tools=[spec.name for spec in self.toolbox.specs] if self.toolbox else [],
            tool_server=tools.server() if tools else None,
            response_schema=self.response_schema,
            home=home,
            env=cli_env(self.model, home, fallback_key=self.fallback_key),
            resume=session[-1] if session else None,
            stderr=stderr.append,
        )
        texts: list[str] = []
        result: sdk.ResultMessage | None = None
        async with self.processes:
            started = time.perf_counter()
            try:
                async for message in sdk.query(prompt=_prompt(text), options=options):
                    if isinstance(message, sdk.AssistantMessage):
                        texts += [b.text for b in message.content if isinstance(b, sdk.TextBlock)]
                    elif isinstance(message, sdk.ResultMessage):
                        result = message
            except sdk.ClaudeSDKError as exc:
                why = f"the Claude CLI failed: {exc}" + "".join(f"\n  {line}" for line in stderr)
                raise ModelCallError(CallErrorKind.INTERNAL, why) from exc
        if result is not None and result.session_id:
            session[:] = [result.session_id]
        return _reply(texts, result, int((time.perf_counter() - started) * 1000))
