"""The :class:`~holodeck_core.calls.ledger.Charge` of a model call: its heading, its model's
rows in the price table (the provider table's ``price_key``) and a generous estimate of its
input tokens."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from holodeck_core.calls.ledger import Charge, estimate_tokens, reply_usage
from holodeck_core.models import LLMProvider, TokenUsage
from holodeck_core.models.cost import Heading
from holodeck_core.providers.messages import Message, ToolSpec
from holodeck_core.providers.table import provider_spec

IMAGE_TOKENS = 1_500
"""Reserved per image input (a high-detail image is about 1,100 tokens at OpenAI)."""


def chat_charge(
    heading: Heading,
    model: LLMProvider,
    system: str,
    messages: list[Message],
    tools: list[ToolSpec] | None = None,
) -> Charge:
    """A chat completion's charge: the system prompt, every message, the tool schemas."""
    said = [system, *(m.text for m in messages)]
    said += [c.raw_arguments for m in messages for c in m.tool_calls]
    schemas = [json.dumps([t.__dict__ for t in tools])] if tools else []
    images = sum(len(m.images) for m in messages)
    return Charge(
        heading,
        model,
        provider_spec(model.provider).prices_under,
        estimate_tokens(*said, *schemas) + images * IMAGE_TOKENS,
        input_chars=sum(map(len, said)),  # what every server counts (some leave tools out)
    )


def embedding_charge(
    model: LLMProvider, texts: list[str], usage: Callable[[Any], TokenUsage] = reply_usage
) -> Charge:
    return Charge(
        "embedding",
        model,
        provider_spec(model.provider).prices_under,
        estimate_tokens(*texts),
        embedding=True,
        usage=usage,
        input_chars=sum(map(len, texts)),
    )
