"""The one call layer (docs/architecture.md): every model call (agent turns, judges, embeddings,
prompt tools, rerankers) goes through :class:`~holodeck_core.calls.scheduler.CallScheduler` with a
limit per provider endpoint (:func:`~holodeck_core.calls.scheduler.endpoint_key`) and a per-call
retry budget; its errors are classified once here (:mod:`.classify`, :mod:`.errors`). It sits below
``agents/``, ``tools/`` and ``metrics/`` and imports none of them. The API a new kind of model call
uses is in the docstring of :mod:`holodeck_core.calls.scheduler`."""
