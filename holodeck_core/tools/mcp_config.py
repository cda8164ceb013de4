"""How an ``type: mcp`` tool of agent.yaml becomes a connection to its server, checked before any
model call (docs/agent-yaml.md: a missing command or env_file is a config error, exit 2).

Follows HoloDeck 0.7.1 (``lib/backends/mcp_bridge.py``, ``openai_agents_mcp.py``): stdio runs
``command`` (``npx`` when unset) with ``args`` whose ``./`` and ``../`` paths are resolved against
the agent's folder, which is also the server's working directory; the environment is
``env_file`` overlaid by ``env``, plus ``MCP_CONFIG`` (``config`` as JSON); http and sse take
``url``, ``headers``, ``timeout``, ``sse_read_timeout`` (and ``terminate_on_close`` for http);
``config.allowed_tools`` limits the tools offered to the model."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dotenv import dotenv_values

from holodeck_core.defaults import MCP_CONNECT_TIMEOUT_S, MCP_SSE_READ_TIMEOUT_S
from holodeck_core.errors import ConfigError
from holodeck_core.models import MCPTool
from holodeck_core.models.tools import TransportType
from holodeck_core.redaction import redact_text, register_secret
from holodeck_core.tools.runtime import ToolContext


@dataclass(frozen=True)
class ServerParams:
    """Everything needed to (re)connect to one MCP server. ``env`` and ``headers`` hold
    secrets: they are registered for redaction and never part of :meth:`identity`."""

    transport: TransportType
    command: str | None
    args: tuple[str, ...]
    env: dict[str, str]
    cwd: Path
    encoding: str
    url: str | None
    headers: dict[str, str]
    connect_timeout: float
    sse_read_timeout: float
    terminate_on_close: bool
    request_timeout: float
    allowed_tools: frozenset[str] | None

    def identity(self) -> dict[str, Any]:
        """The configured half of the server's fingerprint identity (docs/architecture.md): env
        *names* only."""
        return {
            "transport": self.transport.value,
            "command": Path(self.command).name if self.command else None,
            "args": list(self.args),
            "url": redact_text(self.url) if self.url else None,
            "env": sorted(self.env),
        }


def server_params(tool: MCPTool, context: ToolContext, *, where: str) -> ServerParams:
    """Check ``tool`` and build its connection parameters, or raise a ConfigError naming the
    tool and the field to fix."""
    env = _environment(tool, context, where)
    for name, value in [*env.items(), *(tool.headers or {}).items()]:
        if name != "MCP_CONFIG":  # the agent's own config, shown in the EvalRun anyway
            register_secret(value)
    command: str | None = None
    if tool.transport is TransportType.STDIO:
        command = _executable(tool.command.value if tool.command else "npx", env, where)
    elif not tool.url:
        raise ConfigError(
            f"{where}.url: transport {tool.transport.value} needs the server's url, "
            "e.g. url: http://127.0.0.1:8000/mcp"
        )
    if tool.transport is TransportType.WEBSOCKET and tool.headers:
        raise ConfigError(
            f"{where}.headers: the MCP SDK's websocket transport sends no headers; "
            "use transport: http (streamable HTTP) or sse, or drop the headers"
        )
    allowed = (tool.config or {}).get("allowed_tools")
    return ServerParams(
        transport=tool.transport,
        command=command,
        args=tuple(_resolve_arg(arg, context.base_dir) for arg in tool.args or []),
        env=env,
        cwd=context.base_dir,
        encoding=tool.encoding or "utf-8",
        url=tool.url,
        headers=dict(tool.headers or {}),
        connect_timeout=tool.timeout or MCP_CONNECT_TIMEOUT_S,
        sse_read_timeout=tool.sse_read_timeout or MCP_SSE_READ_TIMEOUT_S,
        terminate_on_close=tool.terminate_on_close is not False,
        request_timeout=float(tool.request_timeout),
        allowed_tools=frozenset(map(str, allowed)) if allowed else None,
    )


def _environment(tool: MCPTool, context: ToolContext, where: str) -> dict[str, str]:
    """``env_file`` values overlaid by ``env`` (``${VAR}`` was substituted by the loader),
    plus ``MCP_CONFIG``. The process environment is not passed on wholesale: the SDK adds
    only a safe default set (PATH, HOME, ...), as HoloDeck's SDKs do."""
    env: dict[str, str] = {}
    if tool.env_file:
        path = context.resolve(tool.env_file)
        if not path.is_file():
            raise ConfigError(
                f"{where}.env_file: file not found: {path} "
                "(paths are relative to the agent file's folder)"
            )
        env.update({k: v for k, v in dotenv_values(path).items() if v is not None})
    env.update(tool.env or {})
    if tool.config:
        env["MCP_CONFIG"] = json.dumps(tool.config)
    return env


def _executable(command: str, env: dict[str, str], where: str) -> str:
    path = env.get("PATH") or os.environ.get("PATH")
    found = shutil.which(command, path=path)
    if found is None:
        hint = "install Node.js (it brings npx and node)" if command in ("npx", "node") else ""
        raise ConfigError(
            f"{where}.command: {command!r} is not found on PATH; "
            + (hint or f"install {command}")
            + " or give a command that is installed"
        )
    return found


def _resolve_arg(arg: str, base_dir: Path) -> str:
    """``./x`` and ``../x`` are paths relative to the agent's folder (HoloDeck does the same),
    so the server sees the right files whatever the caller's working directory."""
    if arg.startswith(("./", "../")):
        return str((base_dir / arg).resolve())
    return arg
