"""Rules of the loopback model server (docs/cli.md): the pydantic models and their error.

The format is documented in :mod:`holodeck_core.testing.server`; reading a file or a mapping
into :class:`Rules` is :mod:`.rules_loading`'s.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, TypeAlias, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from holodeck_core.defaults import (
    MODEL_SERVER_BATCH_COMPLETE_AFTER_S,
    MODEL_SERVER_BATCH_FAIL_STATUS,
    MODEL_SERVER_CUT_AFTER_EVENTS,
)

__all__ = [
    "FAULT_KINDS",
    "ROUTES",
    "Action",
    "BatchControls",
    "BatchFailures",
    "FaultKind",
    "FaultSpec",
    "GlobalFaults",
    "Match",
    "RouteName",
    "Rule",
    "Rules",
    "RulesError",
    "ToolCallSpec",
]

FaultKind: TypeAlias = Literal[
    "400", "401", "429", "500", "503", "drop", "malformed", "slow", "cut"
]
RouteName: TypeAlias = Literal["chat", "messages", "responses", "embeddings"]
FAULT_KINDS: tuple[FaultKind, ...] = (
    "400",
    "401",
    "429",
    "500",
    "503",
    "drop",
    "malformed",
    "slow",
    "cut",
)
ROUTES: tuple[RouteName, ...] = ("chat", "messages", "responses", "embeddings")

FORMAT_HINT = (
    "the rules format is described in the docstring of holodeck_core.testing.server "
    "(see docs/cli.md)"
)


class RulesError(ValueError):
    """A rules file (or mapping) that cannot be used; the message names file, field and fix."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        lines = [f"invalid model-server rules in {source}:"]
        lines.extend(f"  - {p}" for p in problems)
        lines.append(f"fix the field(s) named above; {FORMAT_HINT}")
        super().__init__("\n".join(lines))


def _kind_to_str(value: Any) -> Any:
    """YAML reads ``kind: 429`` as an int; accept it as the string ``"429"``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


class _Strict(BaseModel):
    """Base: unknown fields are errors (reported with the allowed names, see _format_errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _check_regex(value: str | None, field: str) -> str | None:
    if value is None:
        return None
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"'{value}' is not a valid regular expression for {field}: {exc}") from exc
    return value


class Match(_Strict):
    """Conditions of a rule; all optional, all must hold."""

    user: str | None = None
    """Regex searched (``re.search``) in the text of the last user message; groups feed $1..$9."""
    system: str | None = None
    """Regex searched in the system prompt (system/developer messages, ``system``, instructions)."""
    model: str | None = None
    """Regex searched in the request's model name: one server plays several models
    differently (``holodeck matrix``'s candidates, docs/cli.md)."""
    route: RouteName | None = None
    tool_result: bool | None = None
    """True: the conversation's last message carries a tool result; False: it does not."""
    nth: int | None = Field(default=None, ge=1)
    """Match only the Nth call (1-based) of the request key (route + last user message)."""

    @field_validator("user")
    @classmethod
    def _user_regex(cls, v: str | None) -> str | None:
        return _check_regex(v, "match.user")

    @field_validator("system")
    @classmethod
    def _system_regex(cls, v: str | None) -> str | None:
        return _check_regex(v, "match.system")

    @field_validator("model")
    @classmethod
    def _model_regex(cls, v: str | None) -> str | None:
        return _check_regex(v, "match.model")


class ToolCallSpec(_Strict):
    """A tool call the model makes: ``arguments`` (an object, templated) or ``arguments_raw``."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] | None = None
    arguments_raw: str | None = None
    """Sent verbatim as the arguments string (e.g. invalid JSON); no template substitution."""

    @model_validator(mode="after")
    def _one_of(self) -> ToolCallSpec:
        if self.arguments is not None and self.arguments_raw is not None:
            raise ValueError("give either 'arguments' (an object) or 'arguments_raw', not both")
        return self


class FaultSpec(_Strict):
    """A rule's fault: every call (neither ``first`` nor ``rate``), the first K calls of each
    request key (``first``), or a seeded random fraction of calls (``rate``)."""

    kind: FaultKind
    first: int | None = Field(default=None, ge=1)
    rate: float | None = Field(default=None, ge=0.0, le=1.0)
    retry_after: float | None = Field(default=None, ge=0.0)
    """Seconds in the ``Retry-After`` header of a 429 (default: ``faults.retry_after``)."""
    slow_seconds: float | None = Field(default=None, gt=0.0)
    """How long a ``slow`` fault waits before answering (default: ``faults.slow_seconds``)."""
    after_events: int | None = Field(default=None, ge=0)
    """How many events a ``cut`` fault lets through before it closes the stream (default:
    ``faults.cut_after_events``)."""
    message: str | None = None
    """The error message of a 400/401/500/503; ``{api_key}`` and ``{api_key_masked}``
    (``sk-abc12…wxyz``) echo the request's key, as real providers do."""

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, v: Any) -> Any:
        return _kind_to_str(v)

    @model_validator(mode="after")
    def _first_or_rate(self) -> FaultSpec:
        if self.first is not None and self.rate is not None:
            raise ValueError("give either 'first: K' or 'rate: p', not both")
        if self.after_events is not None and self.kind != "cut":
            raise ValueError(f"'after_events' is for kind 'cut' only, not '{self.kind}'")
        return self


def _check_logprobs(v: Any) -> Any:
    if v is None:
        return False
    if isinstance(v, bool):
        return v
    if isinstance(v, Mapping):
        out: dict[str, float] = {}
        for token, p in v.items():
            if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 < p <= 1.0:
                raise ValueError(
                    f"probability of token '{token}' must be a number in (0, 1], got {p!r}"
                )
            out[str(token)] = float(p)
        if not out:
            raise ValueError("the token → probability mapping is empty")
        if sum(out.values()) > 1.0 + 1e-9:
            raise ValueError("the token probabilities add up to more than 1")
        return out
    raise ValueError(
        "must be true/false, or a mapping of score token to probability such as "
        "{'8': 0.7, '7': 0.2, '9': 0.1}"
    )


class ReplyChoice(_Strict):
    """One of a rule's random replies: answered with probability ``p``."""

    p: float = Field(gt=0.0, le=1.0)
    reply: str


class ReportedUsage(_Strict):
    """Token counts the server reports in place of its own (a server that under-reports)."""

    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)


class Action(_Strict):
    """What the server answers: tool calls, a reply (template) or a JSON reply, plus extras.

    A reply and tool calls together: the tool calls are made while the conversation's last
    message carries no tool result, the reply is sent once it does (one rule = one round trip).
    Tool calls alone are made on every call (a model that never stops calling tools).
    Neither: the ``default`` reply is sent.
    """

    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    reply: str | None = None
    json_: Any = Field(default=None, alias="json")
    replies: list[ReplyChoice] = Field(default_factory=list)
    """Answer one at random (seeded by the top-level ``seed``, the request key and the call
    number); with probabilities adding up to less than 1 the rest goes to ``reply``."""
    thinking: str | None = None
    """A thinking block (template) before the answer, on the messages route only."""
    logprobs: bool | dict[str, float] = False
    latency: float = Field(default=0.0, ge=0.0)
    fault: FaultSpec | None = None
    usage: ReportedUsage | None = None

    @field_validator("logprobs", mode="before")
    @classmethod
    def _logprobs(cls, v: Any) -> Any:
        return _check_logprobs(v)

    @field_validator("tool_calls", mode="before")
    @classmethod
    def _tool_calls(cls, v: Any) -> Any:
        return [] if v is None else v

    @model_validator(mode="after")
    def _reply_or_json(self) -> Action:
        if self.reply is not None and self.has_json:
            raise ValueError(
                "give either 'reply' (a string template) or 'json' (a value), not both"
            )
        if self.replies and self.has_json:
            raise ValueError("give either 'replies' or 'json', not both")
        total = sum(choice.p for choice in self.replies)
        if total > 1.0 + 1e-9:
            raise ValueError(f"the replies' probabilities add up to {total:g}, more than 1")
        return self

    @property
    def has_json(self) -> bool:
        """True if a ``json:`` reply was given (even ``json: null``)."""
        return "json_" in self.model_fields_set

    @property
    def has_reply(self) -> bool:
        return self.reply is not None or self.has_json or bool(self.replies)


class Rule(Action):
    """One scripted rule: optional ``name`` (used in /_stats) and ``match`` conditions."""

    name: str | None = None
    match: Match = Field(default_factory=Match)

    @field_validator("match", mode="before")
    @classmethod
    def _match(cls, v: Any) -> Any:
        return {} if v is None else v


class GlobalFaults(_Strict):
    """Faults for every model call (after a matching rule's own fault had its say).

    ``rate`` maps a kind to the probability of that kind per call (sum ≤ 1), decided by a
    generator seeded with ``seed`` and the call's request key and number, so a run is
    reproducible even with concurrent requests. ``first`` maps kinds to counts: with
    ``{"429": 2, "500": 1}`` calls 1-2 of each request key get 429, call 3 gets 500.
    """

    rate: dict[FaultKind, float] = Field(default_factory=dict)
    first: dict[FaultKind, int] = Field(default_factory=dict)
    retry_after: float = Field(default=1.0, ge=0.0)
    seed: int = 0
    slow_seconds: float = Field(default=30.0, gt=0.0)
    cut_after_events: int = Field(default=MODEL_SERVER_CUT_AFTER_EVENTS, ge=0)
    """How many events a ``cut`` fault lets through before it closes the stream."""

    @field_validator("rate", "first", mode="before")
    @classmethod
    def _kind_keys(cls, v: Any) -> Any:
        if v is None:
            return {}
        if isinstance(v, Mapping):
            return {_kind_to_str(k): val for k, val in v.items()}
        return v

    @field_validator("rate")
    @classmethod
    def _rates(cls, v: dict[FaultKind, float]) -> dict[FaultKind, float]:
        for kind, p in v.items():
            if not 0.0 <= p <= 1.0 or math.isnan(p):
                raise ValueError(f"rate of '{kind}' must be between 0 and 1, got {p}")
        if sum(v.values()) > 1.0 + 1e-9:
            raise ValueError(f"the rates add up to {sum(v.values()):g}, more than 1")
        return v

    @field_validator("first")
    @classmethod
    def _firsts(cls, v: dict[FaultKind, int]) -> dict[FaultKind, int]:
        for kind, k in v.items():
            if k < 0:
                raise ValueError(f"first count of '{kind}' must be >= 0, got {k}")
        return v


BatchErrorStatus: TypeAlias = Literal[400, 401, 404, 429, 500, 503]


class BatchFailures(_Strict):
    """Requests of a batch that fail (to the error file, or ``errored``) instead of being
    answered: those named in ``custom_ids`` and a seeded fraction ``rate`` of the others."""

    custom_ids: list[str] = Field(default_factory=list)
    rate: float = Field(default=0.0, ge=0.0, le=1.0)
    """Decided per custom_id with ``faults.seed``, so the same requests fail in every run."""
    status: BatchErrorStatus = Field(default=cast(BatchErrorStatus, MODEL_SERVER_BATCH_FAIL_STATUS))
    message: str = "Injected batch request failure from the holodeck loopback model server."


class BatchControls(_Strict):
    """How the loopback model server processes batches (docs/cli.md)."""

    complete_after: float = Field(default=MODEL_SERVER_BATCH_COMPLETE_AFTER_S, ge=0.0)
    """Seconds from submission until every request is answered (they finish evenly over it)."""
    expire_after: float | None = Field(default=None, ge=0.0)
    """Seconds from submission after which a batch still processing ends ``expired``: the
    requests not answered by then are expired."""
    fail: BatchFailures = Field(default_factory=BatchFailures)

    @field_validator("fail", mode="before")
    @classmethod
    def _fail(cls, v: Any) -> Any:
        return {} if v is None else v


class Rules(_Strict):
    """A whole rules file: ``default``, optional global ``faults``, ``rules`` (first match wins)."""

    default: Action = Field(default_factory=lambda: Action(reply="I don't know."))
    faults: GlobalFaults = Field(default_factory=GlobalFaults)
    rules: list[Rule] = Field(default_factory=list)
    seed: int = 0
    """Seeds the choice among a rule's ``replies``."""
    batches: BatchControls = Field(default_factory=BatchControls)

    top_level_fields: ClassVar[tuple[str, ...]] = ("default", "faults", "rules", "seed", "batches")

    @field_validator("default", mode="before")
    @classmethod
    def _default(cls, v: Any) -> Any:
        if v is None:
            return {"reply": "I don't know."}
        if isinstance(v, str):
            return {"reply": v}
        return v

    @field_validator("faults", "batches", mode="before")
    @classmethod
    def _faults(cls, v: Any) -> Any:
        return {} if v is None else v

    @field_validator("rules", mode="before")
    @classmethod
    def _rules(cls, v: Any) -> Any:
        return [] if v is None else v

    def rule_label(self, index: int | None) -> str:
        """The name of rule ``index`` in /_stats: its ``name``, else its index; None = default."""
        if index is None:
            return "default"
        rule = self.rules[index]
        return rule.name if rule.name else str(index)
