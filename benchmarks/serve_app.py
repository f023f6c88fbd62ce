"""The server side of ``benchmarks/serve.py``: the real app (``create_app``) with a fake model of fixed latency.

uvicorn imports ``serve_app:app_factory`` in each worker process (``--factory``, ``--app-dir benchmarks``)
and the factory reads ``$SERVE_BENCH_SETTINGS`` (JSON: store URL, definition file, model latency). The
app is built exactly as ``llm-fsm serve`` builds it (``FSMManager`` on the store, ``create_app`` over it,
no API key on loopback) except for the model, which is ``FixedLatencyModel``, and the rate limit, which is
off: the benchmark is one client that would otherwise spend its 600 requests a minute in a second.

The model answers every turn by staying in ``talk`` and saying ``ok: <the user's message>``, so the
transcripts can be checked afterwards: each message must be followed by its own reply, exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from llm_fsm.engine._records import LLMRequest, LLMResponse, LLMResult, StateTransition
from llm_fsm.llm._interface import LLMInterface

SETTINGS_ENV = "SERVE_BENCH_SETTINGS"
OPENING = "hello, say anything"
REPLY_PREFIX = "ok: "

LOOP = {
    "name": "loop",
    "description": "One state that keeps talking: every turn stays, so a conversation takes any number of turns.",
    "initial_state": "talk",
    "states": {
        "talk": {
            "id": "talk",
            "description": "talk",
            "purpose": "answer the user",
            "transitions": [{"target_state": "talk", "description": "keep talking"}],
        }
    },
}


def reply_for(message: str) -> str:
    """What the fake model says to ``message``: the transcript check expects exactly this after it."""
    return REPLY_PREFIX + message


class FixedLatencyModel(LLMInterface):
    """A model that takes ``latency`` seconds per call, awaited (no thread held), streamed or not.

    Streaming: nothing for ``latency`` seconds, then the decision and the whole message in one chunk,
    so the first character of the reply exists at exactly ``latency`` after the call: the client's
    time to its first ``token`` event minus ``latency`` is what server, engine and store add.
    """

    def __init__(self, latency: float) -> None:
        self.latency = latency

    def _response(self, request: LLMRequest) -> LLMResponse:
        message = OPENING if request.purpose == "opening" else reply_for(request.user_message)
        return LLMResponse(transition=StateTransition(target_state="talk", context_update={}), message=message)

    def send_request(self, request: LLMRequest) -> LLMResponse:  # pragma: no cover - the server is async
        time.sleep(self.latency)
        return self._response(request)

    async def acomplete(self, request: LLMRequest) -> LLMResult:
        await asyncio.sleep(self.latency)
        return LLMResult(response=self._response(request))

    async def astream(self, request: LLMRequest) -> AsyncIterator[str | LLMResult]:
        response = self._response(request)
        await asyncio.sleep(self.latency)
        decision = {"transition": {"target_state": "talk", "context_update": {}}, "message": response.message}
        yield json.dumps(decision, ensure_ascii=False)
        yield LLMResult(response=response)


def build_app(store: str, definition: str, latency: float, *, max_concurrent_turns: int | None = None) -> Any:
    """The API over a manager on ``store`` with the fake model; ``definition`` is served as ``loop``."""
    from llm_fsm.manager import FSMManager
    from llm_fsm.server import KeyRing, create_app
    from llm_fsm.stores import open_store

    extra: dict[str, Any] = {"max_concurrent_turns": max_concurrent_turns} if max_concurrent_turns else {}
    manager = FSMManager(llm_interface=FixedLatencyModel(latency), store=open_store(store), **extra)
    return create_app(
        manager, {"loop": definition}, keys=KeyRing([]), anonymous_tenant="local", rate_limit_per_minute=0
    )


GC_PAUSE_LOGGED_MS = 10.0
"""A collection at least this long is written to the server's log (``serve.py`` counts them per row)."""
GC_PAUSE_LOG = "gc pause"


def configure_gc(mode: str) -> None:
    """The collector of a worker whose app is built: ``default`` (as ``llm-fsm serve`` leaves it), ``freeze``
    (what start-up built is moved out of the collector's reach: a full collection then walks only what turns
    made, not the libraries' hundreds of thousands of objects) or ``off`` (no collection at all: the bound on
    what the collector can add to the tail). Every collection of ``GC_PAUSE_LOGGED_MS`` or more is logged."""
    if mode == "freeze":
        gc.collect()
        gc.freeze()
    elif mode == "off":
        gc.disable()
    elif mode != "default":
        raise ValueError(f"unknown gc mode {mode!r}")
    started: list[float] = []
    log = logging.getLogger("serve_app.gc")

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            ms = (time.perf_counter() - started.pop()) * 1000
            if ms >= GC_PAUSE_LOGGED_MS:
                log.warning("%s: generation %d, %.1f ms", GC_PAUSE_LOG, info["generation"], ms)

    gc.callbacks.append(timed)


def configure_logging() -> None:
    # the library only adds a NullHandler and `llm-fsm serve` configures none: without this, the server's
    # warnings (the cause behind a 503) would go nowhere, and the benchmark's server log would say nothing
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(process)d %(name)s %(levelname)s %(message)s")


def app_factory() -> Any:
    """uvicorn's factory: each worker process builds its app from ``$SERVE_BENCH_SETTINGS``."""
    configure_logging()
    settings = json.loads(os.environ[SETTINGS_ENV])
    app = build_app(
        settings["store"],
        settings["definition"],
        settings["latency"],
        max_concurrent_turns=settings.get("max_concurrent_turns"),
    )
    configure_gc(settings.get("gc", "default"))
    return app


def _no_delay_protocol() -> Any:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class NoDelayH11Protocol(H11Protocol):
        """uvicorn's h11 protocol that turns Nagle's algorithm off on every accepted connection.

        With ``--workers N`` uvicorn binds the listening socket itself with ``proto`` 0, accepted
        sockets inherit it, and asyncio sets ``TCP_NODELAY`` only on sockets that say IPPROTO_TCP: each
        response then waits for the client's delayed ACK, about 40 ms on Linux (uvicorn issue 3149).
        One worker is not affected (asyncio binds that socket from getaddrinfo).
        """

        def connection_made(self, transport: Any) -> None:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            super().connection_made(transport)

    return NoDelayH11Protocol


NoDelayH11Protocol = _no_delay_protocol()
"""Importable by uvicorn's worker processes as ``serve_app:NoDelayH11Protocol`` (``--nodelay``)."""


def main() -> None:
    """Serve ``app_factory`` as ``llm-fsm serve`` does (uvicorn, 1 or N workers), optionally with TCP_NODELAY;
    ``--bare``: the bare app of ``serve_bare.py`` on the same uvicorn, with the same options."""
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--nodelay", action="store_true", help="set TCP_NODELAY on accepted connections")
    parser.add_argument("--bare", action="store_true", help="serve the bare app (serve_bare.py) instead")
    args = parser.parse_args()
    uvicorn.run(
        "serve_bare:app_factory" if args.bare else "serve_app:app_factory",
        factory=True,
        host="127.0.0.1",
        port=args.port,
        workers=args.workers,
        http="serve_app:NoDelayH11Protocol" if args.nodelay else "auto",
        log_level="warning",
        access_log=False,
        backlog=4096,
    )


if __name__ == "__main__":
    main()
