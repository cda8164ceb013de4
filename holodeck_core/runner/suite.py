"""Run a suite: every case through the agent and the metrics, concurrently, resumably.

The CLI pipelines each case (run, then score) under one concurrency limit. The Dagster assets
call the two stages separately (:meth:`Suite.execute_all`, :meth:`Suite.evaluate_all`). Both
end with :meth:`Suite.eval_run`. Nothing here aborts the suite for one bad case."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from holodeck_core import __version__
from holodeck_core.agents.base import make_client
from holodeck_core.agents.loop import DEFAULT_MAX_TOOL_TURNS, AgentRunner
from holodeck_core.agents.tools import ToolBox
from holodeck_core.calls.scheduler import CallScheduler, RetryPolicy
from holodeck_core.config.loader import LoadedAgent
from holodeck_core.config.project import Project
from holodeck_core.config.prompts import Prompt, PromptStore
from holodeck_core.errors import ConfigError
from holodeck_core.files import FileLimits
from holodeck_core.metrics.judge import JudgeServices
from holodeck_core.models import (
    EvalRun,
    EvalRunMetadata,
    HierarchicalDocumentTool,
    MCPTool,
    ProviderEnum,
    ReportSummary,
    TestCaseModel,
    TestReport,
    TestResult,
    Tool,
    Trigger,
    VectorstoreTool,
)
from holodeck_core.redaction import redact, redact_argv
from holodeck_core.runner import fingerprint as fp
from holodeck_core.runner.case_run import CaseRun
from holodeck_core.runner.evaluate import CaseEvaluator
from holodeck_core.runner.execute import CaseExecutor, now_iso
from holodeck_core.runner.journal import Journal
from holodeck_core.tools.runtime import ToolContext

DEFAULT_LLM_TIMEOUT = 60.0


@dataclass
class SuiteOptions:
    parallel: int | None = None
    timeout: float | None = None
    limit: int | None = None
    filter: str | None = None
    fresh: bool = False
    prompt_key: str | None = None
    trigger: Trigger = Trigger.CLI
    cli_args: list[str] = field(default_factory=list)
    dagster_run_id: str | None = None
    partition_key: str | None = None
    api_keys: dict[ProviderEnum, str] = field(default_factory=dict)


CaseCallback = Callable[[TestResult, bool], None]


def select_cases(cases: list[TestCaseModel], options: SuiteOptions) -> list[TestCaseModel]:
    """``--filter`` matches a tag exactly or a name / id as a case-insensitive substring."""
    chosen = cases
    if options.filter:
        needle = options.filter.lower()
        chosen = [
            c
            for c in chosen
            if options.filter in c.tags
            or needle in (c.name or "").lower()
            or needle in (c.id or "").lower()
        ]
    if options.limit is not None:
        chosen = chosen[: options.limit]
    return chosen


def resolve_prompt(loaded: LoadedAgent, project: Project, key: str | None) -> tuple[Prompt, str]:
    """The prompt to evaluate and its registered key. The current prompt is registered on the
    way (idempotent), so every run refers to a stored snapshot."""
    store = PromptStore(project.prompts_dir, loaded.agent.name)
    if key is not None:
        snapshot = store.require(key)
        return Prompt(version=snapshot.prompt_version, body=snapshot.body), snapshot.key
    for variant in loaded.variants:
        store.register(variant)
    return loaded.prompt, store.register(loaded.prompt).key


class Suite:
    def __init__(
        self,
        loaded: LoadedAgent,
        options: SuiteOptions | None = None,
        *,
        project: Project | None = None,
    ) -> None:
        self.loaded = loaded
        self.options = options or SuiteOptions()
        self.project = project or Project.discover(loaded.base_dir)
        agent = loaded.agent
        self.cases = select_cases(agent.cases, self.options)
        if not self.cases:
            raise ConfigError(
                "no test cases to run"
                + (f" match --filter {self.options.filter!r}" if self.options.filter else ""),
                file=loaded.display,
            )
        self.prompt, self.prompt_key = resolve_prompt(loaded, self.project, self.options.prompt_key)
        execution = agent.execution
        self.parallel = self.options.parallel or agent.parallel_test_cases
        timeout = self.options.timeout or (execution.llm_timeout if execution else None)
        self.timeout = float(timeout or DEFAULT_LLM_TIMEOUT)
        self.scheduler = CallScheduler(self.parallel, RetryPolicy(timeout=self.timeout))
        toolbox = (
            ToolBox(
                agent.tools,
                loaded.resolve,
                timeout=execution.tool_timeout if execution else None,
                context=ToolContext(
                    base_dir=loaded.base_dir,
                    resolve=loaded.resolve,
                    scheduler=self.scheduler,
                    agent_model=agent.model,
                    client_factory=lambda model: make_client(
                        model, where="tool", fallback_key=self.options.api_keys.get(model.provider)
                    ),
                    cache_dir=self.project.home / "cache",
                    secrets=frozenset(loaded.secrets),
                    timeout=self.timeout,
                ),
            )
            if agent.tools
            else None
        )
        self.toolbox = toolbox
        self.client = make_client(
            agent.model, fallback_key=self.options.api_keys.get(agent.model.provider)
        )
        runner = AgentRunner(
            client=self.client,
            scheduler=self.scheduler,
            system=self.prompt.body,
            toolbox=toolbox,
            response_schema=loaded.response_schema,
            max_tool_turns=(execution.max_tool_turns if execution else None)
            or DEFAULT_MAX_TOOL_TURNS,
            timeout=self.timeout,
        )
        self.executor = CaseExecutor(
            agent=runner,
            base_dir=loaded.base_dir,
            cache_dir=self.project.file_cache_dir
            if not execution or execution.cache_enabled is not False
            else None,
            limits=FileLimits.from_execution(execution),
        )
        self.judges = JudgeServices.for_agent(
            agent,
            self.scheduler,
            project=self.project,
            client_factory=lambda model: make_client(
                model, where="judge", fallback_key=self.options.api_keys.get(model.provider)
            ),
        )
        self.evaluator = CaseEvaluator(
            agent.evaluations.metrics if agent.evaluations else None,
            agent.model.name,
            self.judges.context(base_dir=loaded.base_dir),
            retrieval_tools=retrieval_tool_names(agent.tools or []),
        )
        self.suite_fingerprint = fp.suite_fingerprint(
            loaded, self.prompt.version.body_hash, self.cases
        )
        tools_fp = fp.tools_fingerprint(loaded)
        self.case_fingerprints = {
            case.id or "": fp.case_fingerprint(loaded, self.suite_fingerprint, tools_fp, case)
            for case in self.cases
        }
        self._open_journal()
        self.runs: dict[str, CaseRun] = {}
        self._tools_open = False
        self.started_at = now_iso()
        self._clock = time.perf_counter()

    def _open_journal(self, identities: list[dict[str, object]] | None = None) -> None:
        """The journal of this suite. With live tool runtimes their identities (an MCP
        server's name, version and tool list; an index key) scope it (§7.4), so an upgraded
        server is never answered from a journal its predecessor wrote."""
        key = self.suite_fingerprint
        if identities:
            key = f"{key}-{fp.digest(identities)[:12]}"
        self.journal = Journal(
            self.project.journal_dir, self.loaded.agent.name, key, self.loaded.secrets
        )
        if self.options.fresh:
            self.journal.discard()
        self._journaled = self.journal.load()

    async def open_tools(self) -> None:
        """Start the tool runtimes (MCP servers, indexes) before the first model call.
        Idempotent; a stage that calls no agent never calls it."""
        if self.toolbox is not None and self.toolbox.runtimes and not self._tools_open:
            self._tools_open = True
            await self.toolbox.open()
            self._open_journal(self.toolbox.identities())

    @property
    def resumable(self) -> int:
        """Cases the open journal already holds."""
        return sum(1 for f in self.case_fingerprints.values() if f in self._journaled)

    async def execute(self, case: TestCaseModel) -> CaseRun:
        fingerprint = self.case_fingerprints[case.id or ""]
        cached = self._journaled.get(fingerprint)
        if cached is not None:
            run = cached.model_copy(update={"resumed": True})
        else:
            run = await self.executor.run(case, fingerprint)
            await asyncio.to_thread(self.journal.append, run)  # fsync off the event loop
        self.runs[run.case_id] = run
        return run

    async def execute_all(self) -> list[CaseRun]:
        await self.open_tools()
        limit = asyncio.Semaphore(self.parallel)

        async def one(case: TestCaseModel) -> CaseRun:
            async with limit:
                return await self.execute(case)

        return list(await asyncio.gather(*map(one, self.cases)))

    async def evaluate_all(self, runs: list[CaseRun]) -> list[TestResult]:
        """Score stored runs, matched to the cases by id and fingerprint. Runs made for other
        cases or other inputs (the config changed since) are refused, never mis-paired."""
        by_id = {run.case_id: run for run in runs}
        stale = [
            case.id or ""
            for case in self.cases
            if (run := by_id.get(case.id or "")) is None
            or run.fingerprint != self.case_fingerprints[case.id or ""]
        ]
        if stale:
            raise ConfigError(
                f"the agent responses do not match the current cases ({', '.join(stale[:10])}): "
                "the agent's config or test cases changed since they were made; run the agent "
                "stage again (re-materialize the whole partition)"
            )
        runs = [by_id[case.id or ""] for case in self.cases]
        limit = asyncio.Semaphore(self.parallel)

        async def one(case: TestCaseModel, run: CaseRun) -> TestResult:
            async with limit:
                return await self.evaluator.evaluate(case, run)

        return list(await asyncio.gather(*map(one, self.cases, runs)))

    async def run_all(self, on_case: CaseCallback | None = None) -> list[TestResult]:
        """Run and score every case, pipelined; results keep the input order."""
        await self.open_tools()
        limit = asyncio.Semaphore(self.parallel)

        async def one(case: TestCaseModel) -> TestResult:
            async with limit:
                run = await self.execute(case)
                result = await self.evaluator.evaluate(case, run)
            if on_case is not None:
                on_case(result, run.resumed)
            return result

        return list(await asyncio.gather(*map(one, self.cases)))

    def transient_failures(self) -> list[str]:
        """Cases that failed for reasons a rerun may fix (429, 5xx, timeouts, drops)."""
        return [case_id for case_id, run in self.runs.items() if run.transient]

    def finish(self) -> None:
        """Close the journal when nothing transient is left, so the next run is fresh; else
        keep it open so the rerun resumes."""
        if not self.transient_failures():
            self.journal.close()

    def eval_run(
        self,
        results: list[TestResult],
        *,
        runs: list[CaseRun] | None = None,
        started_at: str | None = None,
        wall_ms: int | None = None,
        scheduler: dict[str, object] | None = None,
    ) -> EvalRun:
        """The redacted EvalRun of this suite. A pipeline that ran the stages in separate
        steps passes the stage outputs (``runs``) and when the first stage started."""
        if runs is not None:
            self.runs = {run.case_id: run for run in runs}
        if wall_ms is None:
            wall_ms = int((time.perf_counter() - self._clock) * 1000)
        agent = self.loaded.agent
        report = TestReport(
            agent_name=agent.name,
            agent_config_path=self.loaded.display,
            results=results,
            summary=ReportSummary.from_results(results, wall_time_ms=wall_ms),
            timestamp=now_iso(),
            holodeck_version=__version__,
            environment={"parallel": self.parallel, "llm_timeout_s": self.timeout},
        )
        fingerprints = sorted(
            {
                turn.system_fingerprint
                for run in self.runs.values()
                for turn in run.turns
                if turn.system_fingerprint is not None
            }
        )
        metadata = EvalRunMetadata(
            agent_config=agent,
            prompt_version=self.prompt.version,
            holodeck_version=__version__,
            cli_args=redact_argv(self.options.cli_args),
            git_commit=git_commit(self.loaded.base_dir),
            run_id=uuid.uuid4().hex,
            config_hash=fp.config_hash(self.loaded),
            dataset_hash=fp.dataset_hash(self.cases),
            trigger=self.options.trigger,
            started_at=started_at or self.started_at,
            dagster_run_id=self.options.dagster_run_id,
            partition_key=self.options.partition_key,
            provenance={
                "prompt_key": self.prompt_key,
                "suite_fingerprint": self.suite_fingerprint,
                "scheduler": scheduler or self.scheduler_stats(),
                "system_fingerprints": fingerprints,
                **self.judges.provenance(),
            },
        )
        return redact(EvalRun(report=report, metadata=metadata), self.loaded.secrets)

    def scheduler_stats(self) -> dict[str, object]:
        stats = self.scheduler.stats
        return {
            "calls": stats.calls,
            "attempts": stats.attempts,
            "retries": stats.retries,
            "rate_limited": stats.rate_limited,
            "lowest_limit": stats.lowest_limit,
        }

    async def aclose(self) -> None:
        if self.toolbox is not None:
            await self.toolbox.aclose()
        await self.client.aclose()
        await self.judges.aclose()


def retrieval_tool_names(tools: list[Tool]) -> frozenset[str]:
    return frozenset(
        tool.name
        for tool in tools
        if isinstance(tool, VectorstoreTool | HierarchicalDocumentTool)
        or (isinstance(tool, MCPTool) and tool.is_retrieval)
    )


def git_commit(folder: object) -> str | None:
    """Best effort ``git rev-parse HEAD`` (seed 003), bounded to 2 s."""
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=str(folder),
            capture_output=True,
            text=True,
            timeout=2,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = proc.stdout.strip()
    return commit if proc.returncode == 0 and commit else None
