"""Operational metrics: ``latency`` (ms) and ``cost`` (USD).

Both are unbounded, lower is better: the result has no normalized ``score``, the value in
its unit is ``raw_score``, and the required ``threshold`` is a maximum (passes at
``raw_score <= threshold``).

``cost`` prices the case's token usage with a price table: the packaged
``holodeck_core/metrics/prices.yaml`` (USD per 1M tokens, with a ``version``), merged with
the YAML file named by ``HOLODECK_PRICES`` when set. Each result records the table version.
An unknown model is an error result that names the model and how to add its price.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from holodeck_core.metrics.base import EvalContext, MetricError, MetricInput, Score
from holodeck_core.metrics.registry import REGISTRY, ThresholdPolicy
from holodeck_core.models.evaluation import StandardMetric
from holodeck_core.models.results import TokenUsage

PRICES_ENV = "HOLODECK_PRICES"
_SNAPSHOT_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")


class ModelPrice(BaseModel):
    """USD per ``per_tokens`` tokens (1M)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0.0)
    output: float = Field(ge=0.0)
    cache_read: float | None = Field(None, ge=0.0)
    cache_write: float | None = Field(None, ge=0.0)

    def charge(self, usage: TokenUsage) -> float:
        """``usage`` at these rates, in USD per ``per_tokens`` tokens."""
        total = usage.prompt_tokens * self.input + usage.completion_tokens * self.output
        if self.cache_read is not None:
            total += usage.cache_read_tokens * self.cache_read
        if self.cache_write is not None:
            total += usage.cache_creation_tokens * self.cache_write
        return total


class PriceTable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str = Field(min_length=1)
    currency: str = "USD"
    per_tokens: int = Field(1_000_000, gt=0)
    models: dict[str, ModelPrice]

    def lookup(self, model: str) -> tuple[str, ModelPrice] | None:
        """The price of ``model``: its exact key, or a key plus a dated snapshot suffix
        (``gpt-4o-2024-08-06`` -> ``gpt-4o``) or ``-latest``."""
        if model in self.models:
            return model, self.models[model]
        base = _SNAPSHOT_SUFFIX.sub("", model)
        if base != model and base in self.models:
            return base, self.models[base]
        return None

    def cost_usd(self, model: str, usage: TokenUsage) -> float | None:
        """USD for ``usage`` at ``model``'s rates; None for a model the table lacks."""
        found = self.lookup(model)
        return None if found is None else found[1].charge(usage) / self.per_tokens


@functools.cache
def packaged_price_table() -> PriceTable:
    text = resources.files("holodeck_core.metrics").joinpath("prices.yaml").read_text("utf-8")
    return PriceTable.model_validate(yaml.safe_load(text))


def run_cost_usd(model: str, usage: TokenUsage | None) -> float | None:
    """The agent's token usage over a run, priced; None when unknown (no usage, a model the
    price table lacks, an unreadable ``HOLODECK_PRICES``: the ``cost`` metric reports why)."""
    if usage is None:
        return None
    try:
        return load_price_table().cost_usd(model, usage)
    except MetricError:
        return None


def load_price_table(override: Path | None = None) -> PriceTable:
    """The packaged table, merged with ``override`` (default: ``$HOLODECK_PRICES``)."""
    base = packaged_price_table()
    if override is None:
        env = os.environ.get(PRICES_ENV, "").strip()
        override = Path(env) if env else None
    if override is None:
        return base
    try:
        raw = override.read_bytes()
        data: Any = yaml.safe_load(raw) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise MetricError(f"cannot read the price table {override} ({PRICES_ENV}): {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("models", {}), dict):
        raise MetricError(f"price table {override} must be a mapping with a 'models' mapping")
    version = str(data.get("version") or f"{base.version}+{hashlib.sha256(raw).hexdigest()[:8]}")
    try:
        return PriceTable.model_validate(
            {
                "version": version,
                "currency": data.get("currency", base.currency),
                "per_tokens": data.get("per_tokens", base.per_tokens),
                "models": {**base.model_dump()["models"], **data.get("models", {})},
            }
        )
    except ValueError as exc:
        raise MetricError(f"price table {override} is invalid: {exc}") from exc


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
    table = load_price_table()
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
