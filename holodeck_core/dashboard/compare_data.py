"""Compare data: two or three runs against a chosen baseline.

Flips and metric deltas come from :func:`holodeck_core.history.queries.compare_runs` (the
same comparison as ``holodeck history compare``, with its paired verdict: raw and adjusted p);
flaky cases from ``v_flaky_cases``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from holodeck_core.dashboard.cost_data import run_money
from holodeck_core.dashboard.data import (
    RUNS,
    PageError,
    agent_names,
    connect,
    require_runs,
    resolve,
    rows,
)
from holodeck_core.dashboard.explorer_data import load_run_file
from holodeck_core.history.store import History

if TYPE_CHECKING:
    import duckdb

    from holodeck_core.history.queries import Comparison

MAX_RUNS = 3
PICKER_LIMIT = 200
MODEL_PARAMS = ("temperature", "max_tokens", "top_p")


@dataclass
class ConfigRow:
    label: str
    values: list[str]

    @property
    def differs(self) -> bool:
        return len(set(self.values)) > 1


@dataclass
class CaseRow:
    case_id: str
    test_name: str | None
    statuses: list[str | None]
    """One per run, in the page's order (None: the run does not have the case)."""
    flaky: bool


@dataclass
class CompareData:
    runs: list[dict[str, Any]]
    baseline: int
    """Index of the baseline in ``runs``."""
    comparisons: list[Comparison | None]
    """Each run against the baseline (None for the baseline itself)."""
    config: list[ConfigRow]
    prompt_diffs: list[str]
    matrix: list[CaseRow]
    picker: list[dict[str, Any]]
    reason: str = ""
    """Why only the picker is shown, when the link named runs."""
    agent: str = ""
    """The agent whose runs are compared and offered."""
    agents: list[str] = field(default_factory=list)
    """Every agent in the history (the agent filter)."""


def picker(con: duckdb.DuckDBPyConnection, agent: str) -> list[dict[str, Any]]:
    """The runs the pickers offer: ``agent``'s newest (Compare pairs runs of one agent)."""
    return rows(
        con.execute(
            "SELECT r.run_id, r.agent_name, r.prompt_version, r.model_candidate, "
            "r.finished_at, r.pass_rate FROM eval_runs r WHERE r.agent_name = ? "
            "ORDER BY r.finished_at DESC, r.run_id DESC LIMIT ?",
            [agent, PICKER_LIMIT],
        )
    )


def chosen_agent(con: duckdb.DuckDBPyConnection, ids: list[str], agent: str | None) -> str:
    """The agent whose runs Compare offers: the baseline's when runs are named, else the
    link's ``agent``, else the newest run's."""
    if ids:
        sql, params = "SELECT agent_name FROM eval_runs WHERE run_id = ?", [ids[0]]
    elif agent:
        return agent
    else:
        sql, params = "SELECT agent_name FROM eval_runs ORDER BY finished_at DESC LIMIT 1", []
    found = con.execute(sql, params).fetchone()
    return str(found[0]) if found else ""


def other_agents(con: duckdb.DuckDBPyConnection, ids: list[str], agent: str) -> str:
    """Why runs of several agents are not compared ("" when they are all ``agent``'s)."""
    others = sorted({str(a) for (a,) in con.execute(
        f"SELECT agent_name FROM eval_runs WHERE run_id IN ({', '.join('?' for _ in ids)})",
        ids).fetchall()} - {agent})  # fmt: skip
    if not others:
        return ""
    return (f"The link names runs of {', '.join(others)} beside {agent}'s: Compare pairs runs "
            f"of one agent, so only {agent}'s runs are offered.")  # fmt: skip


def previous_of(con: duckdb.DuckDBPyConnection, ref: str) -> list[str]:
    """The previous run of a run's configuration (agent, prompt version, candidate), and the
    run."""
    run_id = resolve(con, ref)
    found = con.execute("SELECT previous_run_id FROM v_runs WHERE run_id = ?", [run_id]).fetchone()
    if not found or found[0] is None:
        raise PageError(
            "No previous run",
            f"Run {run_id[:12]} is the first run of its configuration: there is nothing "
            "before it to compare with. Pick two runs on the Compare page.",
        )
    return [str(found[0]), run_id]


def compare(
    db: History,
    refs: list[str],
    baseline_ref: str | None,
    previous: str | None = None,
    agent: str | None = None,
) -> CompareData:
    """``refs`` (the first is the baseline unless ``baseline_ref`` says), or the run
    ``previous`` against the run before it; runs of one agent only (``agent`` when no run is
    named)."""
    from holodeck_core.history.queries import compare_runs

    if len(refs) > MAX_RUNS:
        raise PageError(
            "Too many runs", f"Compare takes two or three runs; the link names {len(refs)}."
        )
    with connect(db) as con:
        require_runs(con, db)
        if previous:
            refs = previous_of(con, previous)
        ids = list(dict.fromkeys(resolve(con, ref) for ref in refs))
        agent = chosen_agent(con, ids, agent)
        choices = picker(con, agent)
        mixed = other_agents(con, ids, agent) if ids else ""
        if len(ids) < 2 or mixed:
            return CompareData([], 0, [], [], [], [], choices, mixed or _why_picker(refs, ids),
                               agent, agent_names(con))  # fmt: skip
        base_id = resolve(con, baseline_ref) if baseline_ref else ids[0]
        if base_id not in ids:
            raise PageError(
                "Baseline not among the runs",
                f"baseline={baseline_ref!r} is not one of the compared runs; pick one of them.",
            )
        found = [rows(con.execute(f"SELECT * FROM {RUNS} WHERE run_id = ?", [i]))[0] for i in ids]
        runs = [{**run, **run_money(con, run)} for run in found]
        # runs picked by hand are compared even when one is an infrastructure failure (the
        # matrix shows what errored); the flaky marks still leave failures out
        comparisons = [
            None if i == base_id else compare_runs(con, base_id, i, include_failed=True)
            for i in ids
        ]
        matrix = _matrix(con, runs)
        bodies = {i: _body(con, run) for i, run in zip(ids, runs, strict=True)}
        names = agent_names(con)
    base = ids.index(base_id)
    config = _config(runs)
    diffs = [
        "" if k == base else _diff(bodies[ids[base]], bodies[i], runs[base], runs[k])
        for k, i in enumerate(ids)
    ]
    return CompareData(runs, base, comparisons, config, diffs, matrix, choices, "", agent, names)


def _why_picker(refs: list[str], ids: list[str]) -> str:
    if not ids:
        return ""
    if len(refs) > 1:
        return (f"The link names run {ids[0][:12]} {len(refs)} times: a run compared with "
                "itself shows nothing. Pick another run.")  # fmt: skip
    return f"The link names one run ({ids[0][:12]}): Compare needs two or three. Pick another."


def _matrix(con: duckdb.DuckDBPyConnection, runs: list[dict[str, Any]]) -> list[CaseRow]:
    ids = [r["run_id"] for r in runs]
    statuses: dict[str, list[str | None]] = {}
    names: dict[str, str | None] = {}
    for k, run_id in enumerate(ids):
        for case_id, name, status in con.execute(
            "SELECT case_id, test_name, status FROM test_results WHERE run_id = ? "
            "ORDER BY case_index",
            [run_id],
        ).fetchall():
            statuses.setdefault(case_id, [None] * len(ids))[k] = status
            names.setdefault(case_id, name)
    flaky = {
        str(r[0])
        for r in con.execute(
            "SELECT DISTINCT case_id FROM v_flaky_cases WHERE (agent_slug, prompt_version) IN "
            f"({', '.join('(?, ?)' for _ in runs)})",
            [v for r in runs for v in (r["agent_slug"], r["prompt_version"])],
        ).fetchall()
    }
    return [
        CaseRow(case_id, names[case_id], found, case_id in flaky)
        for case_id, found in statuses.items()
    ]


def _body(con: duckdb.DuckDBPyConnection, run: dict[str, Any]) -> str | None:
    found = con.execute(
        "SELECT body FROM prompt_versions WHERE agent_slug = ? AND prompt_version = ? "
        "AND body_hash IS NOT DISTINCT FROM ?",
        [run["agent_slug"], run["prompt_version"], run["prompt_body_hash"]],
    ).fetchone()
    return found[0] if found else None


def _diff(before: str | None, after: str | None, base: dict[str, Any], run: dict[str, Any]) -> str:
    if before is None or after is None:
        return "(a prompt body is not in the history: its snapshot was not registered)"
    if before == after:
        return ""
    return "\n".join(
        difflib.unified_diff(
            before.splitlines(),
            after.splitlines(),
            fromfile=f"{base['prompt_version']} (baseline)",
            tofile=str(run["prompt_version"]),
            lineterm="",
        )
    )


def _config(runs: list[dict[str, Any]]) -> list[ConfigRow]:
    def text(value: Any) -> str:
        return "-" if value is None else str(value)

    models = []
    for run in runs:
        loaded = load_run_file(run.get("source_path"), run["run_id"]).run
        models.append(loaded.metadata.agent_config.model if loaded is not None else None)
    config = [
        ConfigRow(label, [text(r[column]) for r in runs])
        for label, column in (
            ("agent", "agent_name"),
            ("prompt version", "prompt_version"),
            ("prompt body", "prompt_body_hash"),
            ("model", "model_name"),
            ("provider", "model_provider"),
            ("judge model", "judge_model"),
            ("test set", "dataset_hash"),
            ("config hash", "config_hash"),
            ("git commit", "git_commit"),
        )
    ]
    for row in config:
        if row.label in ("prompt body", "test set", "config hash"):
            row.values = [v[:12] for v in row.values]
    for param in MODEL_PARAMS:
        config.append(
            ConfigRow(param, [text(getattr(m, param, None)) if m else "?" for m in models])
        )
    return config
