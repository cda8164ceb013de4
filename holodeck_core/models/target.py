"""Where an agent runs when it is not run in-process from ``agent.yaml`` (docs/targets.md).

A target is declared per agent in ``holodeck.yaml`` (``agents: [{path: agent.yaml, target:
{http: {...}}}]``) or with ``holodeck test AGENT --target ...``; its one key names its kind.
Every kind is an endpoint of the call layer with its own concurrency ``limit``, ``timeout``
per call and ``attempts`` (retries included). Header values are secrets: they serialize as
``***`` and the loader scrubs them from everything written (docs/targets.md)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from holodeck_core.models.base import JSON_PATH, Secret, StrictModel

_CALLABLE = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
TargetKind = Literal["holodeck_serve", "http", "openai_chat", "python"]


class _Endpoint(StrictModel):
    limit: int | None = Field(
        None, ge=1, le=1000, description="Calls in flight to this target (default: --parallel)."
    )
    timeout: float | None = Field(
        None, gt=0, description="Seconds one call may take (default: --timeout / llm_timeout)."
    )
    attempts: int | None = Field(
        None, ge=1, le=10, description="Tries per call, retries included (default 4)."
    )


class _UrlEndpoint(_Endpoint):
    url: str = Field(min_length=1)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(f"url must be an http:// or https:// URL, got {value!r}")
        return value


class HolodeckServeTarget(_UrlEndpoint):
    """``holodeck serve`` (REST): ``POST <url>/agent/<agent>/chat``."""

    agent: str | None = Field(None, description="The served agent's name (default: agent.yaml's).")


class HttpResponsePaths(StrictModel):
    """Where the reply's parts are, as paths into its JSON body."""

    text: str | None = Field(None, description="The answer; absent: the whole body as text.")
    tool_calls: str | None = Field(
        None, description="A list of {name, arguments, result?, error?, status?} objects."
    )
    usage: str | None = Field(
        None, description="An object of prompt_tokens/completion_tokens (or input/output_tokens)."
    )
    session: str | None = Field(None, description="A session id the next turn sends back.")

    @field_validator("text", "tool_calls", "usage", "session")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        if value is not None and not JSON_PATH.match(value):
            raise ValueError(
                f"{value!r} is not a path (use keys and [index], e.g. choices[0].message.content)"
            )
        return value


class HttpTarget(_UrlEndpoint):
    """Any JSON-over-HTTP agent: a body template in, paths into the reply out."""

    method: Literal["POST", "PUT", "GET"] = "POST"
    headers: dict[str, Secret] = Field(default_factory=dict)
    body: Any = Field(
        default_factory=lambda: {"input": "{{input}}"},
        description="A JSON template: {{input}}, {{turn}}, {{session}}, {{messages}}, "
        "{{files}} (a string that is exactly one variable takes its value).",
    )
    response: HttpResponsePaths = Field(default_factory=HttpResponsePaths)

    @field_validator("body")
    @classmethod
    def _known_variables(cls, value: Any) -> Any:
        unknown = sorted(set(_variables(value)) - set(TEMPLATE_VARIABLES))
        if unknown:
            raise ValueError(
                f"unknown template variable(s) {', '.join(unknown)}; use "
                + ", ".join("{{" + name + "}}" for name in TEMPLATE_VARIABLES)
            )
        return value


TEMPLATE_VARIABLES = ("input", "turn", "session", "messages", "files")
TEMPLATE_VARIABLE = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def _variables(template: Any) -> list[str]:
    if isinstance(template, dict):
        return [name for value in template.values() for name in _variables(value)]
    if isinstance(template, list):
        return [name for value in template for name in _variables(value)]
    return TEMPLATE_VARIABLE.findall(template) if isinstance(template, str) else []


class OpenAIChatTarget(_UrlEndpoint):
    """An agent behind an OpenAI-compatible ``/chat/completions`` endpoint (``url`` is the
    base URL, as an SDK's ``base_url``)."""

    model: str = Field(min_length=1)
    api_key: Secret | None = None
    headers: dict[str, Secret] = Field(default_factory=dict)


class PythonTarget(_Endpoint):
    """``module:function`` (sync or async), given a ``TargetCase``, returning a
    ``TargetReply`` or a string (``holodeck_core.agents.targets.python``)."""

    callable: str

    @field_validator("callable")
    @classmethod
    def _reference(cls, value: str) -> str:
        if not _CALLABLE.match(value):
            raise ValueError(f"callable must look like module:function, got {value!r}")
        return value


TargetSpec = HolodeckServeTarget | HttpTarget | OpenAIChatTarget | PythonTarget


class Target(StrictModel):
    """Exactly one of the kinds."""

    holodeck_serve: HolodeckServeTarget | None = None
    http: HttpTarget | None = None
    openai_chat: OpenAIChatTarget | None = None
    python: PythonTarget | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Target:
        chosen = [name for name in type(self).model_fields if getattr(self, name) is not None]
        if len(chosen) != 1:
            raise ValueError(
                "a target has exactly one of holodeck_serve, http, openai_chat, python; got "
                + (", ".join(chosen) or "none")
            )
        return self

    @property
    def kind(self) -> TargetKind:
        kind: TargetKind
        for kind in ("holodeck_serve", "http", "openai_chat", "python"):
            if getattr(self, kind) is not None:
                return kind
        raise AssertionError("validated: one kind is set")

    @property
    def spec(self) -> TargetSpec:
        value: TargetSpec = getattr(self, self.kind)
        return value

    @property
    def label(self) -> str:
        """How errors and ``validate`` name it: ``http POST https://...``."""
        spec = self.spec
        if isinstance(spec, PythonTarget):
            return f"python {spec.callable}"
        if isinstance(spec, HttpTarget):
            return f"http {spec.method} {spec.url}"
        if isinstance(spec, OpenAIChatTarget):
            return f"openai_chat {spec.url} ({spec.model})"
        return f"holodeck_serve {spec.url}"

    def snapshot(self) -> dict[str, Any]:
        """The redacted config (header values and keys are ``***``)."""
        return self.model_dump(mode="json", exclude_none=True)

    def identity(self) -> dict[str, Any]:
        """What decides the answers, for fingerprints: the snapshot without the call
        settings (``limit``, ``timeout``, ``attempts``)."""
        settings = {"limit", "timeout", "attempts"}
        return {
            kind: {key: value for key, value in spec.items() if key not in settings}
            for kind, spec in self.snapshot().items()
        }
