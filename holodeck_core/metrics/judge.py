"""The judge: what every LLM-judge metric (G-Eval, RAG, legacy 1-5) uses to ask a model.

**Services.** One :class:`JudgeServices` per run holds the judge clients (one per judge
``LLMProvider``), the run's shared :class:`~holodeck_core.calls.scheduler.CallScheduler`,
the :class:`~holodeck_core.metrics.judge_cache.JudgeCache` and the default judge model. It
travels in ``EvalContext.services["judge"]`` (:data:`JUDGE_SERVICE`)::

    services = JudgeServices.for_agent(agent, scheduler, project=project, use_cache=True)
    async with services:
        ctx = services.context(base_dir=agent_dir)
        results = await aevaluate_metrics(metrics, inputs, context=ctx)

Metric functions ask through a :class:`~holodeck_core.metrics.judge_session.JudgeSession`
(one per metric evaluation: model resolution, retry budget, timeout, provenance).

**Judge model**: the metric's ``model``, else ``evaluations.model``, else the agent's model
(:meth:`JudgeServices.for_agent` sets the last two as the default); there is no silent
default (HoloDeck falls back to a local Ollama model). ``MetricResult.model_used`` names it.

**Retries.** Every request goes through the scheduler's one retry loop (docs/architecture.md:
concurrency limit per endpoint, 429 back-off, ``Retry-After``) with the metric's budget:
``1 + retry_on_failure`` attempts (HoloDeck: "number of retries on failure", 1-3; unset: the
scheduler policy's ``max_attempts - 1``, at most 3). So ``retry_count`` is exactly the number
of repeated requests: a judge that fails its first two requests and answers the third records
``retry_count: 2``. Permanent errors (4xx) are not retried.

**Timeout**: ``timeout_ms`` bounds every request (else the scheduler policy's timeout).

**Replies** must hold a JSON object (the first one in the text is used) that passes the
metric's check; otherwise the judge is asked once more (``prompts/json_repair.txt``) and a
second unusable reply is an error. Only usable answers are cached.

**Sharing**: identical questions in flight at the same time are asked once; answers marked
``memo`` (G-Eval's generated steps) are also kept in memory for the run, so they are asked
once even with the disk cache off.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from holodeck_core.calls.errors import ModelCallError
from holodeck_core.calls.scheduler import CallScheduler, endpoint_key
from holodeck_core.metrics.base import EvalContext, MetricError
from holodeck_core.metrics.judge_answer import (
    Check,
    JudgeAnswer,
    JudgeCallError,
    JudgeStats,
    read_reply,
)
from holodeck_core.metrics.judge_cache import JudgeCache, judge_cache_key
from holodeck_core.metrics.judge_parse import number_tokens
from holodeck_core.metrics.judge_prompts import RenderedPrompt, load_prompt, render_text
from holodeck_core.models import LLMProvider
from holodeck_core.providers.charges import chat_charge
from holodeck_core.providers.messages import Message, ModelReply
from holodeck_core.providers.table import provider_spec

if TYPE_CHECKING:
    from holodeck_core.config.project import Project
    from holodeck_core.models.agent import Agent
    from holodeck_core.providers.base import ModelClient

JUDGE_SERVICE = "judge"
"""The key of :class:`JudgeServices` in ``EvalContext.services``."""
LOGPROB_ALTERNATIVES = 20
"""``top_logprobs`` asked of OpenAI-protocol judges when a metric wants a distribution."""
_MAX_RETRIES = 3


def serves_logprobs(model: LLMProvider) -> bool:
    """The judge's provider returns top-logprobs (the provider table says)."""
    return provider_spec(model.provider, where="evaluations.model").logprobs


def _client_key(model: LLMProvider) -> str:
    secret = model.api_key.get_secret_value() if model.api_key is not None else ""
    identity = {
        **model.fingerprint_fields(),
        "endpoint": model.endpoint,
        "key": hashlib.sha256(secret.encode()).hexdigest()[:16],
    }
    return json.dumps(identity, sort_keys=True, default=str)


def _make_judge_client(model: LLMProvider) -> ModelClient:
    from holodeck_core.providers.factory import make_client

    return make_client(model, where="judge model")


def default_judge_model(agent: Agent) -> LLMProvider:
    """``evaluations.model``, else the agent's own model."""
    if agent.evaluations is not None and agent.evaluations.model is not None:
        return agent.evaluations.model
    return agent.model


class JudgeServices:
    """Judge clients, the shared scheduler, the judge cache and the default judge model.

    Use one per run (``async with`` closes the clients). ``cache`` defaults to no cache.
    ``client_factory`` builds a :class:`~holodeck_core.providers.base.ModelClient` for a judge
    ``LLMProvider`` (default: ``make_client``).
    """

    def __init__(
        self,
        scheduler: CallScheduler,
        *,
        default_model: LLMProvider | None = None,
        cache: JudgeCache | None = None,
        client_factory: Callable[[LLMProvider], ModelClient] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.default_model = default_model
        self.cache = cache if cache is not None else JudgeCache(None)
        self.stats = JudgeStats()
        self.prompt_versions: set[str] = set()
        self.system_fingerprints: set[str] = set()
        self._factory = client_factory or _make_judge_client
        self._clients: dict[str, ModelClient] = {}
        self._inflight: dict[str, asyncio.Task[JudgeAnswer]] = {}
        self._memo: dict[str, JudgeAnswer] = {}

    @classmethod
    def for_agent(
        cls,
        agent: Agent,
        scheduler: CallScheduler,
        *,
        project: Project | None = None,
        cache_dir: Path | None = None,
        use_cache: bool = True,
        client_factory: Callable[[LLMProvider], ModelClient] | None = None,
    ) -> JudgeServices:
        """Services for an agent's run: default judge = ``evaluations.model`` or the agent's
        model; cache in ``cache_dir`` or ``project.judge_cache_dir`` (``use_cache=False`` is
        ``--no-judge-cache``)."""
        if cache_dir is None:
            from holodeck_core.config.project import Project

            cache_dir = (project or Project.discover()).judge_cache_dir
        return cls(
            scheduler,
            default_model=default_judge_model(agent),
            cache=JudgeCache(cache_dir, enabled=use_cache),
            client_factory=client_factory,
        )

    # -- context and lifecycle

    def context(
        self, base_dir: Path | None = None, extra: Mapping[str, Any] | None = None
    ) -> EvalContext:
        """An :class:`EvalContext` carrying these services (plus ``extra`` services)."""
        return EvalContext(base_dir=base_dir, services={**(extra or {}), JUDGE_SERVICE: self})

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

    async def __aenter__(self) -> JudgeServices:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def provenance(self) -> dict[str, Any]:
        """For ``EvalRunMetadata.provenance``: judge prompt versions used and the providers'
        system fingerprints seen."""
        return {
            "judge_prompts": sorted(self.prompt_versions),
            "judge_system_fingerprints": sorted(self.system_fingerprints),
        }

    # -- models and clients

    def resolve_model(self, metric_model: LLMProvider | None) -> LLMProvider:
        model = metric_model or self.default_model
        if model is None:
            raise MetricError(
                "no judge model: set 'model' on the metric or 'evaluations.model' "
                "(there is no default judge)"
            )
        return model

    def client(self, model: LLMProvider) -> ModelClient:
        key = _client_key(model)
        client = self._clients.get(key)
        if client is None:
            try:
                client = self._factory(model)
            except Exception as exc:
                raise MetricError(f"cannot create the judge client: {exc}") from exc
            self._clients[key] = client
        return client

    def default_retries(self) -> int:
        return max(0, min(_MAX_RETRIES, self.scheduler.policy.max_attempts - 1))

    # -- asking

    async def ask(
        self,
        model: LLMProvider,
        prompt: RenderedPrompt,
        *,
        retries: int,
        timeout: float,
        logprobs: bool = False,
        check: Check | None = None,
        memo: bool = False,
    ) -> JudgeAnswer:
        """Ask ``model`` one question; answered from memory, the cache, an identical
        question in flight, or the judge. Raises :class:`JudgeCallError`."""
        top = LOGPROB_ALTERNATIVES if logprobs and serves_logprobs(model) else 0
        key = judge_cache_key(
            model.fingerprint_fields(), prompt.label, prompt.system, prompt.user, top_logprobs=top
        )
        self.prompt_versions.add(prompt.label)
        if memo and key in self._memo:
            self.stats.shared += 1
            return self._memo[key]
        cached = self._from_cache(key, check)
        if cached is not None:
            if memo:
                self._memo[key] = cached
            return cached
        task = self._inflight.get(key)
        if task is not None:
            self.stats.shared += 1
            try:
                answer = await asyncio.shield(task)
            except JudgeCallError as exc:  # the retries were the first asker's
                raise JudgeCallError(str(exc), retries=0, transient=exc.transient) from exc
            return replace(answer, requests=0, retries=0)
        task = asyncio.ensure_future(self._fresh(key, model, prompt, retries, timeout, top, check))
        self._inflight[key] = task
        task.add_done_callback(functools.partial(self._forget, key))
        answer = await asyncio.shield(task)
        if memo:
            self._memo[key] = replace(answer, requests=0, retries=0)
        return answer

    def _forget(self, key: str, task: asyncio.Task[JudgeAnswer]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]
        if not task.cancelled():
            task.exception()  # retrieved here, so an unawaited failure is not logged twice

    def _from_cache(self, key: str, check: Check | None) -> JudgeAnswer | None:
        value = self.cache.get(key)
        if value is None:
            return None
        try:
            answer = JudgeAnswer.from_cache(value)
        except (KeyError, TypeError, ValueError):
            return None
        if check is not None and check(answer.data) is not None:
            return None
        return answer

    async def _fresh(
        self,
        key: str,
        model: LLMProvider,
        prompt: RenderedPrompt,
        retries: int,
        timeout: float,
        top: int,
        check: Check | None,
    ) -> JudgeAnswer:
        try:
            answer = await self._converse(model, prompt, retries, timeout, top, check)
        except JudgeCallError as exc:
            self.stats.failures += 1
            self.stats.transient_failures += 1 if exc.transient else 0
            raise
        if answer.system_fingerprint:
            self.system_fingerprints.add(answer.system_fingerprint)
        self.cache.put(key, answer.to_cache())
        return answer

    async def _converse(
        self,
        model: LLMProvider,
        prompt: RenderedPrompt,
        retries: int,
        timeout: float,
        top: int,
        check: Check | None,
    ) -> JudgeAnswer:
        client = self.client(model)
        messages = [Message(role="user", text=prompt.user)]
        reply, attempts = await self._send(client, prompt.system, messages, retries, timeout, top)
        data, problem = read_reply(reply.text, check)
        requests, reasked = attempts, False
        if problem is not None:
            self.stats.invalid_replies += 1
            repair = load_prompt("json_repair")
            self.prompt_versions.add(repair.label)
            messages += [
                Message(role="assistant", text=reply.text or "(empty reply)"),
                Message(role="user", text=render_text(repair.user, {"problem": problem})),
            ]
            try:
                reply, more = await self._send(
                    client, prompt.system, messages, retries, timeout, top
                )
            except JudgeCallError as exc:
                exc.retries += attempts - 1
                raise
            requests, reasked = requests + more, True
            data, problem = read_reply(reply.text, check)
            if problem is not None:
                raise JudgeCallError(
                    f"the judge's reply is unusable after one repair request: {problem}",
                    retries=requests - 2,
                    transient=False,
                )
        assert data is not None
        numbers = number_tokens(reply.logprobs)
        return JudgeAnswer(
            data=data,
            text=reply.text,
            numbers=None if numbers is None else tuple(numbers),
            system_fingerprint=reply.system_fingerprint,
            requests=requests,
            retries=requests - (2 if reasked else 1),
            reasked=reasked,
        )

    async def _send(
        self,
        client: ModelClient,
        system: str,
        messages: list[Message],
        retries: int,
        timeout: float,
        top: int,
    ) -> tuple[ModelReply, int]:
        """One request with up to ``retries`` retries of transient errors (the scheduler's
        loop); returns the reply and the number of attempts."""
        call = functools.partial(
            client.complete, system, list(messages), timeout=timeout, top_logprobs=top or None
        )
        try:
            done = await self.scheduler.run(
                call,
                endpoint=endpoint_key(client.model),
                timeout=timeout,
                attempts=retries + 1,
                charge=chat_charge("judge", client.model, system, messages),
                batchable=client.batch_api is not None,
            )
        except ModelCallError as error:
            self._count(error.attempts)
            tries = f"{error.attempts} attempt{'s' if error.attempts > 1 else ''}"
            raise JudgeCallError(
                f"{error} ({tries}, retry_on_failure {retries})",
                retries=error.attempts - 1,
                transient=error.transient,
            ) from error
        self._count(done.attempts)
        return done.value, done.attempts

    def _count(self, attempts: int) -> None:
        self.stats.requests += attempts
        self.stats.retries += attempts - 1


def judge_services(ctx: EvalContext) -> JudgeServices:
    """The :class:`JudgeServices` of a context, or a clear error."""
    services = ctx.services.get(JUDGE_SERVICE)
    if not isinstance(services, JudgeServices):
        raise MetricError(
            "LLM-judge metrics need JudgeServices in EvalContext.services['judge'] "
            "(see holodeck_core.metrics.judge)"
        )
    return services
