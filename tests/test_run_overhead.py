"""What keeps a run's own overhead down (docs/benchmarks.md), held as behaviour, never as a
time: the collector relaxed while the cases run and restored after, and redaction that copies
only what it changes."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.cli import console
from holodeck_core.cli.main import main
from holodeck_core.defaults import RUN_GC_YOUNG_THRESHOLD
from holodeck_core.engine import record
from holodeck_core.models import EvalRun
from holodeck_core.redaction import REDACTED, redact
from holodeck_core.runner.collector import relaxed_collector
from holodeck_core.testing import run_model_server

SECRET = "sk-overhead-secret-0123456789"


def run_on_agent(code: str, agent: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -c CODE AGENT`` in a process of its own, as a user's command runs (this
    repository importable, ``env`` added to the environment)."""
    return subprocess.run(
        [sys.executable, "-c", code, str(agent)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), **env},
        timeout=120,
        check=False,
    )


def write_agent(folder: Path, url: str, cases: int) -> Path:
    lines = "".join(
        f"  - {{id: c{i}, input: 'case {i}', ground_truth: 'answer'}}\n" for i in range(cases)
    )
    agent = folder / "agent.yaml"
    agent.write_text(
        textwrap.dedent(f"""\
        name: overhead
        model: {{provider: openai, name: m, endpoint: "{url}", api_key: {SECRET}}}
        instructions: {{inline: "Answer."}}
        evaluations:
          metrics: [{{type: standard, metric: equality}}]
        test_cases:
        """)
        + lines
    )
    return agent


def test_a_run_relaxes_the_collector_while_its_cases_run_and_restores_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = (gc.get_threshold(), gc.get_freeze_count(), gc.isenabled())
    seen: list[tuple[int, int]] = []
    case_done = console.Progress.case_done

    def recording(self: console.Progress, *args: Any) -> None:
        seen.append((gc.get_threshold()[0], gc.get_freeze_count()))
        case_done(self, *args)

    monkeypatch.setattr(console.Progress, "case_done", recording)
    recorded: list[tuple[int, int]] = []
    save = record.save_eval_run

    def saving(*args: Any) -> Any:  # the files and the history are written relaxed too
        recorded.append((gc.get_threshold()[0], gc.get_freeze_count()))
        return save(*args)

    monkeypatch.setattr(record, "save_eval_run", saving)
    rules = {"rules": [{"match": {"user": "case"}, "reply": "answer"}]}
    with run_model_server(rules) as server:
        agent = write_agent(tmp_path, server.openai_base_url, 3)
        assert main(["test", str(agent), "-q"]) == 0
    assert len(seen) == 3
    # while the cases ran: young collections rarer, what was alive before frozen
    assert all(threshold >= RUN_GC_YOUNG_THRESHOLD and frozen > 0 for threshold, frozen in seen)
    [(threshold, frozen)] = recorded
    assert threshold >= RUN_GC_YOUNG_THRESHOLD and frozen > 0
    # afterwards the process collects as before (a Dagster worker runs on)
    assert (gc.get_threshold(), gc.get_freeze_count(), gc.isenabled()) == before
    [path] = tmp_path.glob("results/*/*/*.json")
    run = EvalRun.model_validate_json(path.read_text())
    assert run.report.summary.passed == 3 and SECRET not in path.read_text()


def test_overlapping_runs_restore_the_collector_once_the_last_ends() -> None:
    before = (gc.get_threshold(), gc.get_freeze_count())
    with relaxed_collector():
        with relaxed_collector():
            assert gc.get_threshold()[0] >= RUN_GC_YOUNG_THRESHOLD
        assert gc.get_threshold()[0] >= RUN_GC_YOUNG_THRESHOLD and gc.get_freeze_count() > 0
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
    with pytest.raises(RuntimeError), relaxed_collector():
        raise RuntimeError("a run that fails restores it too")
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_redaction_copies_only_what_it_changes(tmp_path: Path) -> None:
    rules = {"rules": [{"match": {"user": "case"}, "reply": "answer"}]}
    with run_model_server(rules) as server:
        agent = write_agent(tmp_path, server.openai_base_url, 2)
        assert main(["test", str(agent), "-q"]) == 0
    [path] = tmp_path.glob("results/*/*/*.json")
    run = EvalRun.model_validate_json(path.read_text())
    # a clean EvalRun is not dumped, copied and validated again: it comes back itself
    assert redact(run, [SECRET]) is run
    clean = {"a": [1, "x", {"b": None}], "c": 2.5}
    assert redact(clean) is clean
    # where something changes, the containers on the way to it are new, the rest shared
    data: dict[str, Any] = {"keep": {"deep": ["x"]}, "case": {"text": f"echo {SECRET}", "n": 1}}
    out = redact(data, [SECRET])
    assert out["case"]["text"] == f"echo {REDACTED}" and out["case"]["n"] == 1
    assert out is not data and out["case"] is not data["case"] and out["keep"] is data["keep"]
    assert data["case"]["text"] == f"echo {SECRET}"  # the input is never changed
    # a model with a secret in it is still redacted and valid, as before
    first = run.report.results[0].model_copy(update={"agent_response": f"a {SECRET}"})
    results = [first, *run.report.results[1:]]
    dirty = run.model_copy(update={"report": run.report.model_copy(update={"results": results})})
    redacted = redact(dirty, [SECRET])
    assert redacted is not dirty and SECRET not in redacted.model_dump_json()
    written = json.loads(redacted.model_dump_json())["report"]["results"]
    assert written[0]["agent_response"] == f"a {REDACTED}"
    # tuples come back as lists, as they always did
    assert redact({"t": (1, "y")}) == {"t": [1, "y"]}


def test_the_estimate_from_sizes_finds_the_project_and_its_prices_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from holodeck_core.config import project

    calls: list[Path] = []
    discover = project.Project.discover.__func__  # type: ignore[attr-defined]

    def counting(cls: type[project.Project], start: Path | None = None) -> project.Project:
        calls.append(Path(start or "."))
        return discover(cls, start)  # type: ignore[no-any-return]

    monkeypatch.setattr(project.Project, "discover", classmethod(counting))
    rules = {"rules": [{"match": {"user": "case"}, "reply": "answer"}]}
    with run_model_server(rules) as server:
        agent = write_agent(tmp_path, server.openai_base_url, 30)
        assert main(["test", str(agent), "-q"]) == 0
    # a handful for the run (its results folder, its history...), never one per case
    assert 0 < len(calls) < 10


def test_a_runs_rows_reach_duckdb_as_one_json_literal_with_every_value_intact() -> None:
    """The history insert of a run (holodeck_core/history/tabular.py): the rows as one JSON
    literal, not a VALUES list DuckDB parses value by value; what lands is what the
    literals wrote, awkward values included, and a value JSON cannot hold (NaN) still goes
    in as a literal."""
    import datetime as dt

    import duckdb

    from holodeck_core.history import schema, tabular

    columns: tuple[str, ...] = ("run_id", "case_id", "case_index", "status", "passed")
    columns += ("test_input", "errors", "tool_calls", "cost_usd", "metadata", "executed_at")
    columns += ("weight",)
    aware = dt.datetime(2026, 12, 6, 5, 0, 1, 250000, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    awkward = ('it\'s "quoted"', "nul\0inside", "é ✓ \\n", "'); DROP TABLE x; --")
    rows: list[tuple[Any, ...]] = [
        (
            "r",
            f"c{i}",
            i,
            "PASS",
            i % 2 == 0,
            text,
            [text, "a,b"],
            [],
            1e-05 * i,
            '{"k": 1}',
            aware,
            None,
        )
        for i, text in enumerate(awkward)
    ]
    rows.append(("r", "nan", 9, "FAIL", False, None, None, None, float("nan"), None, None, 2.5))
    written = {}
    for way in ("insert", "values"):
        con = duckdb.connect()
        schema.create(con)
        sql = "INSERT INTO test_results BY NAME {rows}"
        if way == "insert":
            for part in (rows[:-1], rows[-1:]):  # as one JSON literal; the NaN as literals
                tabular.insert(con, sql, [tabular.TableRows("test_results", columns, part)])
        else:
            con.execute(sql.format(rows=tabular.values_select(columns, rows)))
        written[way] = con.execute(
            f"SELECT {', '.join(columns)} FROM test_results ORDER BY case_index"
        ).fetchall()
    assert len(written["insert"]) == len(rows)
    assert repr(written["insert"]) == repr(written["values"])  # NaN == NaN only as text
    assert written["insert"][1][5] == "nul\0inside"
    assert written["insert"][0][10] == dt.datetime(2026, 12, 6, 3, 0, 1, 250000)  # in UTC
    assert tabular.json_select(columns, rows[:4]) is not None
    assert tabular.json_select(columns, rows) is None  # NaN: written as literals


def test_the_command_line_process_collects_young_objects_less_often_from_its_start() -> None:
    """``holodeck``'s console script (holodeck_core.cli.main.entrypoint) relaxes the collector
    before any command imports its modules; ``main()`` called in a process leaves it alone."""
    code = (
        "import gc, sys\n"
        "from holodeck_core.cli import main as cli\n"
        "before = gc.get_threshold()[0]\n"
        "cli.main = lambda: print(before, gc.get_threshold()[0]) or 0\n"
        "cli.entrypoint()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    before, during = map(int, proc.stdout.split())
    assert before < RUN_GC_YOUNG_THRESHOLD <= during


def test_a_run_estimated_from_the_history_imports_no_pandas_nor_httpx(tmp_path: Path) -> None:
    """The estimate before a run reads the previous run's costs with its values as SQL
    literals: a bound Python parameter makes DuckDB import pandas (~1 s before the first
    call of every run once a history exists). httpx is for ``url:`` files only (0.14 s)."""
    code = (
        "import sys; from holodeck_core.cli.main import main\n"
        "assert main(['test', sys.argv[1], '-q']) == 0\n"
        "assert main(['test', sys.argv[1], '-q', '--fresh']) == 0\n"
        "print([m for m in ('pandas', 'pyarrow', 'httpx') if m in sys.modules])\n"
    )
    rules = {"rules": [{"match": {"user": "case"}, "reply": "answer"}]}
    with run_model_server(rules) as server:
        agent = write_agent(tmp_path, server.openai_base_url, 3)
        proc = run_on_agent(code, agent, PYTHONUNBUFFERED="1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert any("estimate:" in line and "from run " in line for line in lines), proc.stdout
    assert lines[-1] == "[]"


def test_results_checked_clean_as_cases_finish_skip_the_walk_and_the_others_do_not(
    tmp_path: Path,
) -> None:
    """Each case's result is checked for secrets as it finishes; the EvalRun's walk at the
    end takes the clean ones as they are. A reply that echoes the key (the agent's answer,
    then the metric's view of it) is still redacted everywhere a run writes."""
    from tests.hostile import everything_written

    rules = {
        "rules": [
            {"match": {"user": "case 1"}, "reply": f"the key is {SECRET}"},
            {"match": {"user": "case"}, "reply": "answer"},
        ]
    }
    with run_model_server(rules) as server:
        agent = write_agent(tmp_path, server.openai_base_url, 3)
        assert main(["test", str(agent), "-q"]) == 1  # case 1 answered something else
    agent.unlink()  # the user's own file holds the key
    written = everything_written(tmp_path)
    assert SECRET not in written and f"the key is {REDACTED}" in written
    [path] = tmp_path.glob("results/*/holodeck-pipelines/*.json")
    run = EvalRun.model_validate_json(path.read_text())
    answers = {r.test_id: r.agent_response for r in run.report.results}
    assert answers == {"c0": "answer", "c1": f"the key is {REDACTED}", "c2": "answer"}


def test_a_result_checked_before_a_secret_was_registered_is_walked_again() -> None:
    from holodeck_core.models import TestResult
    from holodeck_core.redaction import CheckedAhead, register_secret

    late = "sk-registered-later-0123456789"
    result = TestResult.model_validate(
        {
            "test_input": "q",
            "agent_response": f"said {late}",
            "passed": False,
            "execution_time_ms": 1,
            "timestamp": "2026-12-06T08:00:00Z",
        }
    )
    other = result.model_copy(update={"agent_response": "fine"})
    checked = CheckedAhead([SECRET])
    checked.check(result)
    assert checked.all_clean([result]) and not checked.all_clean([result, other])
    register_secret(late)
    assert not checked.all_clean([result])
    checked.check(result)  # checked again under the new secret: it holds one
    assert not checked.all_clean([result])


def test_the_runs_identity_is_worked_out_ahead_once_and_again_after_a_new_secret(
    tmp_path: Path,
) -> None:
    """The EvalRun's config hash, commit and the agent config's redaction check are worked
    out on the preload thread while the calls are in flight (``Suite.identity``); a secret
    registered after that, which the agent config holds, is still redacted in the EvalRun."""
    from holodeck_core.config.loader import load_agent
    from holodeck_core.engine.suite import load_suite
    from holodeck_core.models import TestResult
    from holodeck_core.redaction import register_secret
    from holodeck_core.runner import fingerprint as fp

    late = "sk-identity-later-0123456789"
    agent = write_agent(tmp_path, "http://127.0.0.1:9/v1", 2)
    agent.write_text(
        agent.read_text().replace("name: overhead", f"name: overhead\ndescription: 'holds {late}'")
    )
    suite = load_suite(load_agent(agent))
    first = suite.identity()
    assert suite.identity() is first  # once
    assert first.config_hash == fp.config_hash(suite.loaded, suite.prompt.text)
    assert first.dataset_hash == fp.dataset_hash(suite.cases)

    register_secret(late)
    again = suite.identity()
    assert again is not first and again.config_hash != first.config_hash
    result = TestResult.model_validate(
        {
            "test_id": "c0",
            "test_input": "case 0",
            "agent_response": "answer",
            "passed": True,
            "execution_time_ms": 1,
            "timestamp": "2026-12-06T08:00:00Z",
        }
    )
    run = suite.eval_run([result])
    assert run.metadata.config_hash == again.config_hash
    assert late not in run.to_json()
    assert run.metadata.agent_config.description == f"holds {REDACTED}"
