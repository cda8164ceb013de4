"""The server running in-process, on its own event loop in a background thread."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import TypeVar

from holodeck_core.testing.rules import Rules
from holodeck_core.testing.rules_loading import RulesInput, coerce_rules
from holodeck_core.testing.server.app import LOOPBACK_HOST, check_host, create_app, start_app
from holodeck_core.testing.server.state import STATE_KEY, Stats

_T = TypeVar("_T")


class ModelServer:
    """The server running on its own event loop in a background thread.

    Use :func:`run_model_server` (a context manager) or ``with ModelServer(...) as server:``.
    """

    def __init__(
        self,
        rules: RulesInput = None,
        *,
        latency: float = 0.0,
        host: str = LOOPBACK_HOST,
        port: int = 0,
        shutdown_timeout: float = 0.5,
    ) -> None:
        check_host(host)
        self._app = create_app(rules, latency=latency)
        self._state = self._app[STATE_KEY]
        self._requested_port = port
        self._shutdown_timeout = shutdown_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    # -- lifecycle
    def start(self) -> ModelServer:
        if self._thread is not None:
            raise RuntimeError("the model server is already started")
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                runner = loop.run_until_complete(
                    start_app(self._app, self._requested_port, self._shutdown_timeout)
                )
            except BaseException as exc:
                failure.append(exc)
                loop.close()
                ready.set()
                return
            self._port = int(runner.addresses[0][1])
            self._loop = loop
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(runner.cleanup())
                pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
                for task in pending:
                    task.cancel()
                if pending:
                    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        thread = threading.Thread(target=run, name="holodeck-model-server", daemon=True)
        self._thread = thread
        thread.start()
        if not ready.wait(timeout=30):
            raise RuntimeError("the model server did not start within 30 s")
        if failure:
            self._thread = None
            raise failure[0]
        return self

    def close(self) -> None:
        """Stop the server and its thread (in-flight requests get ``shutdown_timeout``)."""
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=self._shutdown_timeout + 10)

    def __enter__(self) -> ModelServer:
        return self.start() if self._thread is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- addresses
    @property
    def host(self) -> str:
        return LOOPBACK_HOST

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the model server is not started")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (also the Azure endpoint)."""
        return f"http://{LOOPBACK_HOST}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """``base_url`` for ``openai.OpenAI``: ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """``base_url`` for ``anthropic.Anthropic`` (the SDK appends ``/v1/messages``)."""
        return self.url

    @property
    def azure_endpoint(self) -> str:
        """``azure_endpoint`` for ``openai.AzureOpenAI``."""
        return self.url

    # -- control (run on the server's loop, so no locks are needed)
    def _call(self, fn: Callable[[], _T]) -> _T:
        loop = self._loop
        if loop is None:
            raise RuntimeError("the model server is not running")

        async def call() -> _T:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), loop).result(timeout=10)

    def stats(self) -> Stats:
        """The counters of ``GET /_stats`` (also readable after the server is closed)."""
        if self._loop is None:
            return self._state.snapshot()
        return self._call(self._state.snapshot)

    def reset(self) -> None:
        """Clear the counters, like ``POST /_reset``."""
        self._call(self._state.reset)

    @property
    def rules(self) -> Rules:
        return self._state.rules

    def set_rules(self, rules: RulesInput) -> None:
        """Replace the rules (counters are kept; call :meth:`reset` to clear them)."""
        new = coerce_rules(rules)

        def swap() -> None:
            self._state.rules = new

        self._call(swap)


@contextlib.contextmanager
def run_model_server(
    rules: RulesInput = None,
    latency: float = 0.0,
    *,
    port: int = 0,
    host: str = LOOPBACK_HOST,
) -> Iterator[ModelServer]:
    """Run the loopback model server on 127.0.0.1 in a background thread.

    ``rules``: :class:`Rules`, a mapping in the rules-file format, a path to a YAML rules file,
    or None (everything answers "I don't know."). Raises :class:`RulesError` for bad rules and
    ``ValueError`` for a host other than 127.0.0.1.
    """
    server = ModelServer(rules, latency=latency, host=host, port=port)
    server.start()
    try:
        yield server
    finally:
        server.close()
