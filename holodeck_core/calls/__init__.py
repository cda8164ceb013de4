"""The one call layer (DESIGN §7.11): every model call (agent turns, judges, embeddings, prompt
tools, rerankers) goes through :class:`CallScheduler`; its errors are classified once here.
It sits below ``agents/`` and ``metrics/`` and imports neither."""
