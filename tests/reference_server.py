"""A protocol-correct loopback server that is *not* our model server: canned responses in the
exact shapes of the OpenAI and Anthropic API references, written independently with the
standard library, so the backends are not only tested against our own fake.

It asks for one tool call, then answers with the tool's result once it comes back, and keeps
every request body for the tests to inspect."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOOL_CALL_ID = "call_abc123"
TOOL_USE_ID = "toolu_01A09q90qw90lq917835lq9"


def chat_tool_call(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion",
        "created": 1677652288,
        "model": body["model"],
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": TOOL_CALL_ID,
                            "type": "function",
                            "function": {
                                "name": "get_current_weather",
                                "arguments": '{\n"location": "Boston, MA"\n}',
                            },
                        }
                    ],
                },
                "logprobs": None,
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99},
    }


def chat_answer(body: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-124",
        "object": "chat.completion",
        "created": 1677652289,
        "model": body["model"],
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 10, "total_tokens": 130},
    }


def messages_tool_use(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_01Aq9w938a90dw8q",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": [
            {"type": "text", "text": "I'll check the weather."},
            {
                "type": "tool_use",
                "id": TOOL_USE_ID,
                "name": "get_current_weather",
                "input": {"location": "Boston, MA"},
            },
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 472, "output_tokens": 91},
    }


def messages_answer(body: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "id": "msg_01Aq9w938a90dw8r",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 600, "output_tokens": 20},
    }


def chat_tool_result(body: dict[str, Any]) -> str | None:
    for message in body["messages"]:
        if message["role"] == "tool" and message["tool_call_id"] == TOOL_CALL_ID:
            return str(message["content"])
    return None


def messages_tool_result(body: dict[str, Any]) -> str | None:
    for message in body["messages"]:
        if message["role"] != "user" or isinstance(message["content"], str):
            continue
        for block in message["content"]:
            if block.get("type") == "tool_result" and block["tool_use_id"] == TOOL_USE_ID:
                return str(block["content"])
    return None


class ReferenceServer:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append((self.path, body))
                if self.path.endswith("/chat/completions"):
                    result = chat_tool_result(body)
                    reply = (
                        chat_tool_call(body)
                        if result is None
                        else chat_answer(body, f"Weather report: {result}")
                    )
                elif self.path.endswith("/messages"):
                    result = messages_tool_result(body)
                    reply = (
                        messages_tool_use(body)
                        if result is None
                        else messages_answer(body, f"Weather report: {result}")
                    )
                else:
                    self.send_error(404)
                    return
                payload = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


@contextmanager
def reference_server() -> Iterator[ReferenceServer]:
    server = ReferenceServer()
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
