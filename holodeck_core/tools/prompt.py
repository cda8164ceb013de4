"""``type: prompt`` tools: a template (``template`` or ``file``) rendered with the model's
arguments and answered by a model, the tool's ``model`` (over the agent's) or the agent's.

HoloDeck 0.7.1 documents the Handlebars syntax (``{{name}}``, ``{{#if x}}…{{/if}}``,
``{{#each items}}…{{/each}}``) but does not run prompt tools; here they run through the one
call scheduler (retries, limits) and their tokens count in the case's usage. Values are inserted
as they are: Handlebars' HTML escaping makes no sense in a prompt. The tool's description is
the system prompt of the call."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import ValidationError

from holodeck_core.calls.errors import ModelCallError
from holodeck_core.calls.scheduler import endpoint_key
from holodeck_core.defaults import TEMPLATE_RENDER_S
from holodeck_core.errors import ConfigError
from holodeck_core.models import LLMProvider, PromptTool
from holodeck_core.providers.base import ModelClient
from holodeck_core.providers.charges import chat_charge
from holodeck_core.providers.messages import Message, ToolSpec
from holodeck_core.tools.runtime import ToolContext, ToolOutput
from holodeck_core.tools.templates import compile_template, render_off_loop


class PromptRuntime:
    def __init__(self, tool: PromptTool, context: ToolContext, *, where: str) -> None:
        self.config_name = tool.name
        self._context = context
        self._system = tool.description
        source = tool.template
        if tool.file is not None:
            path = context.resolve(tool.file)
            try:
                source = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"{where}.file: cannot read {path}: {exc}") from None
        assert source is not None  # the model requires template or file
        self._source = source
        field = "file" if tool.file else "template"
        self._render = compile_template(source, tool.parameters, where=f"{where}.{field}")
        self.model = _model(tool, context.agent_model, where)
        self._client: ModelClient | None = None
        required = [name for name, spec in tool.parameters.items() if "default" not in spec]
        schema = {"type": "object", "properties": tool.parameters, "required": required}
        self.specs = [ToolSpec(tool.name, tool.description, schema)]

    async def open(self) -> None:
        self._client = self._context.client_factory(self.model)

    def identity(self) -> dict[str, Any]:
        return {
            "type": "prompt",
            "name": self.config_name,
            "template": hashlib.sha256(self._source.encode()).hexdigest(),
            "model": self.model.fingerprint_fields(),
        }

    async def call(self, function: str, arguments: dict[str, Any]) -> ToolOutput:
        client = self._client
        assert client is not None, "open() first"
        try:
            text = await render_off_loop(self._render, arguments)
        except TimeoutError:
            return ToolOutput(error=f"rendering the template took over {TEMPLATE_RENDER_S:g} s")
        except Exception as exc:
            return ToolOutput(error=f"rendering the template failed: {type(exc).__name__}: {exc}")
        timeout = self._context.timeout
        try:
            reply = await self._context.scheduler.call(
                lambda: client.complete(
                    self._system, [Message(role="user", text=text)], timeout=timeout
                ),
                endpoint=endpoint_key(client.model),
                timeout=timeout,
                charge=chat_charge(
                    "prompt_tool", client.model, self._system, [Message(role="user", text=text)]
                ),
            )
        except ModelCallError as exc:
            return ToolOutput(error=f"the prompt tool's model call failed: {exc}")
        return ToolOutput(result=reply.text, usage=reply.usage)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def _model(tool: PromptTool, agent_model: LLMProvider, where: str) -> LLMProvider:
    """``model:`` overlays the agent's model; naming another provider starts from scratch
    (the agent's endpoint and key belong to the agent's provider)."""
    if not tool.model:
        return agent_model
    base = agent_model.model_dump()
    if tool.model.get("provider", agent_model.provider.value) != agent_model.provider.value:
        base = {}
    try:
        return LLMProvider.model_validate({**base, **tool.model})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'model'}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"{where}.model: {problems}") from None
