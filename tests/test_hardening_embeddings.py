"""Poisoned embeddings (docs/agent-yaml.md): vectors with NaN or infinity, empty ones, ones of
mixed widths or that are not numbers are refused before anything caches them (the tool cannot
start: exit 3, no model call), so once the provider is fixed the next run embeds afresh; and
the cache is keyed by endpoint and model, so another endpoint's vectors are never served."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.testing import run_model_server
from tests.hostile import no_traceback, run_cli
from tests.test_retrieval import embedding_calls, search_rule, tool_of, write_agent, write_docs


class Embeddings:
    """A real HTTP server on 127.0.0.1 answering ``POST /v1/embeddings`` as ``mode`` says."""

    def __init__(self) -> None:
        self.mode = "good"
        self.calls = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                texts = json.loads(self.rfile.read(length))["input"]
                outer.calls += 1
                body = json.dumps(
                    {
                        "object": "list",
                        "model": "m",
                        "data": [
                            {"object": "embedding", "index": i, "embedding": outer.vector(i)}
                            for i, _ in enumerate(texts)
                        ],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1},
                    }
                ).encode()  # json.dumps writes NaN and Infinity; the SDK's json reads them
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def vector(self, i: int) -> Any:
        good = [1.0, float(i + 1), 0.5, 0.25]
        return {
            "good": good,
            "nan": [float("nan"), 1.0, 0.0, 0.0],
            "inf": [1.0, float("inf"), 0.0, 0.0],
            "empty": [],
            "widths": good if i % 2 else good[:3],
            "strings": ["a", "b", "c", "d"],
        }[self.mode]


@pytest.fixture
def embeddings() -> Iterator[Embeddings]:
    server = Embeddings()
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


DIRECT = {"anthropic_path": "direct"}
"""These tests are about embeddings: the anthropic agent (whose embedding_provider is read)
runs on the direct Messages path; the Claude path's tools are tested in
tests/test_claude_sdk_path.py."""


def provider(url: str) -> dict[str, Any]:
    """The embeddings endpoint: HoloDeck (and we) read ``embedding_provider`` for an
    anthropic agent only, and take the model from the tool, never from the block's name."""
    return {"provider": "openai", "name": "unused", "endpoint": url, "api_key": "sk-emb-123456"}


def claude_agent(folder: Path, server: Any, embeddings_url: str) -> Path:
    return write_agent(
        folder,
        server,
        [tool_of(source="docs/*.md", embedding_model="embed-m")],
        model={"provider": "anthropic", "name": "claude", "endpoint": server.url},
        embedding_provider=provider(embeddings_url),
        execution=DIRECT,
    )


@pytest.mark.parametrize("mode", ["inf", "empty", "widths", "strings"])
def test_bad_vectors_are_refused_before_caching_and_the_fixed_provider_is_asked_again(
    tmp_path: Path, embeddings: Embeddings, mode: str
) -> None:
    write_docs(tmp_path)
    with run_model_server({"rules": [search_rule("returns")]}) as server:
        agent = claude_agent(tmp_path, server, embeddings.url)
        embeddings.mode = mode
        proc = run_cli(["test", str(agent)])
        no_traceback(proc)
        assert proc.returncode == 3, proc.stderr
        assert "embedding its" in proc.stderr and "embed-m" in proc.stderr
        assert server.stats()["total_calls"] == 0  # refused before any model call
        embeddings.mode, embeddings.calls = "good", 0
        fixed = run_cli(["test", str(agent)])
    assert fixed.returncode == 0, fixed.stderr
    assert embeddings.calls == 2  # the index and the query: nothing bad was cached
    [result] = json.loads(
        sorted((tmp_path / "results").glob("*/holodeck-pipelines/*.json"))[-1].read_text()
    )["report"]["results"]
    assert "nan" not in result["tool_invocations"][0]["result"].lower()


def test_the_cache_is_keyed_by_endpoint(tmp_path: Path, embeddings: Embeddings) -> None:
    write_docs(tmp_path)
    with run_model_server({"rules": [search_rule("returns")]}) as server:
        first = claude_agent(tmp_path, server, embeddings.url)
        assert run_cli(["test", str(first)]).returncode == 0
        assert embedding_calls(server) == 0 and embeddings.calls == 2
        # the same model name at another endpoint (the loopback server)
        other = claude_agent(tmp_path, server, server.openai_base_url)
        assert run_cli(["test", str(other)]).returncode == 0
        assert embedding_calls(server) >= 1  # its own vectors, not the first endpoint's
