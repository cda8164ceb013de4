"""Running the agent's tools: ``function`` tools (a Python file + function), ``mock:`` results,
and the live runtimes of :mod:`holodeck_core.tools` (MCP, prompt, retrieval). Everything is
prepared before the first model call, so a tool that cannot run is a config error (exit 2) or
a start error (exit 3), never a failure halfway through a paid run."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import inspect
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from holodeck_core.defaults import TOOL_TIMEOUT_S
from holodeck_core.errors import ConfigError
from holodeck_core.models import FunctionTool, Tool, ToolInvocation
from holodeck_core.models.outside import repaired_note
from holodeck_core.providers.messages import Message, ToolCall, ToolSpec
from holodeck_core.tools import untrusted
from holodeck_core.tools.output import scrub_standard_streams
from holodeck_core.tools.registry import runtime_for
from holodeck_core.tools.runtime import ToolContext, ToolOutput, ToolRuntime

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def load_function(file: Path, function: str, *, where: str) -> Callable[..., Any]:
    """Import ``function`` from ``file`` (once per file), or raise a ConfigError naming both."""
    digest = hashlib.sha256(str(file).encode()).hexdigest()[:12]
    module_name = f"holodeck_tools_{file.stem}_{digest}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, file)
        if spec is None or spec.loader is None:
            raise ConfigError(f"{where}: cannot import {file}")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise ConfigError(
                f"{where}: importing {file} failed: {type(exc).__name__}: {exc}"
            ) from None
        sys.modules[module_name] = module
    target = getattr(module, function, None)
    if not callable(target):
        raise ConfigError(f"{where}: {file} has no function {function!r}")
    return target  # type: ignore[no-any-return]


def parameters_schema(tool: FunctionTool, function: Callable[..., Any]) -> dict[str, Any]:
    """The JSON Schema of a function tool's arguments: HoloDeck's ``parameters`` map (or a full
    object schema), else derived from the function's signature."""
    if tool.parameters:
        if tool.parameters.get("type") == "object":
            return tool.parameters
        return {
            "type": "object",
            "properties": tool.parameters,
            "required": list(tool.parameters),
        }
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        properties[name] = {"type": _JSON_TYPES.get(parameter.annotation, "string")}
        if parameter.default is parameter.empty:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


class ToolBox:
    """The agent's tools, ready to run. Runtimes are built (and their config checked) here;
    :meth:`open` starts them and :meth:`aclose` stops them."""

    def __init__(
        self,
        tools: list[Tool],
        resolve: Callable[[str], Path],
        *,
        timeout: float | None = None,
        context: ToolContext | None = None,
    ) -> None:
        self.timeout = timeout or TOOL_TIMEOUT_S
        self._tools = {tool.name: tool for tool in tools}
        self._functions: dict[str, Callable[..., Any]] = {}
        self._runtimes: list[ToolRuntime] = []
        self._routes: dict[str, ToolRuntime] = {}
        self._opened = False
        self.specs: list[ToolSpec] = []
        for index, tool in enumerate(tools):
            where = f"tools[{index}] ({tool.name})"
            runtime = (
                runtime_for(tool, context, where=where)
                if tool.mock is None and not isinstance(tool, FunctionTool) and context
                else None
            )
            if runtime is not None:
                self._runtimes.append(runtime)
                continue
            if tool.mock is None and not isinstance(tool, FunctionTool):
                raise ConfigError(
                    f"{where}: tools of type {tool.type} cannot run in this engine; give it a "
                    "fixed result to run the suite offline, e.g.\n"
                    f"      mock: {{result: 'what {tool.name} would return'}}"
                )
            if isinstance(tool, FunctionTool) and tool.mock is None:
                scrub_standard_streams()  # what the function prints is scrubbed too
                function = load_function(resolve(tool.file), tool.function, where=where)
                self._functions[tool.name] = function
                schema = parameters_schema(tool, function)
            elif isinstance(tool, FunctionTool) and tool.parameters:
                schema = parameters_schema(tool, lambda: None)
            else:
                schema = {"type": "object", "properties": {}, "additionalProperties": True}
            self.specs.append(ToolSpec(tool.name, tool.description, schema))

    @property
    def runtimes(self) -> list[ToolRuntime]:
        return list(self._runtimes)

    async def open(self) -> None:
        """Start every runtime (concurrently); if one fails, stop the ones that started."""
        if self._opened:
            return
        self._opened = True
        results = await asyncio.gather(
            *(runtime.open() for runtime in self._runtimes), return_exceptions=True
        )
        failure = next((r for r in results if isinstance(r, BaseException)), None)
        if failure is not None:
            await self.aclose()
            raise failure
        owners = {spec.name: spec.name for spec in self.specs}
        for runtime in self._runtimes:
            for spec in runtime.specs:
                if spec.name in owners:  # the model would see two tools of one name
                    await self.aclose()
                    raise ConfigError(
                        f"tools ({runtime.config_name}) offers a tool named {spec.name!r}, as "
                        f"tools ({owners[spec.name]}) does; leave one out (an MCP server's "
                        "config.allowed_tools lists the tools it may offer)"
                    )
                owners[spec.name] = runtime.config_name
                self._routes[spec.name] = runtime
                self.specs.append(spec)

    def identities(self) -> list[dict[str, Any]]:
        """Each open runtime's identity, for the case fingerprint (docs/architecture.md)."""
        return [runtime.identity() for runtime in self._runtimes]

    def provenance(self) -> list[dict[str, Any]]:
        """What runtimes report about opening (an index built or reused, what embedding it
        cost), for the EvalRun."""
        reports = (getattr(r, "provenance", None) for r in self._runtimes)
        return [report() for report in reports if callable(report)]

    async def aclose(self) -> None:
        """Stop every runtime; safe to call twice and after a failed :meth:`open`."""
        runtimes, self._runtimes = self._runtimes, []
        await asyncio.gather(*(r.aclose() for r in runtimes), return_exceptions=True)

    async def invoke(self, call: ToolCall) -> ToolInvocation:
        """Run one call. Failures are error results the model gets to see; only a runtime
        that died raises (:class:`~holodeck_core.tools.runtime.ToolCrashedError`)."""
        started = time.perf_counter()

        def done(result: Any = None, error: str | None = None) -> ToolInvocation:
            elapsed = int((time.perf_counter() - started) * 1000)
            result, error, replaced = untrusted.bounded(result, error)
            invocation = ToolInvocation.of(
                untrusted.shown_name(call.name),
                call.arguments or {},
                result,
                duration_ms=elapsed,
                error=error,
                call_id=call.id,
            )
            if replaced:
                note = repaired_note(f"the result of tool {invocation.name!r}", replaced)
                invocation.notes = [note]
            return invocation

        if call.parse_error is not None:
            return done(error=f"{call.parse_error}; raw arguments: {call.raw_arguments[:200]}")
        runtime = self._routes.get(call.name)
        if runtime is not None:
            output: ToolOutput = await runtime.call(call.name, call.arguments or {})
            invocation = done(output.result, output.error)
            return invocation.model_copy(
                update={
                    "retrieval_context": output.retrieval_context,
                    "chunks": output.chunks,
                    "usage": output.usage,
                }
            )
        tool = self._tools.get(call.name)
        if tool is not None and tool.mock is not None:
            return done(tool.mock.result, tool.mock.error)
        function = self._functions.get(call.name)
        if function is None:  # a name the model invented, or a runtime tool's config name
            return done(error=untrusted.unknown_tool(call.name, (s.name for s in self.specs)))
        arguments = call.arguments or {}
        try:
            async with asyncio.timeout(self.timeout):  # not wait_for: see CallScheduler.run
                if inspect.iscoroutinefunction(function):
                    result = await function(**arguments)
                else:
                    result = await untrusted.in_daemon_thread(function, arguments)
        except TimeoutError:
            return done(error=f"tool timed out after {self.timeout:g} s")
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # SystemExit from a tool is the tool's error, too
            return done(error=untrusted.crashed(exc))
        return done(result)


def tool_message(invocation: ToolInvocation) -> Message:
    """What the model reads back: the result as text, or the error."""
    if invocation.error is not None:
        text, is_error = f"Error: {invocation.error}", True
    elif isinstance(invocation.result, str):
        text, is_error = invocation.result, False
    else:
        text, is_error = json.dumps(invocation.result, default=str), False
    return Message(
        role="tool",
        text=text,
        tool_call_id=invocation.call_id,
        tool_name=invocation.name,
        is_error=is_error,
    )
