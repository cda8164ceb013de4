"""The run factory and sample history shared by the ``test_history_*`` modules (and the
dashboard, lake, trials and object-storage tests): EvalRuns built with the real models
(``make_run``: one letter per case), the five-run ``HISTORY``, read-only ``query``/``counts`` on a
DuckDB file, ``run_cli`` for ``holodeck history``, and the ``db``/``history`` fixtures."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from holodeck_core.cli.main import main
from holodeck_core.history import schema
from holodeck_core.history.ingest import IngestReport, prepare_run, write_batch
from holodeck_core.history.store import History
from holodeck_core.models import (
    Agent,
    EvalRun,
    EvalRunMetadata,
    MetricResult,
    PromptVersion,
    ReportSummary,
    TestReport,
    TestResult,
    TokenUsage,
    ToolInvocation,
)
from holodeck_core.models.agent import Instructions
from holodeck_core.models.evaluation import (
    CodeMetric,
    Direction,
    EvaluationConfig,
    Gate,
    RAGMetric,
    StandardMetric,
)
from holodeck_core.models.llm import LLMProvider
from holodeck_core.models.test_case import TestCaseModel
from holodeck_core.models.tools import FunctionTool, ToolMock

SHARED = Path(__file__).resolve().parents[2] / "shared"
HOLODECK = SHARED / "corpus" / "holodeck"
GENERATED = HOLODECK / "generated"

AGENT = "support-bot"
CASES = ("refund-policy", "order-status", "weather-paris", "escalation")
CANARY = "sk-canary-7f3a9c"
T0 = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)


# --------------------------------------------------------------------------- factory


def make_agent(name: str = AGENT, cases: tuple[str, ...] = CASES) -> Agent:
    """An agent using our extensions HoloDeck lacks (variants, latency metric, gate, case
    ids/tags/weights, tool mocks) and a secret that must never reach an export."""
    return Agent(
        name=name,
        model=LLMProvider(provider="openai", name="gpt-4o-mini", api_key=CANARY),
        instructions=Instructions(file="prompts/system.md", variants=["prompts/alt.md"]),
        tools=[
            FunctionTool(
                name="get_weather",
                description="Weather for a city",
                file="tools/weather.py",
                function="get_weather",
                mock=ToolMock(result="sunny"),
            )
        ],
        evaluations=EvaluationConfig(
            model=LLMProvider(provider="openai", name="gpt-4o"),
            metrics=[
                RAGMetric(metric_type="faithfulness", threshold=0.5),
                StandardMetric(metric="latency", threshold=5000),
                CodeMetric(grader="graders:exact_grader", name="exact_grader"),
            ],
            gate=Gate(min_pass_rate=0.8, max_errors=0),
        ),
        test_cases=[
            TestCaseModel(
                id=case,
                name=case.replace("-", " "),
                input=f"Question about {case}?",
                tags=["billing"] if i % 2 == 0 else ["ops"],
                weight=2.0 if i == 0 else 1.0,
                metadata={"priority": "high" if i == 0 else "normal"},
            )
            for i, case in enumerate(cases)
        ],
    )


def make_result(
    case: str, status: str, when: datetime, *, ms: int = 400, tool_error: str | None = None
) -> TestResult:
    """A consistent case: PASS meets every threshold, FAIL misses faithfulness, ERROR never
    got an answer (model timeout) and its judge failed too."""
    metrics: list[MetricResult] = []
    if status == "ERROR":
        metrics.append(
            MetricResult(metric_name="faithfulness", kind="rag", passed=None, error="judge timeout")
        )
    else:
        score = 0.9 if status == "PASS" else 0.2
        metrics.append(
            MetricResult(
                metric_name="faithfulness",
                kind="rag",
                score=score,
                raw_score=score,
                threshold=0.5,
                passed=status == "PASS",
                model_used="gpt-4o",
            )
        )
        metrics.append(
            MetricResult(
                metric_name="latency",
                raw_score=float(ms),
                threshold=5000,
                direction=Direction.LOWER_IS_BETTER,
                unit="ms",
                passed=True,
            )
        )
    tools = []
    if case == "weather-paris" and status != "ERROR":
        tools.append(
            ToolInvocation.of(
                "get_weather", {"city": "Paris"}, None if tool_error else "sunny", error=tool_error
            )
        )
    return TestResult(
        test_id=case,
        test_name=case.replace("-", " "),
        test_input=f"Question about {case}?",
        agent_response=None if status == "ERROR" else f"Answer about {case}.",
        tool_calls=[t.name for t in tools],
        tool_invocations=tools,
        metric_results=metrics,
        ground_truth=f"Answer about {case}.",
        passed=status == "PASS",
        status=status,
        execution_time_ms=ms,
        errors=["model timeout"] if status == "ERROR" else [],
        timestamp=when.isoformat(),
        token_usage=None
        if status == "ERROR"
        else TokenUsage(prompt_tokens=20, completion_tokens=10, total_tokens=30),
        tags=["billing"] if case in ("refund-policy", "weather-paris") else ["ops"],
        weight=2.0 if case == "refund-policy" else 1.0,
    )


def ingest_runs(
    db: History,
    runs: Iterable[EvalRun],
    *,
    prompts_dir: Path | None = None,
    lock_timeout: float | None = None,
) -> IngestReport:
    """In-memory runs into a history in one batch (the product ingests EvalRun files)."""
    prepared = [prepare_run(run, prompts_dir=prompts_dir) for run in runs]
    return write_batch(db, prepared, lock_timeout=lock_timeout)


def make_run(
    statuses: str,
    when: datetime,
    *,
    run_id: str,
    prompt: str = "v1",
    trigger: str = "nightly",
    cases: tuple[str, ...] = CASES,
    dataset_hash: str | None = None,
    cost: float | None = 0.01,
    tool_error: str | None = None,
    agent: Agent | None = None,
    prompt_body: str | None = None,
    partitioned: bool = True,
) -> EvalRun:
    """``statuses`` is one letter per case: P, F or E. The prompt's body is ``prompt_body``
    (default: the label); ``partitioned`` runs carry the prompt as their partition key."""
    letters = {"P": "PASS", "F": "FAIL", "E": "ERROR"}
    results = [
        make_result(
            case,
            letters[s],
            when - timedelta(seconds=len(cases) - i),
            ms=300 + 100 * i,
            tool_error=tool_error,
        )
        for i, (case, s) in enumerate(zip(cases, statuses, strict=True))
    ]
    summary = ReportSummary.from_results(results, wall_time_ms=1500).model_copy(
        update={"cost_usd": cost}
    )
    agent = agent or make_agent(cases=cases)
    return EvalRun(
        report=TestReport(
            agent_name=agent.name,
            agent_config_path="agent.yaml",
            results=results,
            summary=summary,
            timestamp=when.isoformat(),
            holodeck_version="holodeck-pipelines 0.1.0",
            environment={"python": "3.11", "execution_config": {"parallel_test_cases": 8}},
        ),
        metadata=EvalRunMetadata(
            agent_config=agent,
            prompt_version=PromptVersion(
                version=prompt,
                source="file",
                file_path="prompts/system.md",
                body_hash=hashlib.sha256((prompt_body or prompt).encode()).hexdigest(),
                tags=["support"],
            ),
            holodeck_version="holodeck-pipelines 0.1.0",
            cli_args=["test", "agent.yaml"],
            git_commit="abc1234",
            run_id=run_id,
            config_hash="c" * 64,
            dataset_hash=dataset_hash or hashlib.sha256(",".join(cases).encode()).hexdigest(),
            trigger=trigger,
            started_at=(when - timedelta(seconds=2)).isoformat(),
            partition_key=prompt if partitioned else None,
            provenance={"price_table": "2026-05"},
        ),
    )


def write_run(folder: Path, run: EvalRun, name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"{run.metadata.run_id}.json")
    path.write_text(run.to_json(), encoding="utf-8")
    return path


def day(n: int, hour: int = 8) -> datetime:
    return T0 + timedelta(days=n, hours=hour - 8)


HISTORY = (
    # run id, prompt, when, statuses (refund-policy, order-status, weather-paris, escalation)
    ("r1", "v2", day(0, 8), "PPFP", "nightly"),
    ("r2", "v2", day(0, 20), "PFFP", "manual"),
    ("r3", "v2", day(1, 8), "PPEP", "nightly"),
    ("r4", "v3", day(2, 8), "PPPF", "nightly"),
    ("r5", "v3", day(3, 8), "PFPF", "nightly"),
)


def build_history(db: Path) -> None:
    """A small hand-made history whose view results are worked out in the tests."""
    runs = [
        make_run(
            statuses,
            when,
            run_id=rid,
            prompt=prompt,
            trigger=trigger,
            tool_error="upstream 503" if rid == "r5" else None,
        )
        for rid, prompt, when, statuses, trigger in HISTORY
    ]
    report = ingest_runs(db, runs)
    assert report.ingested == [r[0] for r in HISTORY]


def query(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def counts(db: Path) -> dict[str, int]:
    return {t: query(db, f"SELECT count(*) FROM {t}")[0][0] for t in schema.TABLES}


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["history", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "history.duckdb"


@pytest.fixture
def history(db: Path) -> Path:
    build_history(db)
    return db
