"""Run a suite: every case through the agent and the metrics, concurrently, resumably.

A :class:`Suite` is the run's **plan**, cheap to build and pure (what it reads from disk comes
in :class:`SuiteInputs`, read by ``engine/suite.py``'s ``load_suite``): the selected cases,
the prompt, the fingerprints, the settings, the journal's place. What calls models, the
:class:`~holodeck_core.runner.runtime.SuiteRuntime` (scheduler, SDK clients, tool runtimes,
judges), is opened by the first stage that needs it (:meth:`Suite.runtime`) and closed by
:meth:`Suite.aclose`; the stages that call no model never open it.

The CLI pipelines each case (run, then score) under one concurrency limit. The Dagster assets
call the two stages separately (:meth:`Suite.execute_all`, :meth:`Suite.evaluate_all`). Both
end with :meth:`Suite.eval_run`. Nothing here aborts the suite for one bad case."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from dataclasses import dataclass

from holodeck_core import __version__
from holodeck_core.calls.ledger import charged_to, tallied
from holodeck_core.config.loader import LoadedAgent
from holodeck_core.config.project import Project
from holodeck_core.config.prompts import Prompt
from holodeck_core.defaults import BATCH_MAX_REQUESTS, LLM_TIMEOUT_S, REDUCER
from holodeck_core.errors import ConfigError
from holodeck_core.files import FileLimits
from holodeck_core.metrics.judge_control import ControlRow, score_control
from holodeck_core.models import (
    EvalRun,
    EvalRunMetadata,
    JudgeControlScore,
    ReportSummary,
    TestCaseModel,
    TestReport,
    TestResult,
)
from holodeck_core.models.base import digest
from holodeck_core.models.cost import CallCosts, RunEstimate
from holodeck_core.redaction import (
    CheckedAhead,
    changes_nothing,
    redact,
    redact_argv,
    redact_text,
    registered_secrets,
)
from holodeck_core.runner import fingerprint as fp
from holodeck_core.runner.batch_mode import batch_plan
from holodeck_core.runner.case_run import CaseRun
from holodeck_core.runner.execute import now_iso
from holodeck_core.runner.journal import Journal
from holodeck_core.runner.options import CaseCallback, git_commit
from holodeck_core.runner.options import SuiteOptions as SuiteOptions
from holodeck_core.runner.runtime import SuiteRuntime, agent_backend
from holodeck_core.runner.spend import budget_verdict, run_cost, with_case_costs
from holodeck_core.runner.trials import combine_trials
from holodeck_core.stats import Reducer


@dataclass(frozen=True)
class SuiteInputs:
    """What a suite needs from disk, read before it is built (``engine/suite.py``'s
    ``load_suite``): the project, the selected cases, the prompt and its registered key, the
    judge-control rows, and the fingerprints (the tool code's and attachments' hashes)."""

    project: Project
    cases: list[TestCaseModel]
    prompt: Prompt
    prompt_key: str
    control_rows: list[ControlRow]
    dataset_hash: str
    suite_fingerprint: str
    case_fingerprints: dict[str, str]


@dataclass(frozen=True)
class RunIdentity:
    """What an EvalRun's metadata says of the config and where it ran, the same whatever the
    cases answered: worked out once (:meth:`Suite.identity`), on the preload thread while the
    calls are in flight (``engine/stages.py``) rather than after the last one."""

    config_hash: str
    dataset_hash: str
    model_fingerprint: str
    git_commit: str | None
    secrets: frozenset[str]
    """The secrets registered when it was worked out (the config hash is redacted)."""


class Suite:
    def __init__(
        self, loaded: LoadedAgent, inputs: SuiteInputs, options: SuiteOptions | None = None
    ) -> None:
        """Pure: everything read from disk comes in ``inputs``."""
        self.loaded = loaded
        self.options = options or SuiteOptions()
        self.project = inputs.project
        agent = loaded.agent
        self.cases = inputs.cases
        self.prompt, self.prompt_key = inputs.prompt, inputs.prompt_key
        execution = agent.execution
        self.parallel = self.options.parallel or agent.parallel_test_cases
        timeout = self.options.timeout or (execution.llm_timeout if execution else None)
        self.timeout = float(timeout or LLM_TIMEOUT_S)
        self.file_cache_dir = (
            self.project.file_cache_dir
            if not execution or execution.cache_enabled is not False
            else None
        )
        self.file_limits = FileLimits.from_execution(execution)
        self.batch_mode, self.batch_note = batch_plan(loaded, self.options, self.project)
        self.batching = self.batch_mode != "off" and self.batch_note is None
        """The agent's and judges' calls go through batches (docs/cost.md)."""
        self.cases_at_once = (
            max(self.parallel, BATCH_MAX_REQUESTS) if self.batching else self.parallel
        )
        """Case trials in flight: every one when their calls batch, so a round of the tool
        loop is one batch (docs/cost.md); else ``parallel``."""
        self.trials = self.options.trials or (execution.trials if execution else None) or 1
        self.reducer = (execution.reducer if execution else None) or Reducer(REDUCER)
        self.control_rows = inputs.control_rows
        self.dataset_hash = inputs.dataset_hash
        self.suite_fingerprint = inputs.suite_fingerprint
        self.case_fingerprints = inputs.case_fingerprints
        self.journal_key = self.suite_fingerprint
        self._journal: Journal | None = None
        self._journal_for = ""
        self._journaled: dict[tuple[str, int], CaseRun] | None = None
        self._runtime: SuiteRuntime | None = None
        self.runs: dict[tuple[str, int], CaseRun] = {}
        self.costs_before: CallCosts | None = None
        """What an earlier stage of this run spent (the budget covers the whole run)."""
        self._costs = CallCosts()
        self._estimate: tuple[RunEstimate | None] | None = None
        self._budget_stopped = False
        self._checked = CheckedAhead(loaded.secrets)
        """Each case's result checked for secrets as it finishes, while the run waits."""
        self._identity: RunIdentity | None = None
        self._ahead = threading.Lock()
        """Held while the identity or the estimate is worked out (the preload thread may)."""
        self.started_at = now_iso()
        self._clock = time.perf_counter()

    def identity(self) -> RunIdentity:
        """The run's :class:`RunIdentity`, and the agent config checked for secrets (so the
        EvalRun's redaction need not walk it again); worked out anew when a secret was
        registered since."""
        with self._ahead:
            secrets = registered_secrets()
            if self._identity is None or self._identity.secrets != secrets:
                self._checked.check(self.loaded.agent)
                self._identity = RunIdentity(
                    config_hash=fp.config_hash(self.loaded, self.prompt.text),
                    dataset_hash=self.dataset_hash,  # hashed with the suite's inputs
                    model_fingerprint=fp.model_fingerprint(self.loaded),
                    git_commit=git_commit(self.loaded.base_dir),
                    secrets=secrets,
                )
            return self._identity

    def estimate(self) -> RunEstimate | None:
        """The run's estimate (the options' estimator, asked once per suite; None without
        one). It reads only the config and the runs recorded before, so it is what the plan
        expected whenever it is asked."""
        with self._ahead:
            return self._estimated()

    def _estimated(self) -> RunEstimate | None:
        if self._estimate is None:
            estimator = self.options.estimator
            self._estimate = (
                estimator(
                    self.loaded,
                    self.project,
                    self.prompt_key,
                    self.prompt.body,
                    self.trials,
                    self.cases,
                    self.batching,
                )
                if estimator is not None
                else None,
            )
        return self._estimate[0]

    @property
    def journal(self) -> Journal:
        """This suite's resume journal (nothing is read or opened here). One object per
        journal key, so what it learned (a failed write) is still there at the end."""
        if self._journal is None or self._journal_for != self.journal_key:
            self._journal = Journal(
                self.project.journal_dir,
                self.loaded.agent.name,
                self.journal_key,
                self.loaded.secrets,
            )
            self._journal_for = self.journal_key
        return self._journal

    @property
    def runtime(self) -> SuiteRuntime:
        """The runtime, opened on first use (and the journal read with it)."""
        if self._runtime is None:
            self._runtime = SuiteRuntime(self)
            self._load_journal()
        return self._runtime

    def _load_journal(self) -> None:
        if self.options.fresh:
            self.journal.discard()
        self._journaled = self.journal.load()

    async def open_tools(self) -> None:
        """Start the tool runtimes (MCP servers, indexes) before the first model call.
        Idempotent. With live tool runtimes their identities (an MCP server's name, version
        and tool list; an index key) scope the journal (docs/architecture.md), so an upgraded server
        is never answered from a journal its predecessor wrote."""
        runtime = self.runtime
        if await runtime.open_tools():
            assert runtime.toolbox is not None
            identities = runtime.toolbox.identities()
            if identities:
                self.journal_key = f"{self.suite_fingerprint}-{digest(identities)[:12]}"
                self._load_journal()

    async def score_judge_control(self) -> list[JudgeControlScore] | None:
        """The judge-control rows scored afresh (None when the agent has none)."""
        if not self.control_rows:
            return None
        runtime = self.runtime
        return await score_control(
            self.control_rows,
            self.loaded.agent,
            runtime.scheduler,
            runtime.judges.default_model,
            lambda model: runtime.client_for(model, "judge"),
            self.loaded.base_dir,
        )

    @property
    def resumable(self) -> int:
        """Case trials the open journal already holds."""
        journaled = self._journaled or {}
        return sum(
            1
            for f in self.case_fingerprints.values()
            for trial in range(self.trials)
            if (f, trial) in journaled
        )

    async def execute(self, case: TestCaseModel, trial: int = 0) -> CaseRun:
        """One trial of a case; the journal keys each trial, so a resumed run pays only for
        the trials it misses."""
        fingerprint = self.case_fingerprints[case.id or ""]
        runtime = self.runtime
        cached = (self._journaled or {}).get((fingerprint, trial))
        if cached is None:
            # another run of this suite may be on this trial: wait for it, then reuse its work
            async with self.journal.claim(fingerprint, trial):
                cached = await self.journal.lookup(fingerprint, trial)
                if cached is None:
                    with charged_to(case.id or ""), tallied() as spent:
                        run = await runtime.executor.run(case, fingerprint)
                    run.trial, run.cost = trial, spent
                    await self.journal.write(run)
        if cached is not None:
            run = cached.model_copy(update={"resumed": True})
            paid = CallCosts(cases={case.id or "": dict(run.cost)}, resumed=dict(run.cost))
            self._costs = self._costs.merged(paid)  # what an earlier attempt paid for it
        self.runs[(run.case_id, trial)] = run
        return run

    def _case_trials(self) -> list[tuple[TestCaseModel, int]]:
        return [(case, trial) for case in self.cases for trial in range(self.trials)]

    async def execute_all(self) -> list[CaseRun]:
        await self.open_tools()
        limit = asyncio.Semaphore(self.cases_at_once)

        async def one(case: TestCaseModel, trial: int) -> CaseRun:
            async with limit:
                return await self.execute(case, trial)

        return list(await asyncio.gather(*(one(c, t) for c, t in self._case_trials())))

    async def evaluate_all(self, runs: list[CaseRun]) -> list[TestResult]:
        """Score stored runs, matched to the cases by id and fingerprint. Runs made for other
        cases or other inputs (the config changed since) are refused, never mis-paired. A
        stored run's id is redacted (a case id holding a piece of a secret is ``***`` in the
        stage data), so a case is looked up by its id, then by its redacted id."""
        by_id = {(run.case_id, run.trial): run for run in runs}

        def stored(case: TestCaseModel, trial: int) -> CaseRun | None:
            case_id = case.id or ""
            return by_id.get((case_id, trial)) or by_id.get((redact_text(case_id), trial))

        stale = [
            case.id or ""
            for case, trial in self._case_trials()
            if (run := stored(case, trial)) is None
            or run.fingerprint != self.case_fingerprints[case.id or ""]
        ]
        if stale:
            raise ConfigError(
                f"the agent responses do not match the current cases ({', '.join(stale[:10])}): "
                "the agent's config or test cases changed since they were made; run the agent "
                "stage again (re-materialize the whole partition)"
            )
        limit = asyncio.Semaphore(self.cases_at_once)

        async def one(case: TestCaseModel, trial: int) -> TestResult:
            async with limit:
                run = stored(case, trial)
                assert run is not None  # checked above
                return await self.evaluate(case, run)

        async def trials(case: TestCaseModel) -> TestResult:
            results = await asyncio.gather(*(one(case, t) for t in range(self.trials)))
            return combine_trials(results, self.reducer)

        return list(await asyncio.gather(*map(trials, self.cases)))

    async def run_all(self, on_case: CaseCallback | None = None) -> list[TestResult]:
        """Run and score every case (each of its trials), pipelined; results keep the input
        order."""
        await self.open_tools()
        limit = asyncio.Semaphore(self.cases_at_once)

        async def one(case: TestCaseModel, trial: int) -> tuple[TestResult, bool]:
            async with limit:
                run = await self.execute(case, trial)
                return await self.evaluate(case, run), run.resumed

        async def trials(case: TestCaseModel) -> TestResult:
            done = await asyncio.gather(*(one(case, t) for t in range(self.trials)))
            result = combine_trials([r for r, _ in done], self.reducer)
            if on_case is not None:
                on_case(result, all(resumed for _, resumed in done))
            self._checked.check(result)
            return result

        return list(await asyncio.gather(*map(trials, self.cases)))

    async def evaluate(self, case: TestCaseModel, run: CaseRun) -> TestResult:
        """Score one trial; its judge calls are charged to the case. A trial the budget
        stopped (its agent or a judge call was not sent) is ERROR with ``error_source:
        budget``: a rerun with a larger budget resumes it."""
        runtime = self.runtime
        with charged_to(case.id or ""):
            result = await runtime.evaluator.evaluate(case, run)
        ledger = runtime.ledger
        return budget_verdict(
            result, run, ledger.refused_cases, ledger.stopped_by, ledger.stop_message
        )

    def costs(self) -> CallCosts:
        """What this suite's runtimes spent so far (the open one included)."""
        if self._runtime is None:
            return self._costs
        return self._costs.merged(self._runtime.ledger.snapshot())

    def transient_failures(self) -> list[str]:
        """Cases that failed for reasons a rerun may fix (429, 5xx, timeouts, drops)."""
        return list(dict.fromkeys(key[0] for key, run in self.runs.items() if run.transient))

    def finish(self, journal_key: str | None = None) -> None:
        """Close the journal (the one ``journal_key`` names, when the agent ran in another
        step) when nothing transient is left, so the next run is fresh; else keep it open so
        the rerun resumes."""
        if journal_key is not None:
            self.journal_key = journal_key
        if not self.transient_failures() and not self._budget_stopped:
            self.journal.close()

    def eval_run(
        self,
        results: list[TestResult],
        *,
        runs: list[CaseRun] | None = None,
        started_at: str | None = None,
        wall_ms: int | None = None,
        scheduler: dict[str, object] | None = None,
        judges: dict[str, object] | None = None,
        judge_control: list[JudgeControlScore] | None = None,
        costs: CallCosts | None = None,
    ) -> EvalRun:
        """The redacted EvalRun of this suite. A pipeline that ran the stages in separate
        steps passes the stage outputs (``runs``, the ``scheduler`` and ``judges``
        provenance) and when the first stage started; it opens no runtime here."""
        if runs is not None:
            self.runs = {(run.case_id, run.trial): run for run in runs}
        if wall_ms is None:
            wall_ms = int((time.perf_counter() - self._clock) * 1000)
        agent, target = self.loaded.agent, self.loaded.target
        identity = self.identity()
        costs = costs if costs is not None else self.costs()
        checked = self._checked.all_clean(results)
        results = with_case_costs(results, costs)
        self._budget_stopped = any(r.error_source == "budget" for r in results)
        report = TestReport(
            agent_name=agent.name,
            agent_config_path=self.loaded.display,
            results=results,
            summary=self._summary(results, wall_ms, costs),
            timestamp=now_iso(),
            holodeck_version=__version__,
            environment={
                "parallel": self.parallel,
                "llm_timeout_s": self.timeout,
                **({"target": target.label} if target else {}),
                **({} if target else agent_backend(agent)),
                **self._batch_environment(),
            },
            judge_control=judge_control,
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
            git_commit=identity.git_commit,
            run_id=uuid.uuid4().hex,
            config_hash=identity.config_hash,
            dataset_hash=identity.dataset_hash,
            trigger=self.options.trigger,
            started_at=started_at or self.started_at,
            dagster_run_id=self.options.dagster_run_id,
            partition_key=self.options.partition_key,
            model_candidate=self.loaded.candidate.name,
            model_fingerprint=identity.model_fingerprint,
            provenance={
                "prompt_key": self.prompt_key,
                "suite_fingerprint": self.suite_fingerprint,
                "scheduler": scheduler if scheduler is not None else self.scheduler_stats(),
                "system_fingerprints": fingerprints,
                "case_fingerprints": self.case_fingerprints,
                **(judges if judges is not None else self.judge_provenance()),
                **self.tool_provenance(),
                **({"target": target.snapshot()} if target else {}),
            },
        )
        return self._redacted(EvalRun(report=report, metadata=metadata), checked)

    def _redacted(self, run: EvalRun, results_checked: bool) -> EvalRun:
        """``run`` redacted: as it is when its results (as they finished) and its agent config
        (:meth:`identity`) were checked clean (a case's cost, added since, is numbers under
        fixed headings) and nothing else in it needs redacting; else the walk of the whole,
        which the other case (the common one) would leave as it is too."""
        secrets = self.loaded.secrets
        if (
            results_checked
            and self._checked.all_clean([run.metadata.agent_config])
            and changes_nothing(run.report, secrets, exclude={"results"})
            and changes_nothing(run.metadata, secrets, exclude={"agent_config"})
        ):
            return run
        return redact(run, secrets)

    def _batch_environment(self) -> dict[str, str]:
        """``environment.batch`` (and ``batch_note``: why the agent's calls did not batch)."""
        if self.batch_mode == "off":
            return {}
        note = {"batch_note": self.batch_note} if self.batch_note is not None else {}
        return {"batch": self.batch_mode, **note}

    def _summary(self, results: list[TestResult], wall_ms: int, costs: CallCosts) -> ReportSummary:
        summary = ReportSummary.from_results(
            results,
            wall_time_ms=wall_ms,
            reducer=self.reducer,
            max_error_share=self.loaded.agent.max_error_share,
        )
        cost = run_cost(costs, self.project.settings.pricing, self.estimate())
        return summary.model_copy(update={"cost_usd": cost.total_usd, "cost": cost})

    def scheduler_stats(self) -> dict[str, object]:
        return self._runtime.scheduler_stats() if self._runtime is not None else {}

    def tool_provenance(self) -> dict[str, object]:
        """What the open tool runtimes report (e.g. index builds and their embedding tokens)."""
        toolbox = self._runtime.toolbox if self._runtime is not None else None
        return {"tools": toolbox.provenance()} if toolbox is not None else {}

    def judge_provenance(self) -> dict[str, object]:
        return dict(self._runtime.judges.provenance()) if self._runtime is not None else {}

    async def aclose(self) -> None:
        """Close the runtime, if a stage opened one (a later stage may open a new one)."""
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            self._costs = self._costs.merged(runtime.ledger.snapshot())
            await runtime.aclose()
