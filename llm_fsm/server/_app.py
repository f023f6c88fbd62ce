"""``create_app(manager, ...)``: the HTTP API over an ``FSMManager``, as a FastAPI application.

The app is a factory's product: one ``APIRouter`` per concern — conversations, operators,
definitions, the inspector, health — included into a fresh ``FastAPI`` with this app's
manager, definitions and keys on ``app.state``, where the routers' typed dependencies
(``_deps``) find them. The routers are shared by every app; nothing of one app leaks into
another, and an app mounted under a parent (``parent.mount("/fsm", create_app(...))``) works
as it does alone.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncIterator, Iterable, Mapping

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from llm_fsm.errors import FSMError, UsageError
from llm_fsm.server import (
    _api_docs,
    _conversations,
    _definitions_api,
    _events_api,
    _health,
    _inspector,
    _operators,
    _proof,
    _replay,
    _versions,
    _webhooks_api,
)
from llm_fsm.server._bodies import JsonBodyMiddleware, malformed
from llm_fsm.server._definitions import DefinitionRegistry, DefinitionSource
from llm_fsm.server._deps import MAX_CONVERSATION_ID_LENGTH, Access, Caller
from llm_fsm.server._errors import ApiError, api_error_for, code_for_status, unknown_definition
from llm_fsm.server._events import DEFAULT_POLL_SECONDS, EventSource, SaveSignals
from llm_fsm.server._health import READINESS_TIMEOUT_SECONDS
from llm_fsm.server._keys import KeyRing
from llm_fsm.server._limits import DEFAULT_MAX_BODY_BYTES, BodyLimitMiddleware, CatchAllMiddleware, RateLimiter
from llm_fsm.server._protocol import ManagerProtocol
from llm_fsm.server._timer_loop import TimerLoop
from llm_fsm.server._turns import StreamEvent, TurnRunner
from llm_fsm.server._webhooks import WebhookDispatcher
from llm_fsm.webhooks import WebhookSettings

logger = logging.getLogger(__name__)

DEFAULT_RATE_LIMIT_PER_MINUTE = 600
"""Requests a minute per key (a bucket of as many, refilled evenly); 0 turns the limit off."""

SHUTDOWN_GRACE_SECONDS = 30.0
"""How long shutting down waits for turns already running to be saved."""


def create_app(
    manager: ManagerProtocol,
    definitions: Iterable[DefinitionSource] | Mapping[str, DefinitionSource],
    *,
    aliases: Mapping[str, DefinitionSource] | None = None,
    keys: KeyRing | None = None,
    anonymous_tenant: str | None = None,
    cors_origins: Iterable[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    rate_limit_per_minute: float = DEFAULT_RATE_LIMIT_PER_MINUTE,
    rate_limit_burst: int | None = None,
    title: str = "llm-fsm",
    timer_interval: float | None = None,
    events_poll_seconds: float = DEFAULT_POLL_SECONDS,
    webhooks: WebhookSettings | None = None,
) -> FastAPI:
    """The API for ``manager``, serving ``definitions`` (files, folders, or ``{id: file or FSMDefinition}``).

    Mount it in an existing application (``parent.mount("/fsm", create_app(...))``) or run it with
    any ASGI server. ``keys`` (default: ``$LLM_FSM_API_KEYS``) say who may call; with no key
    configured, every request acts as ``anonymous_tenant``, which must then be given explicitly
    (``llm-fsm serve`` does so only on a loopback host). ``cors_origins`` is empty by default: no
    browser on another origin may call. The rate limit is per key and per process. ``aliases`` (``{name: file or
    FSMDefinition}``) name versions served beside the files: each belongs to the served definition whose ``name``
    it has, is read now and held by its content hash (``POST /v1/conversations`` takes ``alias``; the inspector
    replays recorded turns against one). ``timer_interval``: run the conversations' due timers every that many
    seconds while the app runs (``llm-fsm serve`` does, every 5 s; None: the application runs them itself, with
    ``FSMManager.arun_due_timers``). ``events_poll_seconds``: how often an open event stream reads the store
    for changes this process did not save (other workers' and processes'); its own saves wake the stream at once.
    ``webhooks``: POST every event of the conversations this process saves, signed, to these URLs (docs/server.md,
    Webhooks); the deliveries run in the app's lifespan, so run the app with a server that runs it (uvicorn does).
    """
    keyring = keys if keys is not None else KeyRing.from_env()
    if not keyring and anonymous_tenant is None:
        raise UsageError(
            "no API keys configured (keys=, or $LLM_FSM_API_KEYS); pass anonymous_tenant= to serve without keys"
        )
    if max_body_bytes < 1:
        raise UsageError(f"max_body_bytes must be at least 1, not {max_body_bytes}")
    registry = DefinitionRegistry.from_sources(definitions)
    for alias in registry.add_aliases(aliases or {}):
        _versions.hold(manager, alias.definition)
    limiter = RateLimiter(rate_limit_per_minute, rate_limit_burst) if rate_limit_per_minute > 0 else None
    if not (math.isfinite(events_poll_seconds) and events_poll_seconds > 0):
        raise UsageError(f"events_poll_seconds must be a finite number above 0, not {events_poll_seconds}")
    runner = TurnRunner()
    signals = SaveSignals()
    signals.attach(manager)  # this process's saves wake the event streams at once (_events)
    dispatcher = WebhookDispatcher(webhooks, manager) if webhooks is not None else None
    if dispatcher is not None:
        signals.subscribers.append(dispatcher.on_save)  # a save only notes the conversation: no turn waits

    timers = TimerLoop(manager, timer_interval) if timer_interval is not None else None

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if timers is not None and timers.available:
            timers.start()
        elif timers is not None:
            logger.warning("the store does not index timers: no timer fires in this server (docs/server.md)")
        if dispatcher is not None:
            await dispatcher.start()
        yield
        if timers is not None:
            await timers.stop()
        await runner.drain(SHUTDOWN_GRACE_SECONDS)  # turns already running are saved before the process ends
        signals.detach(manager)
        if dispatcher is not None:
            await dispatcher.stop(SHUTDOWN_GRACE_SECONDS)  # what is still owed stays in the outbox

    app = FastAPI(
        title=title,
        description="Conversations on declarative finite-state machines (llm-fsm). See docs/server.md.",
        version="1",
        lifespan=lifespan,
        docs_url=None,  # FastAPI's pages load their scripts from a CDN: _api_docs serves the same pages offline
        redoc_url=None,
    )
    # what the routers' dependencies read (llm_fsm.server._deps); manager and registry are also for the CLI
    app.state.manager = manager
    app.state.registry = registry
    app.state.turns = runner
    app.state.timers = timers  # the timer loop (None: not run here); its listeners hear each timer fired
    app.state.access = Access(keyring, anonymous_tenant, limiter)
    app.state.events = EventSource(signals, events_poll_seconds)
    app.state.webhooks = dispatcher
    app.state.proofs = _proof.ProofCache()  # the inspector's proofs, per served definition and version

    _install_error_handlers(app)
    app.add_middleware(JsonBodyMiddleware)  # inside the body limit, which counts what it reads
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    origins = list(cors_origins)
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "X-API-Key", "Content-Type", "Accept"],
        )
    app.add_middleware(CatchAllMiddleware)

    app.include_router(_definitions_api.router)
    app.include_router(_conversations.router)
    app.include_router(_events_api.router)  # GET /v1/conversations/{id}/events (server-sent), docs/server.md
    app.include_router(_webhooks_api.router)  # /v1/webhooks: the outbox's counts and dead letters (write right)
    app.include_router(_operators.router)  # docs/operations.md: write right; each answers the conversation after
    app.include_router(_inspector.router)  # the web inspector: its page at / (docs/server.md), /v1/me, lint
    app.include_router(_proof.router)  # GET /v1/definitions/{id}/prove, the inspector's lint panel's proof
    app.include_router(_replay.router)  # GET /v1/definitions/{id}/replay?against=ALIAS, the inspector's replay view
    _inspector.mount_static(app)
    app.include_router(_api_docs.router)  # /docs and /redoc, their scripts vendored in the inspector's static/vendor
    app.include_router(_health.router)
    return app


def _install_error_handlers(app: FastAPI) -> None:
    def answer(error: ApiError) -> JSONResponse:
        return JSONResponse(error.body(), status_code=error.status, headers=error.headers)

    async def on_api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return answer(exc)

    async def on_fsm_error(request: Request, exc: Exception) -> Response:
        error = api_error_for(exc, conversation_id=request.path_params.get("conversation_id"))
        definition_id = request.path_params.get("definition_id")
        if error.code == "definition_not_found" and definition_id is not None:  # the id in the path is unknown
            error = unknown_definition(definition_id, request.app.state.registry.by_id)
        return answer(error)

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        problems = exc.errors()
        if any(p.get("type") == "json_invalid" for p in problems):
            # the body middleware (_bodies) answers first; kept for a route reached some other way
            return answer(malformed("syntax", "not JSON"))
        details = [
            {"loc": list(p.get("loc", ())), "msg": str(p.get("msg", "")), "type": str(p.get("type", ""))}
            for p in problems
        ]
        return answer(ApiError(422, "invalid_request", "the request does not match the schema", details=details))

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        code = code_for_status(exc.status_code)
        error = ApiError(exc.status_code, code, str(exc.detail), headers=dict(exc.headers or {}) or None)
        return answer(error)

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(FSMError, on_fsm_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)


__all__ = [
    "DEFAULT_RATE_LIMIT_PER_MINUTE",
    "MAX_CONVERSATION_ID_LENGTH",
    "READINESS_TIMEOUT_SECONDS",
    "SHUTDOWN_GRACE_SECONDS",
    "Caller",
    "StreamEvent",
    "create_app",
]
