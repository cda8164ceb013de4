"""Broken agent.yaml files: each exits 2 with a message naming the file and the field, and
never a traceback. Run through the real CLI entry point."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from holodeck_core.cli.main import main

BASE = """\
name: broken
model:
  provider: openai
  name: gpt-4o-mini
instructions:
  inline: Answer briefly.
"""
CASES = """\
test_cases:
  - name: one
    input: hello
"""
PROMPT = "---\nversion: v1\n---\nBe brief.\n"


@dataclass
class Broken:
    id: str
    yaml: str
    expect: list[str]
    files: dict[str, str] = field(default_factory=dict)
    agent_name: str = "agent.yaml"


def case(id: str, yaml: str, *expect: str, **files: str) -> Broken:
    return Broken(id=id, yaml=textwrap.dedent(yaml), expect=list(expect), files=files)


BROKEN = [
    case("yaml-syntax", BASE + "tools: [a, b\n", "agent.yaml:7:", "YAML syntax error"),
    case("yaml-tab-indent", BASE + "test_cases:\n\t- input: x\n", "YAML syntax error"),
    case("not-a-mapping", "- just\n- a list\n", "YAML mapping"),
    case("empty-file", "", "YAML mapping"),
    case("unknown-top-key", BASE + "nmae: x\n" + CASES, "nmae", "did you mean 'name'"),
    case(
        "unknown-model-key",
        BASE.replace("name: gpt", "temprature: 1\n  name: gpt"),
        "model.temprature",
        "did you mean 'temperature'",
    ),
    case(
        "wrong-type-temperature",
        BASE.replace("name: gpt", "temperature: hot\n  name: gpt"),
        "model.temperature",
        "valid number",
    ),
    case(
        "unknown-provider",
        BASE.replace("provider: openai", "provider: gemini"),
        "model.provider",
        "'openai'",
    ),
    case(
        "missing-model-name",
        BASE.replace("  name: gpt-4o-mini\n", ""),
        "model.name",
        "required field is missing",
    ),
    case(
        "file-and-inline",
        BASE.replace("  inline: Answer briefly.", "  inline: x\n  file: p.md"),
        "instructions",
        "exactly one of 'file' or 'inline'",
    ),
    case(
        "neither-file-nor-inline",
        BASE.replace("  inline: Answer briefly.", "  {}"),
        "instructions",
        "exactly one of 'file' or 'inline'",
    ),
    case(
        "missing-prompt-file",
        BASE.replace("inline: Answer briefly.", "file: nope.md") + CASES,
        "instructions.file",
        "file not found",
        "nope.md",
    ),
    case(
        "malformed-frontmatter",
        BASE.replace("inline: Answer briefly.", "file: p.md") + CASES,
        "p.md",
        "malformed frontmatter",
        **{"p.md": "---\nversion: [v1\n---\nbody\n"},
    ),
    case(
        "bad-version-label",
        BASE.replace("inline: Answer briefly.", "file: p.md") + CASES,
        "p.md",
        "version",
        **{"p.md": "---\nversion: 'v 1/2'\n---\nbody\n"},
    ),
    case(
        "missing-env-var",
        BASE.replace("name: gpt-4o-mini", "name: ${HOLODECK_NO_SUCH_VAR}"),
        "model.name",
        "HOLODECK_NO_SUCH_VAR is not set",
    ),
    case(
        "too-many-files",
        BASE
        + "test_cases:\n  - input: x\n    files:\n"
        + "".join(f"      - {{path: f{i}.txt, type: text}}\n" for i in range(11)),
        "test_cases[0].files",
        "at most 10 files",
    ),
    case(
        "pages-zero",
        BASE + "test_cases:\n  - input: x\n    files:\n"
        "      - {path: a.pdf, type: pdf, pages: [0]}\n",
        "test_cases[0].files[0].pages[0]",
        "greater than or equal to 1",
    ),
    case(
        "file-path-and-url",
        BASE + "test_cases:\n  - input: x\n    files:\n"
        "      - {path: a.pdf, url: 'https://x/a.pdf', type: pdf}\n",
        "test_cases[0].files[0]",
        "exactly one of 'path' or 'url'",
    ),
    case(
        "file-type-unknown",
        BASE + "test_cases:\n  - input: x\n    files:\n      - {path: a.mov, type: movie}\n",
        "test_cases[0].files[0].type",
        "'pdf'",
    ),
    case(
        "file-missing-on-disk",
        BASE + "test_cases:\n  - input: x\n    files:\n      - {path: data/a.pdf, type: pdf}\n",
        "test_cases[0].files[0].path",
        "file not found",
    ),
    case("case-without-input", BASE + "test_cases:\n  - name: empty\n", "test_cases[0]", "'input'"),
    case(
        "case-input-and-turns",
        BASE + "test_cases:\n  - input: x\n    turns: [{input: y}]\n",
        "test_cases[0]",
        "'turns' cannot be combined with input",
    ),
    case(
        "duplicate-test-ids",
        BASE + "test_cases:\n  - {id: a, input: x}\n  - {id: a, input: y}\n",
        "test_cases",
        "ids must be unique; repeated: a",
    ),
    case("duplicate-yaml-keys", BASE + CASES + "name: again\n", "agent.yaml:10:", "duplicate key"),
    case(
        "metric-type-unknown",
        BASE + "evaluations:\n  metrics:\n    - {type: judge}\n",
        "evaluations.metrics[0]",
        "type 'judge' is not one of",
    ),
    case(
        "metric-name-unknown",
        BASE + "evaluations:\n  metrics:\n    - {type: standard, metric: blue}\n",
        "evaluations.metrics[0].metric",
        "'bleu'",
    ),
    case(
        "geval-no-criteria",
        BASE + "evaluations:\n  metrics:\n    - {type: geval, name: G}\n",
        "evaluations.metrics[0].criteria",
        "required field is missing",
    ),
    case(
        "rag-threshold-out-of-range",
        BASE
        + "evaluations:\n  metrics:\n"
        + "    - {type: rag, metric_type: faithfulness, threshold: 1.5}\n",
        "evaluations.metrics[0]",
        "threshold 1.5 is outside 0-1",
    ),
    case(
        "bleu-threshold-in-percent",
        BASE + "evaluations:\n  metrics:\n    - {type: standard, metric: bleu, threshold: 50}\n",
        "evaluations.metrics[0]",
        "threshold 50 is outside 0-1: scores are normalized to 0-1 (write 0.5 for 50 %)",
    ),
    case(
        "geval-threshold-not-a-number",
        BASE
        + "evaluations:\n  metrics:\n"
        + "    - {type: geval, name: G, criteria: c, threshold: .nan}\n",
        "evaluations.metrics[0]",
        "threshold nan is outside 0-1",
    ),
    case(
        "negative-cost-maximum",
        BASE + "evaluations:\n  metrics:\n    - {type: standard, metric: cost, threshold: -1}\n",
        "evaluations.metrics[0]",
        "threshold -1 must be a number >= 0",
    ),
    case(
        "retry-on-failure-too-high",
        BASE
        + "evaluations:\n  metrics:\n    - {type: standard, metric: bleu, retry_on_failure: 5}\n",
        "evaluations.metrics[0].retry_on_failure",
        "less than or equal to 3",
    ),
    case(
        "empty-metrics",
        BASE + "evaluations:\n  metrics: []\n",
        "evaluations.metrics",
        "at least 1 item",
    ),
    case(
        "gate-percent-not-fraction",
        BASE + "evaluations:\n  gate: {min_pass_rate: 80}\n"
        "  metrics:\n    - {type: standard, metric: equality}\n",
        "evaluations.gate.min_pass_rate",
        "less than or equal to 1",
    ),
    case(
        "bad-grader-reference",
        BASE + "evaluations:\n  metrics:\n    - {type: code, grader: not-a-reference}\n",
        "evaluations.metrics[0].grader",
        "should match pattern",
    ),
    case(
        "grader-module-missing",
        BASE + "evaluations:\n  metrics:\n    - {type: code, grader: 'graders.checks:exact'}\n",
        "evaluations.metrics[0].grader",
        "module 'graders.checks' not found",
    ),
    case(
        "grader-function-missing",
        BASE + "evaluations:\n  metrics:\n    - {type: code, grader: 'checks:nope'}\n",
        "evaluations.metrics[0].grader",
        "nope",
        **{"checks.py": "def exact(ctx):\n    return True\n"},
    ),
    case(
        "tool-missing-file",
        BASE + "tools:\n  - {type: function, name: f, description: d, function: g}\n",
        "tools[0].file",
        "required field is missing",
    ),
    case(
        "tool-file-not-found",
        BASE + "tools:\n  - {type: function, name: f, description: d, file: t.py, function: g}\n",
        "tools[0].file",
        "file not found",
    ),
    case(
        "tool-name-with-space",
        BASE
        + "tools:\n  - {type: function, name: my tool, description: d, file: t.py, function: g}\n",
        "tools[0].name",
        "should match pattern",
    ),
    case(
        "duplicate-tool-names",
        BASE
        + "tools:\n  - {type: mcp, name: t, description: d}\n"
        + "  - {type: mcp, name: t, description: d}\n",
        "tools",
        "repeated: t",
    ),
    case(
        "expected-tool-bad-regex",
        BASE
        + "test_cases:\n  - input: x\n    expected_tools: [{name: t, args: {a: {regex: '('}}}]\n",
        "test_cases[0].expected_tools[0].args",
        "regular expression",
    ),
    case(
        "parallel-zero",
        BASE + "execution: {parallel_test_cases: 0}\n",
        "execution.parallel_test_cases",
        "greater than or equal to 1",
    ),
    case(
        "response-format-file-missing",
        BASE + "response_format: schemas/answer.json\n",
        "response_format",
        "file not found",
    ),
    case(
        "test-cases-file-missing",
        BASE + "test_cases_file: data/cases.yaml\n",
        "test_cases_file",
        "file not found",
    ),
    case(
        "test-cases-file-not-a-list",
        BASE + "test_cases_file: cases.yaml\n",
        "cases.yaml",
        "YAML list",
        **{"cases.yaml": "input: x\n"},
    ),
    case(  # HoloDeck 0.7.1 refuses both; we ran both sets before
        "test-cases-and-test-cases-file",
        BASE + CASES + "test_cases_file: cases.yaml\n",
        "agent.yaml:10: test_cases_file",
        "not both",
        **{"cases.yaml": "- input: a\n"},
    ),
    case(  # a key of HoloDeck's observability it does not know (its key is `traces`)
        "observability-tracing",
        BASE + CASES + "observability: {enabled: true, tracing: {enabled: true}}\n",
        "observability.tracing",
        "unknown key",
    ),
    case(
        "optimizer-zero-weight",
        BASE + CASES + "evaluations:\n  metrics: [{metric: bleu}]\n"
        "  optimizer: {loss: {bleu: 0}}\n",
        "evaluations.optimizer.loss",
        "must be > 0",
    ),
    case(
        "optimizer-unknown-key",
        BASE + CASES + "evaluations:\n  metrics: [{metric: bleu}]\n"
        "  optimizer: {loss: {bleu: 1}, budget: 3}\n",
        "evaluations.optimizer.budget",
        "unknown key",
    ),
    case(
        "test-cases-file-bad-case",
        BASE + "test_cases_file: cases.yaml\n",
        "cases.yaml:2:",
        "[1].inputt",
        **{"cases.yaml": "- input: a\n- inputt: b\n"},
    ),
]


@pytest.mark.parametrize("broken", BROKEN, ids=[b.id for b in BROKEN])
def test_broken_config_exits_2_naming_file_and_field(
    broken: Broken, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = tmp_path / broken.agent_name
    agent.write_text(broken.yaml)
    for name, text in broken.files.items():
        (tmp_path / name).write_text(text)
    before = sorted(p.name for p in tmp_path.iterdir())
    code = main(["validate", str(agent)])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 2, text
    assert "Traceback" not in text
    assert str(agent) in text or any(name in text for name in broken.files)
    for expected in broken.expect:
        assert expected in text, f"{expected!r} not in:\n{text}"
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing half-written


def test_missing_agent_file_is_a_clear_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "holodeck_core.cli", "validate", str(tmp_path / "nope.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "agent file not found" in proc.stderr and "Traceback" not in proc.stderr
