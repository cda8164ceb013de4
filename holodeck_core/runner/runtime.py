"""What a suite needs to call models, opened only by the stages that do (docs/architecture.md,
docs/agent-yaml.md): the call scheduler, the agent's SDK client, the tool runtimes, the case
executor, the judges and the evaluator. :class:`~holodeck_core.runner.suite.Suite` (the plan: cases,
prompt, fingerprints) opens one on first use and closes it in ``aclose``; the stages that call no
model (files, the report) never do."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from holodeck_core.agents.loop import AgentRunner, ConversationRunner
from holodeck_core.agents.targets import make_target
from holodeck_core.agents.targets.base import TargetClient
from holodeck_core.calls.batch import Batches
from holodeck_core.calls.ledger import Ledger
from holodeck_core.calls.prices import load_price_table
from holodeck_core.calls.scheduler import CallScheduler, RetryPolicy
from holodeck_core.calls.shared_budget import Allowance
from holodeck_core.config.loader import LoadedAgent
from holodeck_core.config.project import Project
from holodeck_core.config.prompts import Prompt
from holodeck_core.defaults import BATCH_MAX_WAIT_S, MATRIX_CELL_SEPARATOR
from holodeck_core.files import FileLimits
from holodeck_core.metrics.judge import JudgeServices
from holodeck_core.models import (
    Agent,
    HierarchicalDocumentTool,
    LLMProvider,
    MCPTool,
    Tool,
    VectorstoreTool,
)
from holodeck_core.models.cost import CallCosts
from holodeck_core.providers.factory import make_client
from holodeck_core.providers.table import provider_spec
from holodeck_core.runner.batch_mode import claude_path
from holodeck_core.runner.evaluate import CaseEvaluator
from holodeck_core.runner.execute import CaseExecutor
from holodeck_core.runner.options import SuiteOptions
from holodeck_core.tools.retrieval.settings import shared_embedding_model
from holodeck_core.tools.runtime import ToolContext
from holodeck_core.tools.toolbox import ToolBox

if TYPE_CHECKING:
    from holodeck_core.models.agent import BatchMode
    from holodeck_core.providers.base import ModelClient
    from holodeck_core.runner.journal import Journal


class RuntimePlan(Protocol):
    """What a runtime reads of its suite's plan (:class:`~holodeck_core.runner.suite.Suite` is
    one), so the plan imports the runtime and never the other way round."""

    @property
    def loaded(self) -> LoadedAgent: ...
    @property
    def options(self) -> SuiteOptions: ...
    @property
    def project(self) -> Project: ...
    @property
    def prompt(self) -> Prompt: ...
    @property
    def prompt_key(self) -> str: ...
    @property
    def parallel(self) -> int: ...
    @property
    def timeout(self) -> float: ...
    @property
    def file_cache_dir(self) -> Path | None: ...
    @property
    def file_limits(self) -> FileLimits: ...
    @property
    def costs_before(self) -> CallCosts | None: ...
    @property
    def batch_mode(self) -> BatchMode: ...
    @property
    def batch_note(self) -> str | None: ...
    @property
    def journal(self) -> Journal: ...


class SuiteRuntime:
    """The live half of a suite: built from its plan, closed once with :meth:`aclose`."""

    def __init__(self, suite: RuntimePlan) -> None:
        loaded, agent = suite.loaded, suite.loaded.agent
        self._keys = suite.options.api_keys
        client = self.client_for
        before = suite.costs_before.budget if suite.costs_before else None
        self.ledger = Ledger(
            load_price_table(suite.project.settings.pricing),
            agent.execution.budget if agent.execution else None,
            spent_usd=before.spent_usd if before else 0.0,
            spent_tokens=before.spent_tokens if before else 0,
            stopped_by=before.stopped_by if before else None,
            shared=self._shared_budgets(suite),
        )
        self.batches = self._batches(suite)
        self._cell = (  # whose counts, when the run's cells share their batches
            f"{suite.prompt_key}{MATRIX_CELL_SEPARATOR}{suite.loaded.candidate.name}: "
            if self.batches is not None and self.batches.shared
            else ""
        )
        self.scheduler = CallScheduler(
            suite.parallel,
            RetryPolicy(timeout=suite.timeout),
            ledger=self.ledger,
            batches=self.batches,
            limits=suite.options.endpoint_limits,
        )
        self.toolbox: ToolBox | None = None
        self.client: ModelClient | None = None
        self.target: TargetClient | None = None
        conversation: ConversationRunner
        if loaded.target is not None:  # the agent runs elsewhere, with its own tools
            conversation, self.target = make_target(
                loaded.target, loaded, self.scheduler, timeout=suite.timeout
            )
        else:
            conversation = self._in_process(suite)
        self.executor = CaseExecutor(
            agent=conversation,
            base_dir=loaded.base_dir,
            cache_dir=suite.file_cache_dir,
            limits=suite.file_limits,
        )
        self.judges = JudgeServices.for_agent(
            agent,
            self.scheduler,
            project=suite.project,
            client_factory=lambda model: client(model, "judge"),
        )
        self.evaluator = CaseEvaluator(
            agent.evaluations.metrics if agent.evaluations else None,
            agent.model.name,
            self.judges.context(base_dir=loaded.base_dir),
            retrieval_tools=retrieval_tool_names(agent.tools or []),
        )
        self._tools_open = False

    @staticmethod
    def _batches(suite: RuntimePlan) -> Batches | None:
        """The suite's batches when ``execution.batch`` (or ``--batch``) sends calls as such
        and the agent's path can (docs/cost.md), in the rounds of its run when it shares them
        (``SuiteOptions.batch_rounds``); the console is told when it cannot."""
        say = suite.options.on_batch
        if suite.batch_note is not None and say is not None:
            say(suite.batch_note)
        if suite.batch_mode == "off" or suite.batch_note is not None:
            return None
        return Batches(
            lambda: suite.journal.batches,  # read on the first request
            rounds=suite.options.batch_rounds,  # the run's other cells share them
            max_wait=batch_max_wait(suite.loaded),
            on_progress=say,
        )

    @staticmethod
    def _shared_budgets(suite: RuntimePlan) -> list[Allowance]:
        """This runtime's allowances of the budgets shared with other runs, in chunks of the
        worst case of as many calls as the suite runs at once."""
        factory = suite.options.shared_budgets
        if factory is None:
            return []
        label = " ".join(
            part
            for part in (suite.loaded.agent.name, suite.prompt_key, suite.options.dagster_run_id)
            if part
        )
        return [Allowance(pool, suite.parallel) for pool in factory(suite.project, label)]

    def _in_process(self, suite: RuntimePlan) -> ConversationRunner:
        """The agent run here from ``agent.yaml``: its SDK client, tool box and tool loop."""
        loaded, agent, execution = suite.loaded, suite.loaded.agent, suite.loaded.agent.execution
        client = self.client_for
        tools = agent.offered_tools
        self.toolbox = (
            ToolBox(
                tools,
                loaded.resolve,
                timeout=execution.tool_timeout if execution else None,
                context=ToolContext(
                    base_dir=loaded.base_dir,
                    resolve=loaded.resolve,
                    scheduler=self.scheduler,
                    agent_model=agent.model,
                    client_factory=lambda model: client(model, "tool"),
                    cache_dir=suite.project.cache_dir,
                    secrets=frozenset(loaded.secrets),
                    timeout=suite.timeout,
                    embedding_provider=agent.embedding_provider,
                    embedding_model=shared_embedding_model(agent),
                ),
            )
            if tools
            else None
        )
        if claude_path(agent):
            from holodeck_core.agents.claude_sdk import ClaudeAgentRunner  # imports the SDK

            return ClaudeAgentRunner(
                model=agent.model,
                scheduler=self.scheduler,
                system=suite.prompt.text,
                claude=agent.claude,
                toolbox=self.toolbox,
                response_schema=loaded.response_schema,
                max_turns=agent.max_turns,
                timeout=suite.timeout,
                fallback_key=self._keys.get(agent.model.provider),
            )
        settings = agent.openai_settings
        self.client = make_client(
            agent.model,
            fallback_key=self._keys.get(agent.model.provider),
            agent=True,
            reasoning=settings.reasoning if settings else None,
        )
        return AgentRunner(
            client=self.client,
            scheduler=self.scheduler,
            system=suite.prompt.text,
            toolbox=self.toolbox,
            response_schema=loaded.response_schema,
            max_tool_turns=agent.max_turns,
            timeout=suite.timeout,
            unknown_tool_ends_case=agent.on_openai_agents,
        )

    async def open_tools(self) -> bool:
        """Start the tool runtimes (MCP servers, indexes) once; True when this call did."""
        if self.toolbox is None or not self.toolbox.runtimes or self._tools_open:
            return False
        self._tools_open = True
        await self.toolbox.open()
        return True

    def client_for(self, model: LLMProvider, where: str) -> ModelClient:
        """An SDK client for ``model`` (``where`` names it in config errors), with the
        suite's fallback keys (Dagster's ``ModelProviderKeys``)."""
        return make_client(model, where=where, fallback_key=self._keys.get(model.provider))

    def scheduler_stats(self) -> dict[str, object]:
        stats = self.scheduler.stats
        return {
            "calls": stats.calls,
            "answered": stats.answered,
            "attempts": stats.attempts,
            "retries": stats.retries,
            "rate_limited": stats.rate_limited,
            "lowest_limit": stats.lowest_limit,
            **({"batches": asdict(self.batches.stats)} if self.batches is not None else {}),
        }

    async def aclose(self) -> None:
        try:
            if self.batches is not None:
                await self.batches.aclose()  # what is still running (Ctrl-C) is cancelled
                summary = self.batches.summary()
                if summary is not None and self.batches.on_progress is not None:
                    self.batches.on_progress(f"{self._cell}{summary}")
            if self.toolbox is not None:
                await self.toolbox.aclose()
            if self.client is not None:
                await self.client.aclose()
            if self.target is not None:
                await self.target.aclose()
            await self.judges.aclose()
        finally:
            await self.ledger.aclose()  # what the shared budgets lent and this run did not spend


DIRECT_MESSAGES_NOTE = (
    "execution.anthropic_path: direct: this run did not run HoloDeck's agent (the Claude Agent "
    "SDK) but our direct Messages loop (docs/holodeck-fidelity.md)"
)


def agent_backend(agent: Agent) -> dict[str, str]:
    """``environment.agent_backend`` of an ``anthropic``/``ollama`` agent's EvalRun: which path
    ran it (``claude_agent_sdk``, HoloDeck's, or ``direct``, ours, with its note)."""
    if provider_spec(agent.model.provider).agent_runner != "claude_agent_sdk":
        return {}
    if claude_path(agent):
        return {"agent_backend": "claude_agent_sdk"}
    return {"agent_backend": "direct", "agent_backend_note": DIRECT_MESSAGES_NOTE}


def batch_max_wait(loaded: LoadedAgent) -> float:
    """How long a run may wait on batches: ``execution.batch_max_wait`` or the default."""
    execution = loaded.agent.execution
    wait = execution.batch_max_wait if execution else None
    return wait or BATCH_MAX_WAIT_S


def retrieval_tool_names(tools: list[Tool]) -> frozenset[str]:
    return frozenset(
        tool.name
        for tool in tools
        if isinstance(tool, VectorstoreTool | HierarchicalDocumentTool)
        or (isinstance(tool, MCPTool) and tool.is_retrieval)
    )
