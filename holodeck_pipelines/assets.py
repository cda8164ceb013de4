"""One asset group per agent (DESIGN §3.1): four stages partitioned by prompt version, then
the history write with the run's checks.

    processed_files → agent_responses → metric_results → report_summary → eval_history

Every asset is a thin wrapper over ``holodeck_core.runner.stages``."""

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from holodeck_core.config.loader import LoadedAgent, load_agent
from holodeck_core.config.project import location
from holodeck_core.history.ingest import ingest_run
from holodeck_core.history.regression import previous_run_flips
from holodeck_core.models import EvalRun, Status, Trigger
from holodeck_core.naming import dagster_name, partitions_def_name
from holodeck_core.redaction import redact_text
from holodeck_core.reports import render_markdown
from holodeck_core.runner.gates import check_gate
from holodeck_core.runner.stages import (
    AgentResponses,
    MetricResults,
    ProcessedFiles,
    RunReport,
    process_suite_files,
    run_agent_stage,
    run_metric_stage,
    write_report,
)
from holodeck_core.runner.suite import Suite, SuiteOptions
from holodeck_pipelines.resources import HoloDeckProject, ModelProviderKeys, RunHistory

LLM_POOL = "llm_api"
HISTORY_POOL = "history_db"
TRIGGER_TAG = "holodeck/trigger"
MAX_FAILING_ROWS = 50


def trigger_of(context: dg.AssetExecutionContext) -> Trigger:
    tags = context.run.tags
    if TRIGGER_TAG in tags:
        return Trigger(tags[TRIGGER_TAG])
    if "dagster/backfill" in tags:
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
    owner_tags = {"holodeck/agent": name}
    owners = [f"team:{dagster_name(loaded.agent.author)}"] if loaded.agent.author else []
    common: dict[str, Any] = {
        "owners": owners,
        "key_prefix": [name],
        "group_name": name,
        "partitions_def": partitions,
        "tags": owner_tags,
        "io_manager_key": "holodeck_io_manager",
    }

    def suite(
        context: dg.AssetExecutionContext,
        project: HoloDeckProject,
        keys: ModelProviderKeys | None = None,
    ) -> Suite:
        options = SuiteOptions(
            prompt_key=context.partition_key,
            trigger=trigger_of(context),
            dagster_run_id=context.run.run_id,
            partition_key=context.partition_key,
            cli_args=[f"dagster:{context.job_def.name}"],
            api_keys=keys.fallbacks() if keys else {},
        )
        return Suite(load_agent(agent_file), options, project=project.project())

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
        result = asyncio.run(process_suite_files(suite(context, project)))
        errors = result.errors
        context.add_output_metadata({"files": result.count, "cases_with_file_errors": len(errors)})
        for case_id, messages in errors.items():
            context.log.warning(redact_text(f"case {case_id}: {'; '.join(messages)}"))
        return result

    @dg.asset(
        name="agent_responses",
        kinds={"python", loaded.agent.model.provider.value},
        description=f"{loaded.agent.name}: the agent's answer, tool calls and token usage per "
        "test case. Finished cases are journaled, so a rerun pays only for the rest.",
        pool=LLM_POOL,
        retry_policy=dg.RetryPolicy(max_retries=2, delay=5, backoff=dg.Backoff.EXPONENTIAL),
        deps=[processed_files],
        **common,
    )
    def agent_responses(
        context: dg.AssetExecutionContext, project: HoloDeckProject, keys: ModelProviderKeys
    ) -> AgentResponses:
        stage = suite(context, project, keys)
        result = asyncio.run(run_agent_stage(stage))
        resumed = sum(1 for run in result.runs if run.resumed)
        usage = [run.usage.total_tokens for run in result.runs]
        metadata = {
            "cases": len(result.runs),
            "resumed_from_journal": resumed,
            "case_errors": sum(1 for run in result.runs if run.error),
            "total_tokens": sum(usage),
            "model_calls": int(str(result.scheduler.get("calls", 0))),
        }
        failing = result.transient_failures
        if failing:
            # §6.8: finished cases are journaled; fail so a retry or UI rerun resumes.
            raise dg.Failure(
                description=f"{len(failing)} cases failed transiently after retries "
                f"({', '.join(failing[:10])}); rerun the partition to resume",
                metadata=metadata,
            )
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
            raise dg.Failure(
                description=f"{result.judge_transient_failures} judge calls failed transiently "
                "after retries; rerun the partition to finish scoring",
                metadata=metadata,
            )
        context.add_output_metadata(metadata)
        return result

    @dg.asset(
        name="report_summary",
        kinds={"python", "json"},
        description=f"{loaded.agent.name}: the run's TestReport and summary, written as an "
        "EvalRun file (results/<slug>/<timestamp>.json) before anything else.",
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
        context.add_output_metadata(report_metadata(report.eval_run, report.path))
        return report

    @dg.asset(
        name="eval_history",
        kinds={"duckdb"},
        description=f"{loaded.agent.name}: the EvalRun appended to the DuckDB history "
        "(one short transaction, idempotent by run id), with the run's checks.",
        pool=HISTORY_POOL,
        check_specs=[
            dg.AssetCheckSpec(
                "pass_rate_gate",
                asset=dg.AssetKey([name, "eval_history"]),
                description="The pass rate and error count meet evaluations.gate.",
            ),
            dg.AssetCheckSpec(
                "no_regression",
                asset=dg.AssetKey([name, "eval_history"]),
                description="No case that passed in the previous run of this prompt version "
                "fails or errors now.",
            ),
            dg.AssetCheckSpec(
                "no_errored_cases",
                asset=dg.AssetKey([name, "eval_history"]),
                description="Every case could be evaluated (no ERROR status).",
            ),
        ],
        **common,
    )
    def eval_history(
        context: dg.AssetExecutionContext,
        project: HoloDeckProject,
        history: RunHistory,
        report_summary: RunReport,
    ) -> Iterator[dg.Output[RunReport] | dg.AssetCheckResult]:
        run = report_summary.eval_run
        run_id = run.metadata.run_id or ""
        written = ingest_run(
            history.path,
            run,
            source_path=location(report_summary.path),
            prompts_dir=project.project().prompts_dir,
        )
        summary = run.report.summary
        gate = check_gate(
            summary, loaded.agent.evaluations.gate if loaded.agent.evaluations else None
        )
        checks = [
            dg.AssetCheckResult(
                check_name="pass_rate_gate",
                passed=gate.passed,
                severity=dg.AssetCheckSeverity.ERROR,
                description=gate.description,
                metadata={"pass_rate": summary.pass_rate / 100, "errored": summary.errored},
            ),
        ]
        previous, flips = previous_run_flips(history.path, run_id)
        regressions = [f for f in flips if f.regression]
        checks.append(
            dg.AssetCheckResult(
                check_name="no_regression",
                passed=not regressions,
                severity=dg.AssetCheckSeverity.WARN,
                description=(
                    "first run of this prompt version"
                    if previous is None
                    else f"{len(regressions)} regressions against run {previous}"
                ),
                metadata={
                    "previous_run_id": previous or "",
                    "regressed_cases": ", ".join(f.case_id for f in regressions[:20]),
                },
            )
        )
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
        yield from checks

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


def report_metadata(run: EvalRun, path: str) -> dict[str, Any]:
    """Numbers the UI plots across materializations, the Markdown report, failing cases."""
    summary = run.report.summary
    metadata: dict[str, Any] = {
        "pass_rate": dg.MetadataValue.float(summary.pass_rate / 100),
        "passed": summary.passed,
        "failed": summary.failed,
        "errored": summary.errored,
        "wall_time_s": dg.MetadataValue.float((summary.wall_time_ms or 0) / 1000),
        "total_tokens": summary.token_usage.total_tokens if summary.token_usage else 0,
        "prompt_version": run.metadata.prompt_version.version,
        "run_id": run.metadata.run_id or "",
        "eval_run_path": dg.MetadataValue.path(path),
        "report": dg.MetadataValue.md(render_markdown(run.report)),
    }
    if summary.cost_usd is not None:
        metadata["cost_usd"] = dg.MetadataValue.float(summary.cost_usd)
    for metric, score in summary.average_scores.items():
        metadata[f"score/{metric}"] = dg.MetadataValue.float(score)
    failing = [r for r in run.report.results if r.status is not Status.PASS][:MAX_FAILING_ROWS]
    metadata["failing_cases"] = dg.MetadataValue.table(
        records=[
            dg.TableRecord(
                {
                    "case": r.test_id or "",
                    "status": r.status.value,
                    "reason": (r.errors[0] if r.errors else "below threshold")[:200],
                }
            )
            for r in failing
        ],
        schema=dg.TableSchema(
            columns=[
                dg.TableColumn("case", "string"),
                dg.TableColumn("status", "string"),
                dg.TableColumn("reason", "string"),
            ]
        ),
    )
    return metadata
