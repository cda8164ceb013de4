"""Explorer data: a run, its cases, one case's detail.

Scores, statuses, tool calls and errors come from the history tables. What the tables do not
hold (each turn's input and reply, processed files, expected tools, the redacted config
snapshot) comes from the run's EvalRun file at ``source_path``, read through the history's own
loader; when that file is gone the page says so and shows what the history has.
"""

from __future__ import annotations

import json
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holodeck_core.dashboard.configs import label
from holodeck_core.dashboard.cost_data import run_money
from holodeck_core.dashboard.data import (
    PageError,
    agent_names,
    connect,
    require_runs,
    resolve,
    rows,
)
from holodeck_core.errors import HolodeckError
from holodeck_core.history.store import History

if TYPE_CHECKING:
    import duckdb

    from holodeck_core.models import EvalRun, TestResult

RUN_LIST_LIMIT = 50


@dataclass
class RunFile:
    """The EvalRun file behind a run, or why it cannot be read."""

    run: EvalRun | None
    problem: str | None = None


def load_run_file(source_path: str | None, run_id: str) -> RunFile:
    from holodeck_core.history.holodeck_import import NotAnEvalRun, load_run_file

    if not source_path or not Path(source_path).is_file():
        return RunFile(
            None,
            f"the run's EvalRun file ({source_path or 'not recorded'}) is gone: turns, "
            "processed files and the config snapshot are not shown (scores, tool calls and "
            "errors come from the history)",
        )
    try:
        loaded = load_run_file(Path(source_path))
    except (NotAnEvalRun, HolodeckError, ValueError, OSError) as exc:
        return RunFile(None, f"{source_path} cannot be read: {str(exc)[:200]}")
    if loaded.run_id != run_id:
        return RunFile(None, f"{source_path} changed since it was ingested")
    return RunFile(loaded.run)


@dataclass
class CaseDetail:
    case: dict[str, Any]
    metrics: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    result: TestResult | None
    """The case in the EvalRun file (turns, files, expected tools), when the file is there."""


@dataclass
class Explorer:
    run: dict[str, Any]
    runs: list[dict[str, Any]]
    agents: list[str]
    """Every agent in the history (the agent filter)."""
    choice: RunChoice
    cases: list[dict[str, Any]]
    prompt: dict[str, Any]
    run_file: RunFile
    detail: CaseDetail | None = None
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunChoice:
    """What the Explorer's run list shows: one agent's runs, or one configuration's."""

    agent: str | None = None
    prompt: str | None = None
    candidate: str | None = None


RUN_LIST = """
SELECT r.run_id, r.prompt_version, r.model_candidate, r.finished_at, r.pass_rate,
       r.total_tests, r.trigger
FROM v_runs r
WHERE r.agent_name = $agent
  AND ($prompt IS NULL OR r.prompt_version = $prompt)
  AND ($candidate IS NULL OR r.model_candidate = $candidate)
ORDER BY r.finished_at DESC, r.run_id DESC
LIMIT $limit
"""
"""The run list: the agent's (or one configuration's) newest runs."""


def explorer(
    db: History, run_ref: str | None, case_id: str | None, choice: RunChoice = RunChoice()
) -> Explorer:
    """The run ``run_ref`` (else the newest of ``choice``, else the newest run) with its agent's
    runs listed (those of ``choice``'s configuration when it names one)."""
    with connect(db) as con:
        require_runs(con, db)
        run_id = resolve(con, run_ref) if run_ref else _newest(con, choice)
        (found,) = rows(con.execute("SELECT * FROM v_runs WHERE run_id = ?", [run_id]))
        run = {**found, **run_money(con, found)}
        if run["agent_name"] != choice.agent or not _of(run, choice):
            choice = RunChoice(str(run["agent_name"]))  # the run decides whose runs are listed
        params = {"agent": choice.agent, "prompt": choice.prompt,
                  "candidate": choice.candidate, "limit": RUN_LIST_LIMIT}  # fmt: skip
        runs = rows(con.execute(RUN_LIST, params))
        agents = agent_names(con)
        cases = rows(
            con.execute(
                "SELECT case_id, test_name, status, turn_count, tools_matched, "
                "execution_time_ms FROM test_results WHERE run_id = ? ORDER BY case_index",
                [run_id],
            )
        )
        prompts = rows(
            con.execute(
                "SELECT label, prompt_version, author, description, tags, body, file_path "
                "FROM prompt_versions WHERE agent_slug = ? AND prompt_version = ? "
                "AND body_hash IS NOT DISTINCT FROM ?",
                [run["agent_slug"], run["prompt_version"], run["prompt_body_hash"]],
            )
        )
        detail = _case(con, run_id, case_id) if case_id else None
    run_file = load_run_file(run.get("source_path"), run_id)
    config: dict[str, Any] = {}
    if run_file.run is not None:
        config = run_file.run.metadata.agent_config.model_dump(mode="json", exclude_none=True)
        if detail is not None:
            detail.result = _result_of(run_file.run, detail.case)
    return Explorer(
        run=run,
        runs=runs,
        agents=agents,
        choice=choice,
        cases=cases,
        prompt=prompts[0] if prompts else {},
        run_file=run_file,
        detail=detail,
        config=config,
    )


def _of(run: dict[str, Any], choice: RunChoice) -> bool:
    """Whether ``run`` is of ``choice``'s prompt version and candidate (when it names them)."""
    return choice.prompt in (None, run["prompt_version"]) and choice.candidate in (
        None, run["model_candidate"])  # fmt: skip


def _newest(con: duckdb.DuckDBPyConnection, choice: RunChoice) -> str:
    """The newest run of ``choice`` (of the history when it names no agent), or a page that
    says the link names runs the history does not have."""
    if choice.agent is None:
        found = con.execute(
            "SELECT run_id FROM eval_runs ORDER BY finished_at DESC, run_id DESC LIMIT 1"
        ).fetchone()
    else:
        params = {"agent": choice.agent, "prompt": choice.prompt,
                  "candidate": choice.candidate, "limit": 1}  # fmt: skip
        found = con.execute(RUN_LIST, params).fetchone()
    if not found:
        raise PageError(
            "No such runs",
            f"No run in the history is of {label(c for c in astuple(choice) if c)}. Pick an "
            "agent on this page or a cell on the Matrix page.",
        )
    return str(found[0])


def _case(con: duckdb.DuckDBPyConnection, run_id: str, case_id: str) -> CaseDetail:
    found = rows(
        con.execute(
            "SELECT * FROM test_results WHERE run_id = ? AND case_id = ?", [run_id, case_id]
        )
    )
    if not found:
        raise PageError(
            "Case not found",
            f"Run {run_id[:12]} has no case {case_id!r}. Pick a case from the run's list.",
        )
    metrics = rows(
        con.execute(
            "SELECT turn_index, metric_name, kind, score, raw_score, unit, threshold, "
            "direction, passed, error, reasoning, judge_model FROM metric_results "
            "WHERE run_id = ? AND case_id = ? ORDER BY turn_index NULLS FIRST, metric_index",
            [run_id, case_id],
        )
    )
    tools = rows(
        con.execute(
            "SELECT turn_index, call_index, name, args, result, bytes, duration_ms, error "
            "FROM tool_invocations WHERE run_id = ? AND case_id = ? ORDER BY call_index",
            [run_id, case_id],
        )
    )
    for tool in tools:
        tool["args"] = _pretty(tool["args"])
        tool["result"] = _pretty(tool["result"])
    errors = rows(
        con.execute(
            "SELECT source, name, turn_index, message FROM v_errors "
            "WHERE run_id = ? AND case_id = ? ORDER BY source, turn_index NULLS FIRST",
            [run_id, case_id],
        )
    )
    return CaseDetail(case=found[0], metrics=metrics, tools=tools, errors=errors, result=None)


def _pretty(text: str | None) -> str:
    if text is None:
        return "null"
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _result_of(run: EvalRun, case: dict[str, Any]) -> TestResult | None:
    from holodeck_core.history.rows import derived_case_ids

    results = run.report.results
    ids = derived_case_ids(results)
    for case_id, result in zip(ids, results, strict=True):
        if case_id == case["case_id"]:
            return result
    return None
