"""Targets (docs/targets.md): the agent evaluated where it runs (``holodeck serve``, any HTTP
agent, an OpenAI-compatible endpoint, a Python callable) instead of in-process from
``agent.yaml``. :func:`make_target` builds the conversation a suite runs its cases through."""

from __future__ import annotations

from holodeck_core.agents.targets.base import TargetClient, TargetRunner
from holodeck_core.agents.targets.python import PythonClient
from holodeck_core.agents.targets.web import HolodeckServeClient, HttpClient, OpenAIChatTargetClient
from holodeck_core.calls.scheduler import CallScheduler
from holodeck_core.config.loader import LoadedAgent
from holodeck_core.models.target import (
    HolodeckServeTarget,
    HttpTarget,
    OpenAIChatTarget,
    PythonTarget,
    Target,
)


def make_target(
    target: Target, loaded: LoadedAgent, scheduler: CallScheduler, *, timeout: float
) -> tuple[TargetRunner, TargetClient]:
    """The runner of ``target`` and its client (the caller closes it with ``aclose``); the
    target's ``limit`` becomes its scheduler lane's ceiling."""
    spec = target.spec
    client: TargetClient
    if isinstance(spec, PythonTarget):
        client = PythonClient(spec, loaded.base_dir, loaded.resolve)
    elif isinstance(spec, HttpTarget):
        client = HttpClient(spec, loaded.resolve)
    elif isinstance(spec, OpenAIChatTarget):
        client = OpenAIChatTargetClient(spec)
    else:
        assert isinstance(spec, HolodeckServeTarget)
        client = HolodeckServeClient(spec, loaded.agent.name, loaded.resolve)
    model = loaded.agent.model
    if isinstance(spec, OpenAIChatTarget):
        model = model.model_copy(update={"name": spec.model})
    runner = TargetRunner(target, client, scheduler, timeout=spec.timeout or timeout, model=model)
    if spec.limit is not None:
        scheduler.set_limit(runner.endpoint, spec.limit)
    return runner, client
