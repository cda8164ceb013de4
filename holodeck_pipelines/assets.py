"""One asset group per agent (docs/dagster.md): four stages partitioned by prompt version x model
candidate (its grid, ``holodeck_pipelines.cells``), then the history write with the run's checks.

    processed_files → agent_responses → metric_results → report_summary → eval_history

Every asset is a thin wrapper over ``holodeck_core.engine.stages``. A run covers one prompt
cell or, in a backfill, several (``BackfillPolicy``: Dagster's launch paid once per run): each
cell has its own materialization and checks; the agent and metric steps run the run's cells at
once, sharing one limit per endpoint, one budget and one set of batches
(``holodeck_core.engine.cells``)."""

import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import dagster as dg

from holodeck_core.config.loader import LoadedAgent
from holodeck_core.config.project import location
from holodeck_core.engine import redact_text, shown_name
from holodeck_core.engine.cells import run_cells
from holodeck_core.engine.checks import cells_of
from holodeck_core.engine.launch import Launch, Suite, estimate_suites, launched_suites
from holodeck_core.engine.loop import run_to_end
from holodeck_core.engine.stages import (
    AgentResponses,
    MetricResults,
    ProcessedFiles,
    RunReport,
    preload_history,
    process_suite_files,
    run_agent_stage,
    run_metric_stage,
    write_report,
)
from holodeck_core.errors import ConfigError, HolodeckError
from holodeck_core.models import Status
from holodeck_core.models.cost import CallCosts
from holodeck_core.models.evaluation import EvaluationConfig
from holodeck_core.naming import dagster_name, job_name
from holodeck_pipelines.cells import Cell, cell_of, grid
from holodeck_pipelines.checks import (
    check_outputs,
    evaluations,
    partitioned_checks,
    skipped_checks,
    skipped_table,
)
from holodeck_pipelines.failures import (
    StageFailures,
    history_failure,
    metric_errors,
    stage_errors,
)
from holodeck_pipelines.metadata import (
    estimate_metadata,
    estimate_tags,
    recorded_estimate,
    report_metadata,
    result_tags,
)
from holodeck_pipelines.pools import HISTORY_POOL, LLM_POOL, require_pools
from holodeck_pipelines.resources import HoloDeckProject, ModelProviderKeys, RunHistory
from holodeck_pipelines.run_tags import (
    AGENT_TAG,
    BACKFILL_TAG,
    TRIALS_TAG,
    TRIGGER_TAG,
    BadRunTag,
    label_run,
    replace_project_tags,
    run_settings,
)
from holodeck_pipelines.verdicts import Verdict, checks_of, matrix_result, run_checks

if TYPE_CHECKING:
    import duckdb

_T = TypeVar("_T")
AGENT_STEP_RETRIES = 2
BUDGET_TROUBLE = "were stopped by a budget"


def stage_asset(**kwargs: Any) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """``dg.asset`` with a backfill policy: a beta parameter of Dagster 1.13, whose warning is
    expected here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        decorator: Callable[[Callable[..., Any]], dg.AssetsDefinition] = dg.asset(**kwargs)
        return decorator


@dataclass(frozen=True)
class AgentPipeline:
    """The Dagster objects of one agent."""

    agent_file: Path
    name: str
    partitions: dg.DynamicPartitionsDefinition
    """The prompt versions (the grid's rows; the sensor adds them)."""
    candidates: list[str]
    """The model candidates (the grid's columns)."""
    nightly: list[str]
    """The candidates the nightly schedule runs."""
    cells: dg.MultiPartitionsDefinition
    assets: list[dg.AssetsDefinition]
    job: Any  # what dg.define_asset_job returns (not exported under a public name)


def backfill_policy(versions_per_run: int | None) -> dg.BackfillPolicy:
    """A backfill's cells in one run (None), or in runs of ``versions_per_run``."""
    if versions_per_run is None:
        return dg.BackfillPolicy.single_run()
    return dg.BackfillPolicy.multi_run(versions_per_run)


@dataclass(frozen=True)
class AgentSpec:
    """What the assets of one agent share, read once when the definitions load."""

    agent_file: Path
    title: str
    name: str
    provider: str
    evaluations: EvaluationConfig | None
    partitions: dg.DynamicPartitionsDefinition
    cells: dg.MultiPartitionsDefinition
    own_model: str
    common: dict[str, Any]

    @property
    def estimated(self) -> dg.AssetKey:
        """The asset whose materialization holds each version's estimate."""
        return dg.AssetKey([self.name, "processed_files"])


def agent_spec(agent_file: Path, loaded: LoadedAgent, versions_per_run: int | None) -> AgentSpec:
    name = dagster_name(loaded.agent.name)
    partitions, cells = grid(loaded)
    owners = [f"team:{dagster_name(loaded.agent.author)}"] if loaded.agent.author else []
    common: dict[str, Any] = {
        "owners": owners,
        "key_prefix": [name],
        "group_name": name,
        "partitions_def": cells,
        "tags": {AGENT_TAG: name},
        "io_manager_key": "holodeck_io_manager",
        "backfill_policy": backfill_policy(versions_per_run),
    }
    return AgentSpec(
        agent_file=agent_file,
        title=loaded.agent.name,
        name=name,
        provider=loaded.agent.model.provider.value,
        evaluations=loaded.agent.evaluations,
        partitions=partitions,
        cells=cells,
        own_model=loaded.candidates.own.name,
        common=common,
    )


def build_agent_pipeline(
    agent_file: Path, loaded: LoadedAgent, versions_per_run: int | None = None
) -> AgentPipeline:
    """The agent's five assets and its job; nothing is loaded or written beyond ``loaded``
    (the suites are built by the steps)."""
    spec = agent_spec(agent_file, loaded, versions_per_run)
    processed_files = processed_files_asset(spec)
    return AgentPipeline(
        agent_file=agent_file,
        name=spec.name,
        partitions=spec.partitions,
        candidates=loaded.candidates.names,
        nightly=loaded.candidates.nightly,
        cells=spec.cells,
        assets=[
            processed_files,
            agent_responses_asset(spec, processed_files),
            metric_results_asset(spec),
            report_summary_asset(spec),
            eval_history_asset(spec),
        ],
        job=dg.define_asset_job(
            job_name(spec.title),
            selection=dg.AssetSelection.groups(spec.name),
            description=f"Evaluate {spec.title} on one cell (prompt version x model "
            "candidate), or on several in one run (a backfill).",
            tags={AGENT_TAG: spec.name},
        ),
    )


def suites(
    spec: AgentSpec,
    context: dg.AssetExecutionContext,
    project: HoloDeckProject,
    keys: ModelProviderKeys | None = None,
    spent: list[CallCosts] | None = None,
) -> dict[str, Suite]:
    """The suite of each cell of the step's run, by partition key (sharing one limit per
    endpoint, one budget, less what the cells ``spent`` in earlier steps, and one set of batch
    rounds)."""
    built: dict[str, Suite] = {}
    if not context.partition_keys:
        raise dg.Failure(description=empty_range(context.run.tags), allow_retries=False)
    try:
        settings = run_settings(context.run.tags, spec.name)
        require_pools(context.instance, project.project())
        launch = Launch(
            run_id=context.run.run_id,
            job_name=context.job_def.name,
            trigger=settings.trigger,
            trials=settings.trials,
            backfill=context.run.tags.get(BACKFILL_TAG),
            api_keys=keys.fallbacks() if keys else {},
            batch=settings.batch,
            on_batch=lambda line: context.log.info(redact_text(line)),
        )
        partitions = context.partition_keys
        cells = {key: (cell_of(key).prompt, cell_of(key).model) for key in partitions}
        estimators = {key: recorded_estimate(context, spec.estimated, key) for key in partitions}
        built = launched_suites(
            spec.agent_file, project.project(), cells, launch, estimators, spent or []
        )
    except (ConfigError, BadRunTag) as exc:
        # e.g. a partition added by hand in the UI with no prompt snapshot behind it, or a
        # bad run tag from the launchpad: no retry can fix that, so fail at once and say
        # which versions or values exist
        raise dg.Failure(
            description=redact_text(str(exc)),
            metadata={"partition": ", ".join(context.partition_keys)},
            allow_retries=False,
        ) from None
    trials = next(iter(built.values())).trials  # one agent, one setting for all cells
    label_run(context, {AGENT_TAG: spec.name, TRIGGER_TAG: launch.trigger, TRIALS_TAG: trials})
    return built


def empty_range(tags: Mapping[str, str]) -> str:
    """Why a run holds no cell: its partition range (launchpad tags) runs backwards or
    between cells with none in between."""
    start = tags.get("dagster/asset_partition_range_start", "")
    end = tags.get("dagster/asset_partition_range_end", "")
    return redact_text(
        f"the run's partition range {shown_name(start)!r} to {shown_name(end)!r} holds no cell "
        "of the grid: a range runs from the earlier cell to the later one, in the order the "
        "asset's partitions page lists them; launch it again from that page or swap the two "
        "dagster/asset_partition_range_* tags"
    )


def processed_files_asset(spec: AgentSpec) -> dg.AssetsDefinition:
    @stage_asset(
        name="processed_files",
        kinds={"python", "markitdown"},
        description=f"{spec.title}: test-case attachments converted to Markdown "
        "(content-addressed cache: repeats across prompt versions are free).",
        **spec.common,
    )
    def processed_files(
        context: dg.AssetExecutionContext, project: HoloDeckProject
    ) -> dict[str, ProcessedFiles]:
        stages = suites(spec, context, project)
        # one read of the history for every version's estimate; a history this release
        # refuses (an earlier release's, docs/history.md) fails the step before any spend
        with stage_errors(context, list(stages)):
            estimates = estimate_suites(project.project(), stages)
        # before the agent step spends anything: on the run (its tags show in the backfill's
        # runs: the sum of its versions', and each version's for the agent step to read back)
        # and on each version's first materialization
        replace_project_tags(context, estimate_tags(estimates))
        results: dict[str, ProcessedFiles] = {}
        for key, stage in stages.items():
            result = run_to_end(process_suite_files(stage))
            metadata = {"files": result.count, "cases_with_file_errors": len(result.errors)}
            context.add_asset_metadata(
                {**metadata, **estimate_metadata(estimates[key])}, partition_key=key
            )
            for case_id, messages in result.errors.items():
                context.log.warning(redact_text(f"{key}: case {case_id}: {'; '.join(messages)}"))
            results[key] = result
        return results

    return processed_files


def agent_responses_asset(
    spec: AgentSpec, processed_files: dg.AssetsDefinition
) -> dg.AssetsDefinition:
    @stage_asset(
        name="agent_responses",
        kinds={"python", spec.provider},
        description=f"{spec.title}: the agent's answer, tool calls and token usage per "
        "test case. Finished cases are journaled, so a rerun pays only for the rest.",
        pool=LLM_POOL,
        retry_policy=dg.RetryPolicy(
            max_retries=AGENT_STEP_RETRIES, delay=5, backoff=dg.Backoff.EXPONENTIAL
        ),
        deps=[processed_files],
        **spec.common,
    )
    def agent_responses(
        context: dg.AssetExecutionContext, project: HoloDeckProject, keys: ModelProviderKeys
    ) -> dict[str, AgentResponses]:
        preload = context.job_def.executor_def.name == "in_process"
        stages = suites(spec, context, project, keys)
        first = next(iter(stages))

        async def cell(key: str, stage: Suite) -> AgentResponses:
            return await respond(stage, preload=preload and key == first)

        # every cell at once, sharing the endpoint limits, the budget and the batches
        outcomes = run_to_end(run_cells(stages, cell))
        results: dict[str, AgentResponses] = {}
        # Finished cases are journaled (docs/dagster.md); the step fails once every version ran, so
        # a retry or a re-execution resumes them all. A budget's refusal is not retried.
        stopped = StageFailures("cases", trouble=BUDGET_TROUBLE)
        failed = StageFailures("cases")
        for key, result in answered(outcomes).items():
            metadata = responses_metadata(result)
            runs = result.runs
            stopped.add(
                key, [(r.case_id, r.error or "") for r in runs if r.budget_stopped], metadata
            )
            failed.add(key, [(r.case_id, r.error or "") for r in runs if r.transient], metadata)
            context.add_asset_metadata(metadata, partition_key=key)
            results[key] = result
        raise_cell_errors(context, outcomes, retries=AGENT_STEP_RETRIES)
        stopped.raise_if_any(context)
        failed.raise_if_any(context, retries=AGENT_STEP_RETRIES)
        return results

    return agent_responses


def answered(outcomes: Mapping[str, _T | HolodeckError]) -> dict[str, _T]:
    """The cells whose stage finished (the others failed with a :class:`HolodeckError`)."""
    return {key: out for key, out in outcomes.items() if not isinstance(out, HolodeckError)}


def raise_cell_errors(
    context: dg.AssetExecutionContext,
    outcomes: Mapping[str, object],
    *,
    retries: int = 0,
) -> None:
    """The step's failure when a cell's stage failed with a :class:`HolodeckError` (once the
    others finished and kept their work): the first one's message, naming every such cell."""
    errors = {key: out for key, out in outcomes.items() if isinstance(out, HolodeckError)}
    if errors:
        with stage_errors(context, list(errors), retries=retries):
            raise next(iter(errors.values()))


def responses_metadata(result: AgentResponses) -> dict[str, int]:
    """What the agent step shows per version: cases, resumed, errors, tokens and calls."""
    return {
        "cases": len(result.runs),
        "resumed_from_journal": sum(1 for run in result.runs if run.resumed),
        "case_errors": sum(1 for run in result.runs if run.error),
        "total_tokens": sum(run.usage.total_tokens for run in result.runs),
        # calls that got an answer: a refused connection is an attempt, not a call
        "model_calls": int(str(result.scheduler.get("answered", 0))),
        "model_call_attempts": int(str(result.scheduler.get("attempts", 0))),
    }


def metric_results_asset(spec: AgentSpec) -> dg.AssetsDefinition:
    @stage_asset(
        name="metric_results",
        kinds={"python"},
        description=f"{spec.title}: metric scores and PASS/FAIL/ERROR per test case "
        "(LLM-judge answers are cached).",
        pool=LLM_POOL,
        **spec.common,
    )
    def metric_results(
        context: dg.AssetExecutionContext,
        project: HoloDeckProject,
        keys: ModelProviderKeys,
        agent_responses: dict[str, AgentResponses],
    ) -> dict[str, MetricResults]:
        spent = [agent_responses[key].costs for key in context.partition_keys]
        stages = suites(spec, context, project, keys, spent)  # the run's budget goes on

        async def cell(key: str, stage: Suite) -> MetricResults:
            return await run_metric_stage(stage, agent_responses[key])

        outcomes = run_to_end(run_cells(stages, cell))  # every cell at once, as the agents'
        results: dict[str, MetricResults] = {}
        # Successful judge answers are cached (docs/dagster.md), so a rerun pays only for the rest
        failed = StageFailures("judge calls")
        for key, result in answered(outcomes).items():
            statuses = [r.status for r in result.results]
            metadata = {status.value.lower(): statuses.count(status) for status in Status}
            if result.judge_transient_failures:
                errors = metric_errors(result.results)
                failed.add(key, errors, metadata, count=result.judge_transient_failures)
            context.add_asset_metadata(metadata, partition_key=key)
            results[key] = result
        raise_cell_errors(context, outcomes)
        failed.raise_if_any(context)
        return results

    return metric_results


def report_summary_asset(spec: AgentSpec) -> dg.AssetsDefinition:
    @stage_asset(
        name="report_summary",
        kinds={"python", "json"},
        description=f"{spec.title}: the run's TestReport and summary, written as an "
        "EvalRun file (`results/<slug>/<timestamp>.json`) before anything else.",
        **spec.common,
    )
    def report_summary(
        context: dg.AssetExecutionContext,
        project: HoloDeckProject,
        keys: ModelProviderKeys,
        agent_responses: dict[str, AgentResponses],
        metric_results: dict[str, MetricResults],
    ) -> dict[str, RunReport]:
        dashboard_url = project.project().settings.dashboard_url
        reports: dict[str, RunReport] = {}
        for key, stage in suites(spec, context, project, keys).items():
            report = write_report(stage, agent_responses[key], metric_results[key])
            context.add_asset_metadata(
                report_metadata(report.eval_run, report.path, dashboard_url), partition_key=key
            )
            reports[key] = report
        # the Runs list shows each finished run's pass rate and spend beside its estimate
        replace_project_tags(context, result_tags({k: r.eval_run for k, r in reports.items()}))
        return reports

    return report_summary


def eval_history_asset(spec: AgentSpec) -> dg.AssetsDefinition:
    asset = dg.AssetKey([spec.name, "eval_history"])
    checks = checks_of(spec.evaluations)

    @stage_asset(
        name="eval_history",
        kinds={"duckdb"},
        description=f"{spec.title}: the EvalRun appended to the DuckDB history "
        "(one short transaction, idempotent by run id), with the run's checks.",
        pool=HISTORY_POOL,
        check_specs=partitioned_checks(asset, spec.cells, checks),
        **spec.common,
    )
    def eval_history(
        context: dg.AssetExecutionContext,
        project: HoloDeckProject,
        history: RunHistory,
        report_summary: dict[str, RunReport],
    ) -> Iterator[dg.Output[Any] | dg.AssetCheckEvaluation]:
        reports = {key: report_summary[key] for key in context.partition_keys}
        checked = record_and_check(context, spec, project, history, reports)
        yield dg.Output(report_summary)
        yield from evaluations(context.instance, asset, checked)
        yield from check_outputs(context, asset, checks)

    return eval_history


def record_and_check(
    context: dg.AssetExecutionContext,
    spec: AgentSpec,
    project: HoloDeckProject,
    history: RunHistory,
    reports: dict[str, RunReport],
) -> dict[str, list[Verdict]]:
    """Write each cell's run to the history and read its checks on that connection: the
    history is opened once for the step's cells, each run written in its own transaction; then
    every cell against the agent's baseline cell, adjusted over the step's cells."""
    # duckdb and pyarrow load here (or earlier, preloaded by agent_responses), not with
    # the definitions every sensor tick and code server reload
    from holodeck_core.engine.record import recording

    runs = {key: (report.eval_run, location(report.path)) for key, report in reports.items()}
    files = {key: redact_text(report.path) for key, report in reports.items()}
    checked: dict[str, list[Verdict]] = {}
    newly: dict[str, bool] = {}
    with (
        history_failure(files),
        recording(history.path, runs, prompts_dir=project.project().prompts_dir) as record,
    ):
        for key, (run, _) in runs.items():
            with history_failure({key: files[key]}), record.run(key) as (written, con):
                checked[key] = run_checks(con, run, spec.evaluations)
            newly[key] = written
        with history_failure(files):
            run_ids = {key: run.metadata.run_id or "" for key, (run, _) in runs.items()}
            for key, verdict in matrix_checks(context, spec, record.con, run_ids).items():
                checked[key].append(verdict)
    for key, (run, _) in runs.items():
        skipped = skipped_checks(checked[key])
        for check, reason in skipped.items():
            context.log.info(f"{cell_of(key).label}: check {check} skipped: {reason}")
        context.add_asset_metadata(
            {
                "run_id": run.metadata.run_id or "",
                "newly_ingested": newly[key],
                "db": str(history.path),
                "checks skipped": skipped_table(skipped),
            },
            partition_key=key,
        )
    return checked


def matrix_checks(
    context: dg.AssetExecutionContext,
    spec: AgentSpec,
    con: "duckdb.DuckDBPyConnection",
    run_ids: dict[str, str],
) -> dict[str, Verdict]:
    """``matrix_vs_baseline`` of each cell: the baseline cell is the grid's first prompt
    version (the first the sensor added) with the agent's own model."""
    rows = context.instance.get_dynamic_partitions(spec.partitions.name or "")
    baseline = Cell(rows[0] if rows else cell_of(next(iter(run_ids))).prompt, spec.own_model)
    found = cells_of(con, run_ids, (baseline.prompt, baseline.model), spec.evaluations)
    return {key: matrix_result(check, baseline.label) for key, check in found.items()}


async def respond(stage: Suite, *, preload: bool) -> AgentResponses:
    """The agent stage. With the later steps in this process (the in-process executor), what
    they import loads on a worker thread while the model calls run; the SDK is imported first
    (by opening the runtime), since a concurrent import would delay the first call."""
    try:
        if preload:
            await stage.open_tools()
            preload_history()
        return await run_agent_stage(stage)
    finally:
        await stage.aclose()  # run_agent_stage closes it too; this covers a failed open
