"""The providers' batch APIs behind :class:`~holodeck_core.calls.batch.BatchAPI` (docs/cost.md):
OpenAI's (and Azure OpenAI's) ``/v1/files`` + ``/v1/batches`` for ``/v1/responses`` and
``/v1/chat/completions``, Anthropic's ``/v1/messages/batches``, through the official SDK
clients the backends already hold. Each answer comes back as the SDK's own response object,
which the backend reads exactly as the ordinary call's."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from holodeck_core.calls.batch import BatchItem, item_error
from holodeck_core.calls.errors import CallErrorKind, ModelCallError

CREDENTIAL_DIGITS = 16
"""Hex digits of a credential's SHA-256 that tell two keys apart (and say nothing of them)."""
BATCH_WINDOW = "24h"
"""OpenAI's completion window (the only one it offers)."""


class OpenAIBatches:
    """One request URL of an OpenAI-compatible endpoint: a JSONL file uploaded, a batch on it,
    its output and error files read back."""

    def __init__(self, client: Any, url: str, key: str, parse: Callable[[Any], Any]) -> None:
        self._client = client
        self.url = url
        self.key = key
        self.credential = credential_of(client)
        self._parse = parse

    async def submit(self, requests: list[tuple[str, dict[str, Any]]]) -> str:
        lines = "".join(
            json.dumps({"custom_id": custom_id, "method": "POST", "url": self.url, "body": body})
            + "\n"
            for custom_id, body in requests
        )
        uploaded = await self._client.files.create(
            file=("batch.jsonl", lines.encode("utf-8"), "application/jsonl"), purpose="batch"
        )
        batch = await self._client.batches.create(
            input_file_id=uploaded.id, endpoint=self.url, completion_window=BATCH_WINDOW
        )
        return str(batch.id)

    async def status(self, batch_id: str) -> str:
        return str((await self._client.batches.retrieve(batch_id)).status)

    async def results(self, batch_id: str) -> dict[str, BatchItem]:
        batch = await self._client.batches.retrieve(batch_id)
        items: dict[str, BatchItem] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                content = await self._client.files.content(file_id)
                for line in content.text.splitlines():
                    if line.strip():
                        custom_id, item = self._item(line)
                        items[custom_id] = item
        return items

    def _item(self, line: str) -> tuple[str, BatchItem]:
        try:
            entry = json.loads(line)
            custom_id = str(entry["custom_id"])
        except (ValueError, KeyError, TypeError):
            return "", BatchItem(error=_malformed("a result line is not JSON with a custom_id"))
        response = entry.get("response") or {}
        error = entry.get("error") or {}
        status = response.get("status_code") if isinstance(response, dict) else None
        body = response.get("body") if isinstance(response, dict) else None
        if status == 200 and isinstance(body, dict):
            try:
                return custom_id, BatchItem(body=self._parse(body))
            except ValueError as exc:
                return custom_id, BatchItem(error=_malformed(f"the answer does not parse: {exc}"))
        if not error and isinstance(body, dict) and isinstance(body.get("error"), dict):
            error = body["error"]
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        return custom_id, BatchItem(error=item_error(code, message, status))

    async def cancel(self, batch_id: str) -> None:
        await self._client.batches.cancel(batch_id)


class AnthropicBatches:
    """Anthropic's Message Batches: every request's params inline, results as JSONL."""

    def __init__(self, client: Any, key: str) -> None:
        self._client = client
        self.key = key
        self.credential = credential_of(client)

    async def submit(self, requests: list[tuple[str, dict[str, Any]]]) -> str:
        batch = await self._client.messages.batches.create(
            requests=[
                {"custom_id": custom_id, "params": _params(body)} for custom_id, body in requests
            ]
        )
        return str(batch.id)

    async def status(self, batch_id: str) -> str:
        return str((await self._client.messages.batches.retrieve(batch_id)).processing_status)

    async def results(self, batch_id: str) -> dict[str, BatchItem]:
        items: dict[str, BatchItem] = {}
        async for entry in await self._client.messages.batches.results(batch_id):
            result = entry.result
            if result.type == "succeeded":
                items[entry.custom_id] = BatchItem(body=result.message)
            elif result.type == "errored":
                error = getattr(result.error, "error", None)
                items[entry.custom_id] = BatchItem(
                    error=item_error(getattr(error, "type", None), getattr(error, "message", None))
                )
            else:  # expired or canceled: another batch may answer it
                items[entry.custom_id] = BatchItem(error=item_error(result.type, None))
        return items

    async def cancel(self, batch_id: str) -> None:
        await self._client.messages.batches.cancel(batch_id)


def credential_of(client: Any) -> str:
    """A fingerprint of the credential ``client`` sends (its API key or token), never the
    secret itself: requests of two keys on one endpoint go in batches of their own."""
    secret = "\n".join(str(getattr(client, name, None) or "") for name in ("api_key", "auth_token"))
    if not secret.strip():
        return ""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()[:CREDENTIAL_DIGITS]


def _params(body: dict[str, Any]) -> dict[str, Any]:
    """The SDK call's keyword arguments as a batch request's params (``extra_body`` merged)."""
    params = {key: value for key, value in body.items() if key != "extra_body"}
    return params | dict(body.get("extra_body") or {})


def _malformed(message: str) -> ModelCallError:
    return ModelCallError(CallErrorKind.MALFORMED, message)
