"""``holodeck model-server``: the loopback model server as a foreground process."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import signal
import sys

from aiohttp import web

from holodeck_core.testing.rules import Rules, RulesError
from holodeck_core.testing.rules_loading import load_rules
from holodeck_core.testing.server.app import LOOPBACK_HOST, check_host, create_app, start_app


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="holodeck model-server",
        description=(
            "Run the loopback model server: scripted OpenAI Chat Completions, Responses and "
            "Anthropic Messages endpoints on 127.0.0.1 (the rules format: the docstring of "
            "holodeck_core.testing.server, docs/cli.md)."
        ),
        epilog=(
            "GET /_stats returns the calls per route, per rule and per request key, and the "
            "peak concurrency; GET /_requests every model request (route, path, JSON body) in "
            "arrival order; POST /_reset clears them. Agents reach the server at "
            "http://127.0.0.1:PORT/v1 (OpenAI) or http://127.0.0.1:PORT (Anthropic); the "
            "examples read HOLODECK_MODEL_ENDPOINT (default http://127.0.0.1:18080/v1), so "
            "another --port needs HOLODECK_MODEL_ENDPOINT=http://127.0.0.1:PORT/v1."
        ),
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind (0 = a free port)")
    parser.add_argument(
        "--script", metavar="RULES.yaml", help='rules file (default: answer "I don\'t know.")'
    )
    parser.add_argument(
        "--latency", type=float, default=0.0, metavar="S", help="seconds added to every reply"
    )
    parser.add_argument(
        "--host", default=LOOPBACK_HOST, help="only 127.0.0.1 (or localhost) is accepted"
    )
    return parser


def _fail(message: str) -> int:
    print(f"holodeck model-server: error: {message}", file=sys.stderr)
    return 2


async def _serve(app: web.Application, port: int) -> int:
    try:
        runner = await start_app(app, port, shutdown_timeout=1.0)
    except OSError as exc:
        return _fail(
            f"cannot listen on {LOOPBACK_HOST}:{port} ({exc.strerror or exc}); "
            "choose another --port, or --port 0 for a free one"
        )
    url = f"http://{LOOPBACK_HOST}:{runner.addresses[0][1]}"
    print(f"holodeck model-server listening on {url}", flush=True)
    print(f"  OpenAI base_url: {url}/v1   Anthropic base_url: {url}   stats: {url}/_stats")
    print("  press Ctrl-C to stop", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``holodeck model-server --port P --script RULES.yaml [--latency S]``; returns the exit code.

    Exit code 2 (with a message naming the file, the field and the fix, no traceback) for a
    bad rules file or bad arguments; 0 when stopped with Ctrl-C or SIGTERM.
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed usage or --help already
        return exc.code if isinstance(exc.code, int) else 2
    try:
        check_host(args.host)
    except ValueError as exc:
        return _fail(str(exc))
    if not 0 <= args.port <= 65535:
        return _fail(f"--port must be between 0 and 65535, got {args.port}")
    if not args.latency >= 0 or math.isinf(args.latency):
        return _fail(f"--latency must be a number of seconds >= 0, got {args.latency}")
    try:
        rules = load_rules(args.script) if args.script else Rules()
    except RulesError as exc:
        return _fail(str(exc))
    app = create_app(rules, latency=args.latency)
    try:
        return asyncio.run(_serve(app, args.port))
    except KeyboardInterrupt:
        return 0
