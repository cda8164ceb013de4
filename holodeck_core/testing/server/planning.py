"""Planning: which rule answers a call, what it answers and which fault it injects."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from holodeck_core.testing.rules import Action, FaultKind, ReportedUsage, Rule, Rules
from holodeck_core.testing.server.requests import Conversation


@dataclass(frozen=True)
class PlannedToolCall:
    name: str
    arguments: str
    input: Any  # for Anthropic's tool_use.input


@dataclass
class Fault:
    kind: FaultKind
    retry_after: float
    slow_seconds: float
    after_events: int
    message: str | None = None


@dataclass
class Plan:
    rule_index: int | None
    content: str | None
    tool_calls: list[PlannedToolCall]
    logprobs: bool | dict[str, float]
    latency: float
    fault: Fault | None
    usage: ReportedUsage | None = None
    thinking: str | None = None


_TEMPLATE = re.compile(r"\$([1-9])|\{tool_results?\}")


def _render(template: str, groups: tuple[str | None, ...], conv: Conversation) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(1):
            i = int(m.group(1))
            return (groups[i - 1] or "") if i <= len(groups) else ""
        if m.group(0) == "{tool_result}":
            return conv.last_tool_result
        return "\n".join(conv.last_batch)

    return _TEMPLATE.sub(sub, template)


def _render_json(value: Any, groups: tuple[str | None, ...], conv: Conversation) -> Any:
    if isinstance(value, str):
        return _render(value, groups, conv)
    if isinstance(value, list):
        return [_render_json(v, groups, conv) for v in value]
    if isinstance(value, dict):
        return {k: _render_json(v, groups, conv) for k, v in value.items()}
    return value


def _match_rule(rule: Rule, conv: Conversation, call_no: int) -> tuple[str | None, ...] | None:
    m = rule.match
    if m.route is not None and m.route != conv.route:
        return None
    if m.tool_result is not None and m.tool_result != conv.tool_result:
        return None
    if m.nth is not None and m.nth != call_no:
        return None
    if m.model is not None and re.search(m.model, conv.model) is None:
        return None
    if m.system is not None and re.search(m.system, conv.system) is None:
        return None
    if m.user is not None:
        found = re.search(m.user, conv.user_text)
        if found is None:
            return None
        return found.groups()
    return ()


def uniform_draw(seed: int, scope: str, key: str, call_no: int) -> float:
    """A draw in [0, 1) fixed by the seed, the scope, the request key and the call's number."""
    digest = hashlib.sha256(f"{seed}|{scope}|{key}|{call_no}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def _decide_fault(
    rules: Rules, governing: Action, scope: str, key: str, call_no: int
) -> Fault | None:
    g = rules.faults
    f = governing.fault
    if f is not None:
        if f.first is not None:
            hit = call_no <= f.first
        elif f.rate is not None:
            hit = uniform_draw(g.seed, scope, key, call_no) < f.rate
        else:
            hit = True
        if hit:
            return Fault(
                f.kind,
                g.retry_after if f.retry_after is None else f.retry_after,
                g.slow_seconds if f.slow_seconds is None else f.slow_seconds,
                g.cut_after_events if f.after_events is None else f.after_events,
                f.message,
            )
    upto = 0
    for kind, count in g.first.items():
        upto += count
        if call_no <= upto:
            return Fault(kind, g.retry_after, g.slow_seconds, g.cut_after_events)
    if g.rate:
        u = uniform_draw(g.seed, "global", key, call_no)
        acc = 0.0
        for kind, p in g.rate.items():
            acc += p
            if u < acc:
                return Fault(kind, g.retry_after, g.slow_seconds, g.cut_after_events)
    return None


def _tool_calls(
    action: Action, groups: tuple[str | None, ...], conv: Conversation
) -> list[PlannedToolCall]:
    calls: list[PlannedToolCall] = []
    for spec in action.tool_calls:
        if spec.arguments_raw is not None:
            raw = spec.arguments_raw
            try:
                parsed: Any = json.loads(raw)
            except ValueError:
                parsed = None
            calls.append(
                PlannedToolCall(spec.name, raw, parsed if isinstance(parsed, dict) else raw)
            )
        else:
            args = _render_json(spec.arguments or {}, groups, conv)
            calls.append(PlannedToolCall(spec.name, json.dumps(args, ensure_ascii=False), args))
    return calls


def _reply(action: Action, u: float) -> str | None:
    """The reply template: one of ``replies`` by the uniform draw ``u``, else ``reply``."""
    acc = 0.0
    for choice in action.replies:
        acc += choice.p
        if u < acc:
            return choice.reply
    return action.reply


def _answer(
    action: Action, groups: tuple[str | None, ...], conv: Conversation, u: float
) -> tuple[str | None, list[PlannedToolCall]] | None:
    if action.tool_calls and (not conv.tool_result or not action.has_reply):
        return None, _tool_calls(action, groups, conv)
    if action.has_json:
        return json.dumps(_render_json(action.json_, groups, conv), ensure_ascii=False), []
    reply = _reply(action, u)
    if reply is not None:
        return _render(reply, groups, conv), []
    return None


def plan_call(
    rules: Rules, conv: Conversation, key: str, call_no: int, extra_latency: float
) -> Plan:
    index: int | None = None
    groups: tuple[str | None, ...] = ()
    for i, rule in enumerate(rules.rules):
        found = _match_rule(rule, conv, call_no)
        if found is not None:
            index, groups = i, found
            break
    governing: Action = rules.default if index is None else rules.rules[index]
    scope = "default" if index is None else f"rule{index}"
    u = uniform_draw(rules.seed, f"{scope}|replies", key, call_no)
    answer = _answer(governing, groups, conv, u) or _answer(rules.default, groups, conv, u)
    content, calls = answer if answer is not None else ("", [])
    return Plan(
        rule_index=index,
        content=content,
        tool_calls=calls,
        logprobs=governing.logprobs,
        latency=extra_latency + governing.latency,
        fault=_decide_fault(rules, governing, scope, key, call_no),
        usage=governing.usage,
        thinking=_thinking(governing, groups, conv),
    )


def _thinking(action: Action, groups: tuple[str | None, ...], conv: Conversation) -> str | None:
    """The rule's rendered thinking, on the messages route (the only one that shows it)."""
    if action.thinking is None or conv.route != "messages":
        return None
    return _render(action.thinking, groups, conv)
