"""Redaction never makes a valid document invalid (docs/agent-yaml.md): a piece of a secret in a
case id, a regular expression, a tool name or a grader reference is redacted, and the EvalRun,
the journal and the history still validate and are written."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from holodeck_core.models import EvalRun, StandardMetric, TestCaseModel
from holodeck_core.redaction import PLACEHOLDER, redact
from holodeck_core.testing import run_model_server
from tests.hostile import agent_yaml, everything_written, no_traceback, run_cli

KEY = "sk1234abcdef9999"
PIECE = KEY[:10]  # providers echo a key's first characters; redaction scrubs such pieces


def test_pieces_of_a_secret_in_ids_patterns_and_tool_names_leave_a_valid_eval_run(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "tools.py").write_text(f"def {PIECE}(x: str = '') -> str:\n    return 'done'\n")
    rules = {
        "default": {"reply": "done"},
        "rules": [
            {"match": {"tool_result": True}, "reply": "done"},
            {"match": {"user": "tool"}, "tool_calls": [{"name": PIECE, "arguments": {"x": PIECE}}]},
        ],
    }
    cases = f"""\
        - {{id: {PIECE}, name: by id, input: plain, ground_truth: done}}
        - {{id: case.{PIECE}.2, name: suffixed, input: plain two, ground_truth: done}}
        - name: regex args
          input: call the tool
          ground_truth: done
          expected_tools: [{{name: {PIECE}, args: {{x: {{regex: "^{PIECE}$"}}}}}}]
        """
    extra = textwrap.dedent(f"""\
        tools:
          - {{type: function, name: {PIECE}, description: d, file: tools.py, function: {PIECE}}}
        """)
    metric = f"{{type: standard, metric: regex, pattern: '{PIECE}|done'}}"
    with run_model_server(rules) as server:
        agent = agent_yaml(
            folder, server.openai_base_url, cases, api_key=KEY, extra=extra, metric=metric
        )
        proc = run_cli(["test", str(agent), "-o", str(tmp_path / "report.md")])
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    [path] = sorted((folder / "results").glob("*/holodeck-pipelines/*.json"))
    run = EvalRun.model_validate_json(path.read_text())
    ids = [r.test_id for r in run.report.results]
    assert ids[0] == PLACEHOLDER and ids[1] == f"case.{PLACEHOLDER}.2"
    agent.unlink()  # the user's own files: everything else a run wrote is checked
    (folder / "tools.py").unlink()
    written = everything_written(tmp_path)
    assert PIECE not in written + proc.stdout + proc.stderr
    assert json.loads(
        (sorted((folder / "results").glob("*/holodeck-pipelines/*.json"))[-1]).read_text()
    )


PIECES = st.sampled_from([KEY, PIECE, KEY[:8], "sk1234abcdef"])
TEXT = st.lists(
    PIECES | st.sampled_from(["^", "$", "+", "|", "-", "a", ".", ":", "_"]), min_size=1, max_size=8
).map("".join)


@settings(max_examples=300, deadline=None)
@given(case_id=TEXT, pattern=TEXT)
def test_redacting_a_valid_model_always_gives_a_valid_model(case_id: str, pattern: str) -> None:
    try:
        case = TestCaseModel.model_validate(
            {
                "id": case_id,
                "input": pattern,
                "expected_tools": [{"name": "t", "args": {"x": {"regex": pattern}}}],
            }
        )
        metric = StandardMetric(metric="regex", pattern=pattern)
    except ValueError:
        return  # not valid before redaction: nothing to keep valid
    for model in (case, metric):
        redacted = redact(model, [KEY])
        assert KEY not in redacted.model_dump_json()  # and it validated


def test_a_dagster_partition_with_secret_pieces_in_ids_and_patterns_materializes(
    tmp_path: Path,
) -> None:
    """The same pieces through a materialization: it succeeds, the EvalRun validates, the
    history has the run, and no piece is in the event log or the project's files."""
    import dagster as dg

    from tests.dagster_helpers import geo_folder, history_rows, materialize_v1

    root = tmp_path / "project"
    folder = geo_folder(root, "You answer.")
    with (
        run_model_server({"default": {"reply": "done"}}) as server,
        dg.instance_for_test() as instance,
    ):
        (folder / "agent.yaml").write_text(
            "name: Geo Agent\n"
            f"model: {{provider: openai, name: m, endpoint: '{server.openai_base_url}',"
            f" api_key: {KEY}}}\n"
            "instructions: {file: prompts/v1.md}\n"
            "evaluations: {metrics: [{type: standard, metric: regex,"
            f" pattern: '{PIECE}|done'}}]}}\n"
            "test_cases:\n"
            f"  - {{id: {PIECE}, name: by id, input: plain, ground_truth: done}}\n"
            f"  - {{id: case.{PIECE}.2, name: suffixed, input: two, ground_truth: done}}\n"
        )
        project, result = materialize_v1(root, instance)
        assert result.success
        logs = "\n".join(str(entry) for entry in instance.all_logs(result.run_id))
    assert history_rows(project, "SELECT count(*), max(passed) FROM eval_runs") == [(1, 2)]
    [path] = sorted((folder / "results").glob("*/holodeck-pipelines/*.json"))
    run = EvalRun.model_validate_json(path.read_text())
    assert [r.test_id for r in run.report.results] == [PLACEHOLDER, f"case.{PLACEHOLDER}.2"]
    (folder / "agent.yaml").unlink()  # the user's own file: everything else is checked
    assert PIECE not in logs + everything_written(root)
