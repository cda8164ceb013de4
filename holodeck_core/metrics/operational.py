"""Operational metrics: ``latency`` (ms) and ``cost`` (USD).

Both are unbounded, lower is better: the result has no normalized ``score``, the value in
its unit is ``raw_score``, and the required ``threshold`` is a maximum (passes at
``raw_score <= threshold``).

``cost`` prices the agent's token usage for the case with the price table
(:mod:`holodeck_core.calls.prices`). Each result records the table version.
An unknown model is an error result that names the model and how to add its price.
"""

from __future__ import annotations

from holodeck_core.calls.prices import PRICES_ENV, load_price_table
from holodeck_core.errors import ConfigError
from holodeck_core.metrics.base import EvalContext, MetricError, MetricInput, Score
from holodeck_core.metrics.registry import REGISTRY, ThresholdPolicy
from holodeck_core.models.evaluation import StandardMetric


@REGISTRY.metric(
    "latency", kind="standard", requires=("latency_ms",), policy=ThresholdPolicy.MAXIMUM, unit="ms"
)
def latency(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """The agent's model time for the case, in ms (threshold: a maximum)."""
    assert inputs.latency_ms is not None  # required input
    return Score(score=None, raw_score=float(inputs.latency_ms))


@REGISTRY.metric(
    "cost",
    kind="standard",
    requires=("token_usage", "model"),
    policy=ThresholdPolicy.MAXIMUM,
    unit="USD",
)
def cost(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """USD for the case's token usage at the price table's rates (threshold: a maximum)."""
    assert inputs.token_usage is not None and inputs.model is not None  # required inputs
    try:
        table = load_price_table()
    except ConfigError as exc:
        raise MetricError(str(exc)) from exc
    found = table.lookup(inputs.model)
    if found is None:
        raise MetricError(
            f"no price for model {inputs.model!r} in price table {table.version}: add it under "
            f"'models:' in a YAML file (input/output USD per 1M tokens) and point "
            f"{PRICES_ENV} at it"
        )
    key, price = found
    usage = inputs.token_usage
    return Score(
        score=None,
        raw_score=price.charge(usage) / table.per_tokens,
        details={
            "price_table_version": table.version,
            "model": inputs.model,
            "price_key": key,
            "prices": price.model_dump(exclude_none=True),
            "per_tokens": table.per_tokens,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "cache_creation_tokens": usage.cache_creation_tokens,
        },
    )
