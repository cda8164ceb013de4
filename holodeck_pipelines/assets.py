"""One asset group per agent (DESIGN §3.1): four stages partitioned by prompt version, then
the history write with the run's checks.

    processed_files → agent_responses → metric_results → report_summary → eval_history

Every asset is a thin wrapper over ``holodeck_core.engine.stages``."""

import asyncio
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from holodeck_core.config.cached import loaded_agent
from holodeck_core.config.loader import LoadedAgent
from holodeck_core.config.project import location
from holodeck_core.defaults import ALPHA, TRIALS_MAX, TRIALS_MIN
from holodeck_core.engine.plan import estimate_cost
from holodeck_core.engine.run import shared_budgets
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
from holodeck_core.errors import ConfigError
from holodeck_core.history.backend import project_history
from holodeck_core.history.cost_check import cost_check
from holodeck_core.history.regression import regression_check
from holodeck_core.models import Status, Trigger
from holodeck_core.naming import dagster_name, partitions_def_name
from holodeck_core.redaction import redact_text
from holodeck_core.runner.gates import check_gate
from holodeck_core.runner.suite import Suite, SuiteOptions
from holodeck_pipelines.checks import failing_partitions, in_partition, partitioned_checks
from holodeck_pipelines.failures import (
    history_failure,
    metric_errors,
    stage_errors,
    stage_failure,
)
from holodeck_pipelines.metadata import estimate_metadata, report_metadata, usd_text
from holodeck_pipelines.pools import HISTORY_POOL, LLM_POOL, require_pools
from holodeck_pipelines.resources import HoloDeckProject, ModelProviderKeys, RunHistory
from holodeck_pipelines.verdicts import (
    agreement_result,
    cost_result,
    drift_result,
    regression_result,
)

TRIGGER_TAG = "holodeck/trigger"
TRIALS_TAG = "holodeck/trials"
AGENT_TAG = "holodeck/agent"
AGENT_STEP_RETRIES = 2
BACKFILL_TAG = "dagster/backfill"
ESTIMATE_TAG = "holodeck/estimate_usd"
BUDGET_TROUBLE = "were stopped by a budget"


def trigger_of(tags: Mapping[str, str]) -> Trigger:
    """What started a run, from its tags: ours where we launched it, else Dagster's own
    (a backfill, a schedule, a sensor); a run launched by hand in the UI has none."""
    if TRIGGER_TAG in tags:
        return Trigger(tags[TRIGGER_TAG])
    if BACKFILL_TAG in tags:
        return Trigger.BACKFILL
    if "dagster/schedule_name" in tags:
        return Trigger.NIGHTLY
    if "dagster/sensor_name" in tags:
        return Trigger.SENSOR
    return Trigger.MANUAL


@dataclass(frozen=True)
class AgentPipeline:
    """The Dagster objects of one agent."""

    agent_file: Path
    name: str
    partitions: dg.DynamicPartitionsDefinition
    assets: list[dg.AssetsDefinition]
    job: Any  # what dg.define_asset_job returns (not exported under a public name)


def build_agent_pipeline(agent_file: Path, loaded: LoadedAgent) -> AgentPipeline:
    name = dagster_name(loaded.agent.name)
    partitions = dg.DynamicPartitionsDefinition(name=partitions_def_name(loaded.agent.name))
    owner_tags = {AGENT_TAG: name}
    owners = [f"team:{dagster_name(loaded.agent.author)}"] if loaded.agent.author else []
    common: dict[str, Any] = {
        "owners": owners,
        "key_prefix": [name],
        "group_name": name,
        "partitions_def": partitions,
        "tags": owner_tags,
        "io_manager_key": "holodeck_io_manager",
    }
    evaluations = loaded.agent.evaluations
    cost_spec = (
        {
            "cost_regression": "The cost per passing case rose by at most "
            "evaluations.max_cost_increase against the run no_regression compares with "
            "(an unknown cost: skipped, with the reason)."
        }
        if evaluations and evaluations.max_cost_increase is not None
        else {}
    )

    def suite(
        context: dg.AssetExecutionContext,
        project: HoloDeckProject,
        keys: ModelProviderKeys | None = None,
    ) -> Suite:
        options = SuiteOptions(
            prompt_key=context.partition_key,
            trigger=trigger_of(context.run.tags),
            dagster_run_id=context.run.run_id,
            partition_key=context.partition_key,
            cli_args=[f"dagster:{context.job_def.name}"],
            api_keys=keys.fallbacks() if keys else {},
            trials=trials_of(context),
            shared_budgets=shared_budgets(context.run.tags.get(BACKFILL_TAG)),
        )
        try:
            require_pools(context.instance, project.project())
            built = Suite(loaded_agent(agent_file), options, project=project.project())
        except ConfigError as exc:
            # e.g. a partition added by hand in the UI with no prompt snapshot behind it: no
            # retry can fix that, so fail at once and say which versions exist
            raise dg.Failure(
                description=redact_text(str(exc)),
                metadata={"partition": context.partition_key},
                allow_retries=False,
            ) from None
        label_run(
            context, {AGENT_TAG: name, TRIGGER_TAG: options.trigger, TRIALS_TAG: built.trials}
        )
        return built

    @dg.asset(
        name="processed_files",
        kinds={"python", "markitdown"},
        description=f"{loaded.agent.name}: test-case attachments converted to Markdown "
        "(content-addressed cache: repeats across prompt versions are free).",
        **common,
    )
    def processed_files(
        context: dg.AssetExecutionContext, project: HoloDeckProject
    ) -> ProcessedFiles:
        stage = suite(context, project)
        estimate = estimate_cost(
            stage.loaded,
            project_history(stage.project),
            stage.prompt_key,
            stage.prompt.body,
            stage.trials,
        )
        # before the agent step spends anything: on the run (its tags show in the backfill's
        # runs) and on this first materialization of the run
        label_run(context, {ESTIMATE_TAG: usd_text(estimate.total_usd)})
        result = asyncio.run(process_suite_files(stage))
        errors = result.errors
        context.add_output_metadata(
            {
                "files": result.count,
                "cases_with_file_errors": len(errors),
                **estimate_metadata(estimate),
            }
        )
        for case_id, messages in errors.items():
            context.log.warning(redact_text(f"case {case_id}: {'; '.join(messages)}"))
        return result

    @dg.asset(
        name="agent_responses",
        kinds={"python", loaded.agent.model.provider.value},
        description=f"{loaded.agent.name}: the agent's answer, tool calls and token usage per "
        "test case. Finished cases are journaled, so a rerun pays only for the rest.",
        pool=LLM_POOL,
        retry_policy=dg.RetryPolicy(
            max_retries=AGENT_STEP_RETRIES, delay=5, backoff=dg.Backoff.EXPONENTIAL
        ),
        deps=[processed_files],
        **common,
    )
    def agent_responses(
        context: dg.AssetExecutionContext, project: HoloDeckProject, keys: ModelProviderKeys
    ) -> AgentResponses:
        with stage_errors(context, retries=AGENT_STEP_RETRIES):
            stage = suite(context, project, keys)
            result = asyncio.run(
                respond(stage, preload=context.job_def.executor_def.name == "in_process")
            )
        resumed = sum(1 for run in result.runs if run.resumed)
        usage = [run.usage.total_tokens for run in result.runs]
        metadata = {
            "cases": len(result.runs),
            "resumed_from_journal": resumed,
            "case_errors": sum(1 for run in result.runs if run.error),
            "total_tokens": sum(usage),
            # calls that got an answer: a refused connection is an attempt, not a call
            "model_calls": int(str(result.scheduler.get("answered", 0))),
            "model_call_attempts": int(str(result.scheduler.get("attempts", 0))),
        }
        failing = [(run.case_id, run.error or "") for run in result.runs if run.transient]
        stopped = [(run.case_id, run.error or "") for run in result.runs if run.budget_stopped]
        if stopped:  # a retry would be refused again: fail at once, naming the budget
            raise stage_failure(context, "cases", stopped, metadata, trouble=BUDGET_TROUBLE)
        if failing:
            # §6.8: finished cases are journaled; fail so a retry or UI rerun resumes.
            raise stage_failure(context, "cases", failing, metadata, retries=AGENT_STEP_RETRIES)
        context.add_output_metadata(metadata)
        return result

    @dg.asset(
        name="metric_results",
        kinds={"python"},
        description=f"{loaded.agent.name}: metric scores and PASS/FAIL/ERROR per test case "
        "(LLM-judge answers are cached).",
        pool=LLM_POOL,
        **common,
    )
    def metric_results(
        context: dg.AssetExecutionContext,
        project: HoloDeckProject,
        keys: ModelProviderKeys,
        agent_responses: AgentResponses,
    ) -> MetricResults:
        result = asyncio.run(run_metric_stage(suite(context, project, keys), agent_responses))
        statuses = [r.status for r in result.results]
        metadata = {status.value.lower(): statuses.count(status) for status in Status}
        if result.judge_transient_failures:
            # §6.8: successful judge answers are cached, so a rerun pays only for the rest
            raise stage_failure(
                context,
                "judge calls",
                metric_errors(result.results),
                metadata,
                count=result.judge_transient_failures,
            )
        context.add_output_metadata(metadata)
        return result

    @dg.asset(
        name="report_summary",
        kinds={"python", "json"},
        description=f"{loaded.agent.name}: the run's TestReport and summary, written as an "
        "EvalRun file (`results/<slug>/<timestamp>.json`) before anything else.",
        **common,
    )
    def report_summary(
        context: dg.AssetExecutionContext,
        project: HoloDeckProject,
        keys: ModelProviderKeys,
        agent_responses: AgentResponses,
        metric_results: MetricResults,
    ) -> RunReport:
        report = write_report(suite(context, project, keys), agent_responses, metric_results)
        dashboard_url = project.project().settings.dashboard_url
        context.add_output_metadata(report_metadata(report.eval_run, report.path, dashboard_url))
        return report

    @dg.asset(
        name="eval_history",
        kinds={"duckdb"},
        description=f"{loaded.agent.name}: the EvalRun appended to the DuckDB history "
        "(one short transaction, idempotent by run id), with the run's checks.",
        pool=HISTORY_POOL,
        check_specs=partitioned_checks(
            dg.AssetKey([name, "eval_history"]),
            partitions,
            {
                "pass_rate_gate": "The pass rate and error count meet evaluations.gate.",
                "no_regression": "No significant drop of the paired pass fraction against the "
                "previous run of this prompt version (or evaluations.baseline); with "
                "evaluations.regression: strict, no case that passed then fails now.",
                "judge_agreement": "Each judge agrees with the human labels of this agent's "
                "cases (Cohen's kappa at least evaluations.min_judge_kappa).",
                "judge_drift": "The judges score the evaluations.judge_control rows as they "
                "first did (within evaluations.judge_drift_max).",
                "no_errored_cases": "Every case could be evaluated (no ERROR status).",
                **cost_spec,
            },
        ),
        **common,
    )
    def eval_history(
        context: dg.AssetExecutionContext,
        project: HoloDeckProject,
        history: RunHistory,
        report_summary: RunReport,
    ) -> Iterator[dg.Output[RunReport] | dg.AssetCheckResult]:
        # duckdb and pyarrow load here (or earlier, preloaded by agent_responses), not with
        # the definitions every sensor tick and code server reload
        from holodeck_core.engine.record import recorded

        run = report_summary.eval_run
        run_id = run.metadata.run_id or ""
        summary = run.report.summary
        partition = context.partition_key
        gate = check_gate(summary, evaluations.gate if evaluations else None)
        checks = [
            dg.AssetCheckResult(
                check_name="pass_rate_gate",
                passed=gate.passed,
                severity=dg.AssetCheckSeverity.ERROR,
                description=gate.description,
                metadata={
                    "pass_rate": summary.pass_rate / 100,
                    "errored": summary.errored,
                    "gate": gate.rule,
                },
            ),
        ]
        # the history is opened once: the run is written and the checks read on that connection
        with (
            history_failure(context, redact_text(report_summary.path)),
            recorded(
                history.path,
                run,
                source_path=location(report_summary.path),
                prompts_dir=project.project().prompts_dir,
            ) as (written, con),
        ):
            regression = regression_check(
                con,
                run_id,
                baseline=evaluations.baseline if evaluations else None,
                strict=bool(evaluations and evaluations.regression == "strict"),
                alpha=(evaluations.alpha if evaluations else None) or ALPHA,
            )
            checks.append(regression_result(regression))
            if evaluations and evaluations.max_cost_increase is not None:
                limit = evaluations.max_cost_increase
                found = cost_check(con, run_id, regression.previous, limit,
                                   not_compared=regression.not_compared)  # fmt: skip
                checks.append(cost_result(found))
            checks.append(drift_result(con, run_id, evaluations))
            checks.append(agreement_result(con, run_id, evaluations))
        checks.append(
            dg.AssetCheckResult(
                check_name="no_errored_cases",
                passed=summary.errored == 0,
                severity=dg.AssetCheckSeverity.WARN,
                description=f"{summary.errored} cases could not be evaluated",
            )
        )
        yield dg.Output(
            report_summary,
            metadata={"run_id": run_id, "newly_ingested": written, "db": str(history.path)},
        )
        for check in checks:
            key = dg.AssetCheckKey(dg.AssetKey([name, "eval_history"]), check.check_name or "")
            yield in_partition(check, partition, failing_partitions(context.instance, key))

    return AgentPipeline(
        agent_file=agent_file,
        name=name,
        partitions=partitions,
        assets=[processed_files, agent_responses, metric_results, report_summary, eval_history],
        job=dg.define_asset_job(
            f"{name}_eval",
            selection=dg.AssetSelection.groups(name),
            description=f"Evaluate {loaded.agent.name} on one prompt version.",
            tags=owner_tags,
        ),
    )


def label_run(context: dg.AssetExecutionContext, tags: Mapping[str, object]) -> None:
    """Give a run launched without our tags (a plain materialization from the UI, a
    re-execution) the tags the demo, the schedule and the sensor set, with the values this run
    assumed (its agent, trigger and trials), so every run reads and filters alike."""
    missing = {key: str(value) for key, value in tags.items() if key not in context.run.tags}
    if missing:
        context.instance.add_run_tags(context.run.run_id, missing)
        context.log.info(f"run tags added (what this run assumed): {missing}")


def trials_of(context: dg.AssetExecutionContext) -> int | None:
    """``holodeck/trials: K`` on the run overrides ``execution.trials``."""
    value = context.run.tags.get(TRIALS_TAG)
    if value is None:
        return None
    if not value.isdigit() or not TRIALS_MIN <= int(value) <= TRIALS_MAX:
        raise dg.Failure(
            description=f"tag {TRIALS_TAG}={value!r}: give an integer {TRIALS_MIN}-{TRIALS_MAX}"
        )
    return int(value)


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
