"""Score a stored run again with the current metric configuration (``holodeck rescore``).

The agent is not called. Judge answers come from the judge cache where they can, so only new
or changed judge questions cost a call. The result is a new EvalRun (trigger ``rescore``)
whose cost is those judge calls (docs/cost.md), per case and in all."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.config import remote
from holodeck_core.engine.loop import run_to_end
from holodeck_core.errors import ConfigError
from holodeck_core.history.tabular import literal

if TYPE_CHECKING:
    from upath import UPath

    from holodeck_core.config.loader import LoadedAgent
    from holodeck_core.config.project import Location, Project
    from holodeck_core.history.store import History
    from holodeck_core.models import EvalRun, Gate


@dataclass
class Rescored:
    """A rescored run, where its EvalRun file was written, the project whose history records
    it and the agent's gate."""

    run: EvalRun
    path: Path | UPath
    project: Project
    gate: Gate | None


def rescore_stored(ref: str, history: History, agent: str | None = None) -> Rescored:
    """``holodeck rescore``: the run ``ref`` names (an EvalRun file, its URL or a run id in
    ``history``) scored again by ``agent`` (default: the agent beside its results folder, else
    the project's agent of its name), and its EvalRun file written."""
    from holodeck_core.config.loader import load_agent
    from holodeck_core.config.project import Project
    from holodeck_core.reports import write_eval_run

    source = eval_run_file(ref, history)
    original = load_stored_run(source)
    loaded = load_agent(
        agent or agent_file(source, original, Project.discover()),
        model=original.metadata.model_candidate,  # the run's model candidate, as it was run
    )
    project = Project.discover(loaded.base_dir)
    run = run_to_end(rescore_run(original, loaded, project))
    return Rescored(run, write_eval_run(run, loaded.file), project, loaded.agent.gate)


def load_stored_run(source: Location) -> EvalRun:
    """The EvalRun in ``source`` (ours or HoloDeck's), or a ConfigError naming the file."""
    from holodeck_core.history.holodeck_import import NotAnEvalRun, load_run_file

    try:
        return load_run_file(source).run
    except NotAnEvalRun as exc:
        raise ConfigError(f"{source}: {exc}") from None


async def rescore_run(original: EvalRun, loaded: LoadedAgent, project: Project) -> EvalRun:
    """Every stored trial scored again by ``loaded``'s metrics, the trials reduced again: a
    new run (trigger ``rescore``) that names the one it came from."""
    from holodeck_core.calls.ledger import Ledger
    from holodeck_core.calls.prices import load_price_table
    from holodeck_core.calls.scheduler import CallScheduler
    from holodeck_core.defaults import REDUCER
    from holodeck_core.metrics.judge import JudgeServices
    from holodeck_core.metrics.rescore import rescore_results
    from holodeck_core.models import EvalRun, ReportSummary, Trigger
    from holodeck_core.providers.factory import make_client
    from holodeck_core.redaction import redact
    from holodeck_core.runner.execute import now_iso
    from holodeck_core.runner.spend import run_cost, with_case_costs
    from holodeck_core.runner.trials import combine_trials
    from holodeck_core.stats import Reducer

    pricing = project.settings.pricing
    ledger = Ledger(load_price_table(pricing))
    scheduler = CallScheduler(loaded.agent.parallel_test_cases, ledger=ledger)
    services = JudgeServices.for_agent(
        loaded.agent,
        scheduler,
        project=project,
        client_factory=lambda model: make_client(model, where="judge"),
    )
    execution = loaded.agent.execution
    reducer = (execution.reducer if execution else None) or Reducer(REDUCER)
    stored = original.report.results
    async with services:  # each trial is re-scored, then the case's trials are reduced again
        flat = await rescore_results(
            [trial for result in stored for trial in result.trials or [result]],
            loaded.agent,
            context=services.context(base_dir=loaded.base_dir),
        )
    rescored = iter(flat)
    costs = ledger.snapshot()
    results = with_case_costs(
        [combine_trials([next(rescored) for _ in range(r.trial_count)], reducer) for r in stored],
        costs,
    )
    summary = ReportSummary.from_results(
        results,
        wall_time_ms=original.report.summary.wall_time_ms,
        reducer=reducer,
        max_error_share=loaded.agent.max_error_share,
    )
    cost = run_cost(costs, pricing)
    report = original.report.model_copy(
        update={
            "results": results,
            "summary": summary.model_copy(update={"cost_usd": cost.total_usd, "cost": cost}),
            "timestamp": now_iso(),
        }
    )
    metadata = original.metadata.model_copy(
        update={
            "agent_config": loaded.agent,
            "run_id": uuid.uuid4().hex,
            "trigger": Trigger.RESCORE,
            "cli_args": ["rescore", str(original.metadata.run_id or "")],
            "provenance": {
                **original.metadata.provenance,
                **services.provenance(),
                "rescored_from": original.metadata.run_id,
            },
        }
    )
    return redact(EvalRun(report=report, metadata=metadata), loaded.secrets)


def eval_run_file(ref: str, history: History | None = None) -> Location:
    """``ref`` when it is a file or an object's URL (``s3://…/run.json``), else the EvalRun
    file the history knows for that run id (``history``, else the project's)."""
    from holodeck_core.config.project import location

    if "://" in ref:
        return _existing(location(ref), ref)
    candidate = Path(ref)
    if candidate.is_file():
        return candidate
    from holodeck_core.history.backend import resolve_history
    from holodeck_core.history.queries import resolve_run
    from holodeck_core.history.store import reader

    with reader(history or resolve_history()) as con:
        run_id = resolve_run(con, ref)
        row = con.execute(
            f"SELECT source_path FROM eval_runs WHERE run_id = {literal(run_id)}"
        ).fetchone()
    if not row or not row[0]:
        raise ConfigError(f"run {run_id} has no EvalRun file recorded; pass the file instead")
    return _existing(location(str(row[0])), f"run {run_id}'s EvalRun {row[0]}")


def _existing(source: Location, what: str) -> Location:
    if isinstance(source, Path):
        found = source.is_file()
    else:  # ``info``, not ``is_file``: fsspec's is_file calls any failure "no file"
        if remote.on_s3(str(source)):
            remote.require_s3_credentials(what)
        try:
            found = source.fs.info(source.path)["type"] == "file"
        except FileNotFoundError:
            found = False
        except Exception as exc:
            failure = remote.s3_failure(exc, what)
            if failure is None:
                raise
            raise failure from None
    if not found:
        raise ConfigError(f"no EvalRun at {what}; pass an EvalRun file or a run id")
    return source


def agent_file(source: Location, run: EvalRun, project: Project) -> Path:
    """The agent of the stored run: ``<agent dir>/<agent_config_path>`` for a run in
    ``<agent dir>/results/<slug>/[holodeck-pipelines/]``; for one elsewhere (object storage,
    ``results_url``), the project's agent of the run's name."""
    from holodeck_core.config.project import results_folder_of
    from holodeck_core.naming import slugify

    name = Path(run.report.agent_config_path).name
    if isinstance(source, Path):
        candidate = results_folder_of(source.resolve()).parent.parent / name
        if candidate.is_file():
            return candidate
    slug = slugify(run.report.agent_name)
    for path in project.agent_paths():
        if path.is_file() and slugify(_agent_name(path)) == slug:
            return path
    raise ConfigError(
        f"cannot find the agent of {source} ({run.report.agent_name!r}: not beside the file, "
        "nor among holodeck.yaml's agents); pass --agent AGENT_YAML"
    )


def _agent_name(path: Path) -> str:
    """The ``name:`` of an agent file, read without loading the agent ("" if unreadable)."""
    import yaml

    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return ""
    return str(document.get("name") or "") if isinstance(document, dict) else ""
