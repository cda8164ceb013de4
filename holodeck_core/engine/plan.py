"""``holodeck plan``: what a run will cost (calls, tokens and dollars per heading, from the
history's measured spend per case, else from the prompt and case sizes; docs/cost.md), and how
many cases and trials a comparison needs to see a drop, from the latest recorded run's
variances (docs/cli.md)."""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.errors import ConfigError, ExecutionError, NoHistoryError
from holodeck_core.models.cost import Heading, HeadingCost, RunEstimate, total_usd

if TYPE_CHECKING:
    import duckdb

    from holodeck_core.calls.prices import PriceTable
    from holodeck_core.config.loader import LoadedAgent
    from holodeck_core.config.project import Project
    from holodeck_core.history.store import History
    from holodeck_core.models import TestCaseModel, TokenUsage
    from holodeck_core.models.agent import BatchMode
    from holodeck_core.stats import PowerPlan


@dataclass(frozen=True)
class HistoryPlan:
    """A power plan and the recorded run it was computed from (its configuration: the agent's
    ``prompt_version`` x ``model_candidate``)."""

    run_id: str
    prompt_version: str
    model_candidate: str
    trials: int
    plan: PowerPlan
    warnings: tuple[str, ...] = ()
    """What makes the plan a weak estimate (one trial per case, no variance to measure)."""


NEWEST_RUN_OF_CANDIDATE = """
SELECT run_id, prompt_version FROM eval_runs
WHERE agent_slug = ? AND model_candidate = ? AND trigger IS DISTINCT FROM 'rescore'
ORDER BY finished_at DESC, run_id DESC LIMIT 1
"""
"""The newest run of the agent with a model candidate that ran the agent (a rescore re-scores
another run's answers: its trials and variance are not its own)."""


def plan_from_history(
    loaded: LoadedAgent, history: History, *, detect: float, alpha: float, power: float
) -> HistoryPlan:
    """The plan from the newest run in ``history`` of the agent with its loaded model candidate
    (``--model``; default the agent's own model), or a ConfigError saying which run to record
    first."""
    from holodeck_core.history import store
    from holodeck_core.naming import slugify
    from holodeck_core.stats import plan_power

    slug, candidate = slugify(loaded.agent.name), loaded.candidate.name
    with store.reader(history) as con:
        row = con.execute(NEWEST_RUN_OF_CANDIDATE, [slug, candidate]).fetchone()
        if row is None:
            others = con.execute(
                "SELECT DISTINCT model_candidate FROM eval_runs WHERE agent_slug = ? "
                "AND trigger IS DISTINCT FROM 'rescore' ORDER BY 1",
                [slug],
            ).fetchall()
            raise _no_run(loaded, history, [str(r[0]) for r in others])
        cases = con.execute(
            "SELECT pass_fraction, trials FROM v_case_trials WHERE run_id = ?", [row[0]]
        ).fetchall()
    trials = max(int(c[1]) for c in cases)
    fractions = [float(c[0]) for c in cases]
    plan = plan_power(fractions, trials, detect, alpha=alpha, power=power)
    warnings = _warnings(fractions, trials, no_variance=plan.variance_assumed)
    return HistoryPlan(str(row[0]), str(row[1]), candidate, trials, plan, warnings)


def _no_run(loaded: LoadedAgent, history: History, others: list[str]) -> ConfigError:
    """No run of the configuration asked for: the command that records one, and the candidates
    that have runs."""
    candidate = loaded.candidate.name
    message = (
        f"--detect: no recorded run of {loaded.agent.name!r} with model candidate "
        f"{candidate!r} in {history}: run `holodeck test {loaded.display} --model {candidate}` "
        "(ideally with --trials 3 or more) first"
    )
    if others:
        message += (
            f"; runs of model candidate {', '.join(map(repr, others))} are recorded: "
            f"`holodeck plan {loaded.display} --detect D --model NAME` plans from one of them"
        )
    return ConfigError(message, file=loaded.display)


def _warnings(fractions: list[float], trials: int, *, no_variance: bool) -> tuple[str, ...]:
    found = []
    if trials == 1:
        found.append(
            "the run has 1 trial per case: how much a case varies from trial to trial is not "
            "measured, so the rows for more trials are guesses; record a run with --trials 3 "
            "or more"
        )
    if no_variance:
        share = " or ".join(sorted({f"{f:.0%}" for f in fractions}, key=len)) or "no"
        found.append(
            f"every case of the run has pass fraction {share}: it shows no variance, so the "
            "rows assume one (see the assumptions) instead of promising power from zero "
            "variance; record a run whose cases disagree (more trials, or harder cases)"
        )
    return tuple(found)


@dataclass(frozen=True)
class CostEstimate:
    """Expected calls, tokens and dollars per heading of one prompt version's run."""

    prompt_version: str
    cases: int
    trials: int
    source: str
    """``run <id>`` (measured tokens per case) or ``sizes`` (from the prompt and the cases)."""
    headings: dict[Heading, HeadingCost]
    batch: bool = False
    """The agent's and judges' calls priced at their providers' batch prices (the run will
    send them through batches: docs/cost.md)."""

    @property
    def total_usd(self) -> float | None:
        return total_usd(self.headings)

    def summary(self) -> RunEstimate:
        """The totals the EvalRun keeps (``summary.cost.estimate``)."""
        headings = self.headings.values()
        return RunEstimate(
            source=self.source,
            calls=sum(c.calls for c in headings),
            tokens=sum(c.tokens for c in headings),
            usd=self.total_usd,
        )

    def per_case_trial_usd(self) -> float | None:
        total = self.total_usd
        return None if total is None else total / max(self.cases * self.trials, 1)


JUDGE_SCORE_TOKENS = 30
"""A judge's score with its one-sentence reason (G-Eval, the legacy judged metrics)."""
JUDGE_VERDICT_TOKENS = 20
"""One verdict with its short reason in a RAG judge's list of verdicts."""
STATEMENT_TOKENS = 25
"""One claim or statement a RAG judge lists from a text (a sentence of about 20 words)."""
TYPICAL_ANSWER_TOKENS = 100
"""An agent's answer where the case gives no expected one (``max_tokens`` caps it)."""
TOOL_SCHEMA_TOKENS = 40
"""A tool's parameters' JSON schema, beside its name and description."""
TOOL_CALL_TOKENS = 30
"""The agent's reply that calls a tool (its name and arguments)."""
TOOL_RESULT_TOKENS = 100
"""A tool's result, but a retrieval tool's (its ``top_k`` chunks of ``chunk_size``)."""


def typical_tokens(*texts: str) -> int:
    """The plan's token count: a token per 4 characters (OpenAI's rule of thumb for English;
    no tokenizer is a dependency) plus 4 per message for the framing. The budget's holds use
    the generous :func:`~holodeck_core.calls.ledger.estimate_tokens` instead."""
    return sum(-(-len(text) // 4) + 4 for text in texts)


@contextlib.contextmanager
def estimates_reader(
    history: History | None,
) -> Iterator[duckdb.DuckDBPyConnection | None]:
    """One reader for the estimates of several prompt versions (a backfill's step opens the
    history once), or None when nothing is recorded or the history cannot be reached: the
    sizes then estimate (docs/agent-yaml.md)."""
    from holodeck_core.history import store

    with contextlib.ExitStack() as stack:
        try:
            con = stack.enter_context(store.reader(history)) if history is not None else None
        except (NoHistoryError, ExecutionError):
            con = None
        yield con


def estimate_cost(
    loaded: LoadedAgent,
    history: History | duckdb.DuckDBPyConnection | None,
    prompt_version: str,
    body: str,
    trials: int,
    cases: list[TestCaseModel] | None = None,
    batch: bool = False,
) -> CostEstimate:
    """The run's expected spend on ``cases`` (default: all the agent's): measured per case in
    the newest recorded run of this configuration (prompt version and model candidate) with
    costs (cases it lacks at the mean of
    the others), else (nothing recorded, or the history unreachable) from sizes. One history
    read (a few small queries, on ``history`` itself when it is a connection), or none.
    ``batch``: the run sends its agent and judge calls through batches, at the batch prices."""
    cases = loaded.agent.cases if cases is None else cases
    try:
        measured = _measured(loaded, history, prompt_version) if history is not None else None
    except NoHistoryError:  # nothing recorded yet (no file, a lake nobody wrote)
        measured = None
    except ExecutionError:  # an unreachable history: the sizes still estimate (docs/agent-yaml.md)
        measured = None
    if measured is not None:
        run_id, per_case, outside = measured
        mean = _scaled(_summed(list(per_case.values())), 1 / max(len(per_case), 1))
        parts = [per_case.get(case.id or "", mean) for case in cases]
        headings = _summed([_scaled(_summed(parts), trials), outside])
        source = f"run {run_id[:12]}"
    else:
        prices = _prices(loaded)
        sizes = [_by_size(loaded, body, case, prices) for case in cases]
        headings = _scaled(_summed(sizes), trials)
        source = "sizes"
    if batch:
        headings = _at_batch_prices(headings, _batch_shares(loaded))
    return CostEstimate(prompt_version, len(cases), trials, source, headings, batch)


def _prices(loaded: LoadedAgent) -> PriceTable:
    """The project's price table, read once a run, not once a case (2,000 cases: 2,000 walks
    up the folders and reads of $HOLODECK_PRICES)."""
    from holodeck_core.calls.prices import load_price_table
    from holodeck_core.config.project import Project

    return load_price_table(Project.discover(loaded.base_dir).settings.pricing)


BATCHED_HEADINGS: tuple[Heading, ...] = ("agent", "judge")
"""The calls ``execution.batch`` sends through batches (docs/cost.md)."""


def _batch_shares(loaded: LoadedAgent) -> dict[Heading, float]:
    """The share of the list price the agent's and the judges' batches cost (1 for a provider
    without batch prices)."""
    from holodeck_core.providers.table import provider_spec

    agent, evaluations = loaded.agent, loaded.agent.evaluations
    judge = (evaluations.model if evaluations else None) or agent.model
    prices = _prices(loaded)
    return {
        heading: prices.batch_share(provider_spec(model.provider).prices_under)
        for heading, model in zip(BATCHED_HEADINGS, (agent.model, judge), strict=True)
    }


def _at_batch_prices(costs: Costs, shares: dict[Heading, float]) -> Costs:
    """``costs`` at list prices, their batched headings at the batch prices."""
    return {
        heading: c.model_copy(update={"usd": c.usd * shares[heading]})
        if heading in shares and c.usd is not None
        else c
        for heading, c in costs.items()
    }


def _list_usd(usd: float | None, batch_usd: float | None, share: float) -> float | None:
    """A recorded spend at list prices: what batches answered was paid at ``share`` of them."""
    if usd is None or not batch_usd or share <= 0:
        return usd
    return usd - batch_usd + batch_usd / share


def estimate_versions(
    loaded: LoadedAgent,
    project: Project,
    history: History,
    prompt_keys: Sequence[str | None],
    trials: int,
    batch: BatchMode | None = None,
) -> Iterator[CostEstimate]:
    """``holodeck plan``'s estimate of each prompt version in turn (a registered key, or None
    for the current prompt, registered on the way); an unknown key is a ConfigError when its
    turn comes. ``batch`` (``--batch``) over the agent's batch mode, as ``holodeck test``'s."""
    from holodeck_core.runner.batch_mode import batch_plan
    from holodeck_core.runner.options import SuiteOptions, resolve_prompt

    mode, unbatchable = batch_plan(loaded, SuiteOptions(batch=batch), project)
    batching = mode != "off" and unbatchable is None
    for key in prompt_keys:
        prompt, registered = resolve_prompt(loaded, project, key)
        yield estimate_cost(loaded, history, registered, prompt.text, trials, batch=batching)


Costs = dict[Heading, HeadingCost]


def _summed(parts: list[Costs]) -> Costs:
    total: Costs = {}
    for part in parts:
        for heading, cost in part.items():
            total[heading] = total[heading] + cost if heading in total else cost
    return total


def _scaled(costs: Costs, factor: float) -> Costs:
    return {
        heading: HeadingCost(
            calls=round(c.calls * factor),
            prompt_tokens=round(c.prompt_tokens * factor),
            completion_tokens=round(c.completion_tokens * factor),
            usd=None if c.usd is None else c.usd * factor,
            unpriced_calls=round(c.unpriced_calls * factor),
        )
        for heading, c in costs.items()
    }


def _measured(
    loaded: LoadedAgent, history: History | duckdb.DuckDBPyConnection, prompt_version: str
) -> tuple[str, dict[str, Costs], Costs] | None:
    """(run id, per case one trial's spend, the run's spend outside cases), at list prices."""
    from holodeck_core.history import store
    from holodeck_core.history.tabular import literal
    from holodeck_core.naming import slugify

    # values as SQL literals: DuckDB imports pandas for any bound Python parameter (~0.3 s
    # CPU, ~1 s of wall before a run's first call; holodeck_core/history/tabular.py)
    slug, version = literal(slugify(loaded.agent.name)), literal(prompt_version)
    candidate = literal(loaded.candidate.name)
    with store.opened(history) as con:
        row = con.execute(
            "SELECT r.run_id FROM eval_runs r JOIN run_costs USING (run_id) "
            f"WHERE r.agent_slug = {slug} AND r.prompt_version = {version} "
            f"AND r.model_candidate = {candidate} AND EXISTS "
            "(SELECT 1 FROM call_costs c WHERE c.run_id = r.run_id AND c.heading = 'agent') "
            "ORDER BY r.finished_at DESC, r.run_id DESC LIMIT 1"
        ).fetchone()
        if row is None:
            return None
        run_id = str(row[0])
        trials = dict(
            con.execute(
                "SELECT case_id, count(*) FROM case_trials "
                f"WHERE run_id = {literal(run_id)} GROUP BY case_id"
            ).fetchall()
        )
        rows = con.execute(
            "SELECT case_id, heading, calls, prompt_tokens, completion_tokens, cost_usd, "
            f"unpriced_calls, batch_usd FROM call_costs WHERE run_id = {literal(run_id)}"
        ).fetchall()
    # a batched run paid the batch prices: its spend is taken back to list prices, so the
    # estimate applies the batch price only where the coming run batches (never twice)
    shares = _batch_shares(loaded) if any(row[-1] for row in rows) else {}
    per_case: dict[str, Costs] = {}
    outside: Costs = {}
    for case_id, heading, calls, prompt, completion, usd, unpriced, batch_usd in rows:
        cost = HeadingCost(
            calls=calls,
            prompt_tokens=prompt,
            completion_tokens=completion,
            usd=_list_usd(usd, batch_usd, shares.get(heading, 1.0)),
            unpriced_calls=unpriced,
        )
        if case_id == "":
            outside[heading] = cost
        else:
            per_case.setdefault(case_id, {})[heading] = cost
    return (
        run_id,
        {
            case_id: _scaled(costs, 1 / int(trials.get(case_id, 1)))
            for case_id, costs in per_case.items()
        },
        outside,
    )


def _by_size(loaded: LoadedAgent, body: str, case: TestCaseModel, prices: PriceTable) -> Costs:
    """One trial of ``case`` from sizes (:func:`typical_tokens`): a call per turn (the
    prompt, the conversation so far and the tools' names, descriptions and schemas in; the
    expected answer, else a typical one capped by ``max_tokens``, out) and, per turn, the
    judge calls of the metrics it is scored by (precedence turn > case > agent), each the
    metric's own prompt template around the case, priced at its judge's rates."""
    from holodeck_core.metrics.registry import select_metrics
    from holodeck_core.models import LLMProvider, TokenUsage
    from holodeck_core.providers.table import provider_spec

    agent = loaded.agent
    tools = [
        json.dumps({"name": t.name, "description": getattr(t, "description", "")})
        for t in agent.tools or []
    ]
    tool_tokens = typical_tokens(*tools) + TOOL_SCHEMA_TOKENS * len(tools) if tools else 0

    def priced(model: LLMProvider, calls: int, usage: TokenUsage) -> HeadingCost:
        key = provider_spec(model.provider).prices_under
        usd = prices.cost_usd(model.name, usage, key)
        return HeadingCost(
            calls=calls,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            usd=usd,
            unpriced_calls=calls if usd is None else 0,
        )

    evaluations = agent.evaluations
    agent_metrics = evaluations.metrics if evaluations else None
    turns = [
        (t.input, t.ground_truth, t.evaluations, t.expected_tools, t.retrieval_context)
        for t in case.turns or []
    ] or [(case.input or "", case.ground_truth, None, case.expected_tools, None)]
    cap = agent.model.max_tokens or TYPICAL_ANSWER_TOKENS
    prompt = completion = 0
    seen: list[str] = []
    judged: list[HeadingCost] = []
    calls_made = 0
    for text, expected, turn_metrics, expected_tools, turn_context in turns:
        seen.append(text)
        asked = typical_tokens(body, *seen) + tool_tokens
        answer = min(cap, typical_tokens(expected) if expected else TYPICAL_ANSWER_TOKENS)
        # a turn that expects tools is two calls: one calling them, one with their results
        result = _results_tokens(agent.tools or [], expected_tools or [], loaded.base_dir)
        prompt += asked + (asked + TOOL_CALL_TOKENS + result if result else 0)
        completion += answer + (TOOL_CALL_TOKENS if result else 0)
        calls_made += 2 if result else 1
        seen.append(expected or "")
        texts = JudgedTexts(
            case=typical_tokens(text, expected or "") + answer,
            input=typical_tokens(text),
            answer=answer,
            expected=typical_tokens(expected) if expected else 0,
            nodes=_nodes(case, turn_context, result),
        )
        for metric in select_metrics(agent_metrics, case.evaluations, turn_metrics):
            calls, usage = _judge_usage(metric, texts)
            if calls:
                judge = metric.model or (evaluations.model if evaluations else None) or agent.model
                judged.append(priced(judge, calls, usage))
    usage = TokenUsage(prompt_tokens=prompt, completion_tokens=completion)
    out: Costs = {"agent": priced(agent.model, calls_made, usage)}
    if judged:
        out["judge"] = _summed([{"judge": j} for j in judged])["judge"]
    return out


def _results_tokens(tools: Sequence[object], expected: Sequence[object], base: Path) -> int:
    """What the tools a turn expects (``expected_tools``) return: each one's result."""
    total = 0
    for spec in expected:
        name = spec if isinstance(spec, str) else str(getattr(spec, "name", ""))
        found = next((t for t in tools if name in str(getattr(t, "name", ""))), None)
        total += _tool_result_tokens(found, base) if found is not None else 0
    return total


def _tool_result_tokens(tool: object, base: Path) -> int:
    """A tool's result: a retrieval tool's ``top_k`` chunks of ``chunk_size``, at most its
    whole source (its files' sizes, no file read); another tool's, a typical one."""
    from holodeck_core.defaults import RETRIEVAL_CHUNK_SIZE
    from holodeck_core.models.tools import VectorstoreTool

    if not isinstance(tool, VectorstoreTool):
        return TOOL_RESULT_TOKENS
    chunks = tool.top_k * (tool.chunk_size or RETRIEVAL_CHUNK_SIZE)
    size = _source_bytes(base / tool.source)
    return chunks if not size else min(chunks, -(-size // 4))


@functools.cache
def _source_bytes(source: Path) -> int:
    """The size of a retrieval source's files (0: not a local path), listed once a process;
    the sources' caps bound the listing (20,000 files)."""
    if source.is_file():
        return source.stat().st_size
    return sum(p.stat().st_size for p in source.rglob("*") if p.is_file())


def _judge_prompt_tokens(metric: object) -> int:
    """A judge call's own text: the mean of the metric's packaged templates (G-Eval's score
    prompt with its criteria and steps; a RAG metric's prompts; a legacy metric's)."""
    from holodeck_core.models.evaluation import GEvalMetric, RAGMetric, StandardMetric

    if isinstance(metric, GEvalMetric):
        steps = " ".join(metric.evaluation_steps or [])
        return _template_tokens("geval_score") + typical_tokens(metric.criteria + steps)
    if isinstance(metric, RAGMetric):
        return _template_tokens(str(metric.metric_type))
    if isinstance(metric, StandardMetric):
        return _template_tokens(f"legacy_{metric.metric}")
    return 0


@functools.cache
def _template_tokens(prefix: str) -> int:
    from importlib import resources

    from holodeck_core.metrics.judge_prompts import load_prompt

    folder = resources.files("holodeck_core.metrics").joinpath("prompts")
    ids = sorted(f.name[:-4] for f in folder.iterdir() if f.name.startswith(prefix))
    sizes = [typical_tokens(load_prompt(i).system, load_prompt(i).user) for i in ids]
    return sum(sizes) // len(sizes) if sizes else 0


@dataclass(frozen=True)
class JudgedTexts:
    """The sizes, in tokens, of what one turn's judges read and restate."""

    case: int
    """The input, the expected answer and the agent's answer."""
    input: int
    answer: int
    expected: int
    nodes: list[int]
    """Each piece of retrieved context (the case's ``retrieval_context`` or the tools' results)."""


def _nodes(case: TestCaseModel, turn_context: list[str] | None, result: int) -> list[int]:
    """The retrieved context a RAG judge reads: the turn's or the case's ``retrieval_context``,
    else what the expected tools return (one piece), else none."""
    given = turn_context if turn_context is not None else case.retrieval_context
    if given:
        return [typical_tokens(node) for node in given]
    return [result] if result else []


def _statements(tokens: int) -> int:
    """The claims or statements a RAG judge lists from a text of ``tokens`` (at least one)."""
    return max(1, -(-tokens // STATEMENT_TOKENS))


def _judge_usage(metric: object, texts: JudgedTexts) -> tuple[int, TokenUsage]:
    """(calls, tokens) of one scoring of ``metric`` (holodeck_core/metrics/rag.py, geval.py,
    legacy.py): each call's prompt is the metric's packaged template around the case (a RAG
    judge's also the context it reads); what the judge writes depends on the kind of metric: a
    score and a reason, the claims it lists from a text (about that text's size), or a verdict
    per claim or piece of context."""
    from holodeck_core.models import TokenUsage
    from holodeck_core.models.evaluation import (
        LEGACY_JUDGE_METRICS,
        GEvalMetric,
        RAGMetric,
        StandardMetric,
    )

    if not getattr(metric, "enabled", True):
        return 0, TokenUsage()
    template = _judge_prompt_tokens(metric)
    if isinstance(metric, RAGMetric):
        return _rag_usage(str(metric.metric_type), template, texts)
    judged = isinstance(metric, GEvalMetric) or (
        isinstance(metric, StandardMetric) and metric.metric in LEGACY_JUDGE_METRICS
    )
    if not judged:
        return 0, TokenUsage()
    return 1, TokenUsage(prompt_tokens=template + texts.case, completion_tokens=JUDGE_SCORE_TOKENS)


def _rag_usage(kind: str, template: int, texts: JudgedTexts) -> tuple[int, TokenUsage]:
    """What each RAG judge call reads beside its template and writes (holodeck_core/metrics/
    rag.py): faithfulness and answer relevancy ask twice (the answer's claims or statements,
    then a verdict on each against the context or the input); contextual relevancy once per
    piece of context (with the input: the piece's statements, each with a verdict); contextual
    precision and recall once (the context with the expected answer, and the input for
    precision: a verdict per piece, per sentence of the expected answer)."""
    from holodeck_core.models import TokenUsage

    context = sum(texts.nodes)
    claims = _statements(texts.answer)
    listed = claims * STATEMENT_TOKENS
    if kind in ("faithfulness", "answer_relevancy"):
        against = context if kind == "faithfulness" else texts.input
        prompt = 2 * template + texts.answer + listed + against
        written = texts.answer + claims * JUDGE_VERDICT_TOKENS
        return 2, TokenUsage(prompt_tokens=prompt, completion_tokens=written)
    if kind == "contextual_relevancy":
        nodes = texts.nodes or [0]
        prompt = len(nodes) * (template + texts.input) + context
        written = sum(n + _statements(n) * JUDGE_VERDICT_TOKENS for n in nodes)
        return len(nodes), TokenUsage(prompt_tokens=prompt, completion_tokens=written)
    asked = texts.input if kind == "contextual_precision" else 0
    verdicts = len(texts.nodes) if kind == "contextual_precision" else _statements(texts.expected)
    prompt = template + asked + texts.expected + context
    return 1, TokenUsage(prompt_tokens=prompt, completion_tokens=verdicts * JUDGE_VERDICT_TOKENS)
