"""The price table (docs/cost.md): USD per 1M tokens per provider and model, shipped as
``holodeck_core/calls/prices.yaml`` with the date the prices were taken, overridden by
``holodeck.yaml`` ``pricing:`` and by the file ``HOLODECK_PRICES`` names. A model no row
names has an unknown price (None), never 0."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from holodeck_core.errors import ConfigError
from holodeck_core.models import TokenUsage

PRICES_ENV = "HOLODECK_PRICES"
V = TypeVar("V")
_SNAPSHOT_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$")


class ModelPrice(BaseModel):
    """USD per ``per_tokens`` tokens (1M)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0.0)
    output: float = Field(ge=0.0)
    cached_input: float | None = Field(None, ge=0.0)
    cache_write: float | None = Field(None, ge=0.0)

    def charge(self, usage: TokenUsage) -> float:
        """``usage`` at these rates, in USD per ``per_tokens`` tokens."""
        total = usage.prompt_tokens * self.input + usage.completion_tokens * self.output
        if self.cached_input is not None:
            total += usage.cache_read_tokens * self.cached_input
        if self.cache_write is not None:
            total += usage.cache_creation_tokens * self.cache_write
        return total


class ProviderPrices(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    models: dict[str, ModelPrice] = Field(default_factory=dict)
    embeddings: dict[str, float] = Field(
        default_factory=dict, description="Embedding models, USD per 1M input tokens."
    )
    batch: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        description="Its batch API's prices as a share of these (0.5: half); unset, it sells "
        "no batches and a batched call costs the list price.",
    )


class PriceTable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str = Field(min_length=1)
    taken: str | None = Field(None, description="When the prices were read off the price pages.")
    currency: str = "USD"
    per_tokens: int = Field(1_000_000, gt=0)
    providers: dict[str, ProviderPrices] = Field(default_factory=dict)
    models: dict[str, ModelPrice] = Field(
        default_factory=dict, description="Rows for a model of any provider (overrides)."
    )

    def lookup(self, model: str, provider: str | None = None) -> tuple[str, ModelPrice] | None:
        """The price of ``model`` (under ``provider``'s price key; any provider when None):
        its exact key, or a key plus a dated snapshot suffix (``gpt-4o-2024-08-06`` ->
        ``gpt-4o``) or ``-latest``."""
        rows = [self.models]
        rows += [p.models for k, p in self.providers.items() if provider in (None, k)]
        return _find(model, rows)

    def embedding_price(self, model: str, provider: str) -> float | None:
        """USD per ``per_tokens`` input tokens of an embedding model; None when unknown."""
        found = _find(model, [p.embeddings for k, p in self.providers.items() if k == provider])
        return None if found is None else found[1]

    def cost_usd(
        self, model: str, usage: TokenUsage, provider: str | None = None, *, batch: bool = False
    ) -> float | None:
        """USD for ``usage`` at ``model``'s rates (its provider's batch prices when ``batch``);
        None for a model the table lacks."""
        found = self.lookup(model, provider)
        if found is None:
            return None
        share = self.batch_share(provider) if batch else 1.0
        return found[1].charge(usage) * share / self.per_tokens

    def batch_share(self, provider: str | None) -> float:
        """The share of the list price ``provider``'s batch API charges (1 when it has none)."""
        prices = self.providers.get(provider or "")
        return prices.batch if prices is not None and prices.batch is not None else 1.0


def _find(model: str, tables: list[dict[str, V]]) -> tuple[str, V] | None:
    base = _SNAPSHOT_SUFFIX.sub("", model)
    for key in dict.fromkeys((model, base)):
        for table in tables:
            if key in table:
                return key, table[key]
    return None


@functools.cache
def packaged_price_table() -> PriceTable:
    text = resources.files("holodeck_core.calls").joinpath("prices.yaml").read_text("utf-8")
    return PriceTable.model_validate(yaml.safe_load(text))


def load_price_table(pricing: dict[str, Any] | None = None) -> PriceTable:
    """The packaged table, with ``pricing`` (``holodeck.yaml``) and then the file named by
    ``$HOLODECK_PRICES`` merged over it. An override without a ``version`` is recorded as
    ``<packaged version>+<sha256 of the override>[:8]``."""
    table = packaged_price_table()
    if pricing:
        table = _merged(table, pricing, "holodeck.yaml", "pricing")
    env = os.environ.get(PRICES_ENV, "").strip()
    if env:
        path = Path(env)
        try:
            data: Any = yaml.safe_load(path.read_bytes()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read the price table {path} ({PRICES_ENV}): {exc}") from exc
        table = _merged(table, data, str(path), "")
    return table


def _merged(base: PriceTable, data: Any, file: str, field: str) -> PriceTable:
    where = f"{field}: " if field else ""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}a price table must be a mapping (see prices.yaml)", file=file)
    digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
    merged = base.model_dump()
    try:
        over = PriceTable.model_validate({"version": "override", **data})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)
        )
        raise ConfigError(f"{where}invalid price table ({problems})", file=file) from None
    merged["version"] = str(data.get("version") or f"{base.version}+{digest[:8]}")
    merged["taken"] = over.taken or base.taken
    merged["currency"] = over.currency
    merged["per_tokens"] = over.per_tokens
    merged["models"].update(over.model_dump()["models"])
    for key, rows in over.model_dump()["providers"].items():
        mine = merged["providers"].setdefault(key, {"models": {}, "embeddings": {}})
        mine["models"].update(rows["models"])
        mine["embeddings"].update(rows["embeddings"])
        if rows["batch"] is not None:
            mine["batch"] = rows["batch"]
    return PriceTable.model_validate(merged)
