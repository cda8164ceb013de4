"""The Explorer page: runs → cases → one case's detail (conversation, tool calls, expected
tools, metrics with the judge's reasoning, errors, processed files, config snapshot)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import yaml
from dash import dcc, html

from holodeck_core.dashboard import agent_filter, ui
from holodeck_core.dashboard.data import first
from holodeck_core.dashboard.explorer_data import CaseDetail, Explorer, RunChoice, explorer
from holodeck_core.dashboard.links import compare_href, explorer_href
from holodeck_core.dashboard.long_text import case_text_href, shown
from holodeck_core.history.store import History

if TYPE_CHECKING:
    from holodeck_core.models import TestResult
    from holodeck_core.models.test_case import ExpectedToolSpec

FOLD_CHARS = 400
"""Tool results longer than this start folded."""


def page(db: History, query: dict[str, list[str]]) -> html.Div:
    choice = RunChoice(first(query, "agent"), first(query, "prompt"), first(query, "candidate"))
    data = explorer(db, first(query, "run"), first(query, "case"), choice)
    run_id = data.run["run_id"]
    case_id = data.detail.case["case_id"] if data.detail else None
    return html.Div(
        [
            html.H2("Explorer"),
            html.Div([agent_filter.dropdown("explorer", data.agents, data.choice.agent or ""),
                      *_configuration(data.choice)], className="filters"),
            html.Div(
                [
                    html.Div([html.H4("Runs"), _runs(data, run_id)], className="card list"),
                    html.Div([html.H4("Cases"), _cases(data, run_id, case_id)],
                             className="card list", id="case-list"),
                    html.Div(_detail(data), className="card", id="case-detail"),
                ],
                className="cols",
            ),
        ],
        className="page",
        id="explorer-page",
    )  # fmt: skip


def _runs(data: Explorer, current: str) -> html.Div:
    return html.Div(
        [
            dcc.Link(
                f"{ui.when(r['finished_at'])} · {r['prompt_version']} · {r['model_candidate']} · "
                f"{ui.pct(r['pass_rate'])}",
                href=_within(data.choice, explorer_href(r["run_id"])),
                className="current" if r["run_id"] == current else "",
            )
            for r in data.runs
        ],
        id="run-list",
    )


def _within(choice: RunChoice, href: str) -> str:
    """A link that keeps the run list narrowed to ``choice``'s configuration."""
    narrowed = {"prompt": choice.prompt, "candidate": choice.candidate}
    return href + "".join(f"&{urlencode({k: v})}" for k, v in narrowed.items() if v)


def _configuration(choice: RunChoice) -> list[Any]:
    """The configuration the run list is narrowed to (a Matrix cell's link), and the way out."""
    if not (choice.prompt or choice.candidate):
        return []
    what = " · ".join(p for p in (choice.prompt, choice.candidate) if p)
    return [html.Div([html.Label("\u00a0"), html.Span([
        f"runs of {what} only · ", dcc.Link("all its runs", href=agent_filter.href(
            "explorer", choice.agent or ""))], id="explorer-configuration")])]  # fmt: skip


def _cases(data: Explorer, run_id: str, current: str | None) -> html.Div:
    return html.Div(
        [
            dcc.Link(
                [ui.badge(c["status"]), c["test_name"] or c["case_id"],
                 html.Span(f" {c['turn_count']} turns", className="muted")
                 if c["turn_count"] else ""],
                href=_within(data.choice, explorer_href(run_id, c["case_id"])),
                className="current" if c["case_id"] == current else "",
                id=f"case-{c['case_id']}",
            )
            for c in data.cases
        ]
    )  # fmt: skip


def _detail(data: Explorer) -> list[Any]:
    run = data.run
    header: list[Any] = [
        html.H3(f"Run {ui.short(run['run_id'])}"),
        html.P(
            f"{run['agent_name']} · prompt {run['prompt_version']} · candidate "
            f"{run['model_candidate']} · {run['model_provider']} "
            f"{run['model_name']} · {run['trigger'] or '-'} · {ui.when(run['finished_at'])} · "
            f"{run['passed']}/{run['total_tests']} passed ({ui.pct(run['pass_rate'])}), "
            f"{run['errored']} errored · version {run['holodeck_version'] or 'not recorded'}",
            id="run-summary",
        ),
        html.P(
            f"cost {ui.usd(run['cost_usd'])} ({ui.usd(run['cost_per_pass'])} per passing case)"
            f" · estimate: {run['estimate']} · budget: {run['budget']}",
            id="run-cost",
        ),
    ]
    if run.get("previous_run_id"):
        header.append(
            dcc.Link(
                "Compare with the previous run of this configuration",
                href=compare_href([run["previous_run_id"], run["run_id"]]),
            )
        )
    if data.run_file.problem:
        header.append(html.P(f"Note: {data.run_file.problem}.", className="muted", id="file-note"))
    body = _case_detail(data.detail) if data.detail else [
        html.P("Pick a case to see its conversation, tool calls and metrics.", className="muted")
    ]  # fmt: skip
    return [*header, *body, *_snapshot(data)]


def _snapshot(data: Explorer) -> list[Any]:
    prompt = data.prompt
    parts: list[Any] = []
    if prompt:
        parts.append(html.Details([
            html.Summary(f"Prompt version {prompt['prompt_version']} "
                         f"({prompt.get('author') or 'no author'}; "
                         f"tags {', '.join(prompt.get('tags') or []) or '-'})"),
            html.Pre(prompt.get("body") or "(body not in the history)"),
        ], id="prompt-snapshot"))  # fmt: skip
    if data.config:
        parts.append(html.Details([
            html.Summary("Config snapshot (redacted)"),
            html.Pre(yaml.safe_dump(data.config, sort_keys=False, allow_unicode=True)),
        ], id="config-snapshot"))  # fmt: skip
    return parts


def _case_detail(detail: CaseDetail) -> list[Any]:
    case, result = detail.case, detail.result
    parts: list[Any] = [
        html.H3([ui.badge(case["status"]), case["test_name"] or case["case_id"]]),
        html.P(f"case {case['case_id']} · {ui.num(case['execution_time_ms'])} ms · "
               f"{ui.num(case['total_tokens'])} tokens · tags "
               f"{', '.join(case['tags'] or []) or '-'}", className="muted"),
        html.H4("Conversation"),
        *_conversation(detail, result),
    ]  # fmt: skip
    if result is not None and result.processed_files:
        parts += [html.H4("Processed files"), ui.grid(
            ["file", "type", "pages/sheet", "ms", "error"],
            [[f.original.path or f.original.url, f.original.type,
              str(f.original.pages or f.original.sheet or "-"), f.processing_time_ms,
              f.error or ""] for f in result.processed_files], "processed-files")]  # fmt: skip
    parts += [html.H4("Metrics"), _metrics(detail)]
    if detail.errors:
        kind = result.error_source if result is not None and result.error_source else None
        parts += [
            html.H4("Errors" + (f" ({kind})" if kind else "")),
            ui.grid(
                ["from", "name", "turn", "message"],
                [
                    [
                        e["source"],
                        e["name"] or "",
                        "" if e["turn_index"] is None else e["turn_index"] + 1,
                        e["message"] or "(no message)",
                    ]
                    for e in detail.errors
                ],
                "errors-table",
            ),
        ]
    return parts  # fmt: skip


def _metrics(detail: CaseDetail) -> Any:
    """The case's metric results, or why it has none (it errored before it was scored)."""
    if not detail.metrics:
        if detail.case["status"] == "ERROR":
            why = "No metric results: the case is ERROR and was not scored" + (
                " (its errors are below)." if detail.errors else "."
            )
        else:
            why = "No metric results: the run has no metric that applies to this case."
        return html.P(why, className="muted", id="metrics-none")
    return ui.grid(
        ["turn", "metric", "kind", "score", "raw", "threshold", "passed", "reasoning / error"],
        [
            [
                m["turn_index"] + 1 if m["turn_index"] is not None else "case",
                m["metric_name"],
                m["kind"],
                ui.score(m["score"]),
                f"{ui.score(m['raw_score'])} {m['unit'] or ''}".strip(),
                "-" if m["threshold"] is None else f"{m['threshold']:g}",
                {True: "yes", False: "no"}.get(m["passed"], "error"),
                m["error"] or m["reasoning"] or "",
            ]
            for m in detail.metrics
        ],
        "metrics-table",
    )


def _conversation(detail: CaseDetail, result: TestResult | None) -> list[Any]:
    tools_by_turn: dict[int | None, list[dict[str, Any]]] = {}
    for tool in detail.tools:
        tools_by_turn.setdefault(tool["turn_index"], []).append(tool)
    case = detail.case
    if result is not None and result.turns:
        return [
            html.Div([
                html.B(f"Turn {turn.turn_index + 1}"),
                html.Div(shown(turn.input), className="bubble user"),
                *_tool_calls(tools_by_turn.get(turn.turn_index, [])),
                html.Div(shown(turn.response or "(no response)"), className="bubble agent"),
                *_coverage(turn.expected_tools, turn.tool_calls, turn.tools_matched),
            ], className="turn", id=f"turn-{turn.turn_index}")
            for turn in result.turns
        ]  # fmt: skip

    def href(field: str) -> str:
        return case_text_href(case["run_id"], case["case_id"], field)

    parts: list[Any] = [
        html.Div(shown(case["test_input"], href("test_input")), className="bubble user")
    ]
    for turn_index, tools in sorted(tools_by_turn.items(), key=lambda kv: kv[0] or -1):
        if turn_index is not None:
            parts.append(html.B(f"Turn {turn_index + 1} tool calls"))
        parts += _tool_calls(tools)
    response = case["agent_response"] or "(no response)"
    parts.append(html.Div(shown(response, href("agent_response")), className="bubble agent"))
    if result is not None:
        parts += _coverage(result.expected_tools, result.tool_calls, result.tools_matched)
    return parts


def _tool_calls(tools: list[dict[str, Any]]) -> list[Any]:
    calls = []
    for tool in tools:
        result = tool["result"]
        folded: Any = html.Pre(shown(result), className="tool-result")
        if len(result) > FOLD_CHARS:
            summary = html.Summary(f"result ({ui.num(tool['bytes'])} bytes)")
            folded = html.Details([summary, folded])
        calls.append(html.Details([
            html.Summary(f"tool call: {tool['name']}"
                         + ("" if tool["duration_ms"] is None else f" · {tool['duration_ms']} ms")
                         + f" · {ui.num(tool['bytes'])} bytes"
                         + (" · error" if tool["error"] else "")),
            html.Div("arguments"), html.Pre(shown(tool["args"]), className="tool-args"),
            html.Div("result"), folded,
            *([html.Div(f"error: {tool['error']}")] if tool["error"] else []),
        ], className="tool-call", id=f"tool-{tool['call_index']}"))  # fmt: skip
    return calls


def _coverage(
    expected: list[ExpectedToolSpec] | None, called: list[str], matched: bool | None
) -> list[Any]:
    if not expected:
        return []
    rows = []
    for spec in expected:
        name = spec if isinstance(spec, str) else spec.name
        need = 1 if isinstance(spec, str) else spec.count
        args = "" if isinstance(spec, str) or not spec.args else json.dumps(spec.args)
        hits = sum(1 for c in called if name in c)
        rows.append([name, args, f"{hits}/{need}", "yes" if hits >= need else "missing"])
    verdict = {True: "matched", False: "not matched", None: "-"}[matched]
    return [html.Div([html.Div(f"Expected tools: {verdict}"),
                      ui.grid(["tool", "args", "calls", "called"], rows)],
                     className="coverage")]  # fmt: skip
