"""``create_app(manager, ...)``: the HTTP API over an ``FSMManager``, as a FastAPI application.

Everything goes through the manager's async API, so no request blocks the event loop, turns on
one conversation are serialised and a repeated ``message_id`` is answered once. The tenant of
the caller's key is passed as ``user_id`` on every call; the stores answer only to the exact
owner, so another tenant's conversation is, to a caller, exactly an unknown id (404).

A turn, once started, runs to its end in a task of its own: a client that goes away (or a
streaming response that is cut) does not cancel it half way, so it is saved whole (or, if it
fails, not at all) and the next message finds the conversation consistent.

(No ``from __future__ import annotations`` here: FastAPI reads the route signatures' types at
run time, including dependencies made inside ``create_app``.)
"""

import asyncio
import contextlib
import json
import math
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._records import TraceEvent, TurnRecord
from llm_fsm.engine._values import masked
from llm_fsm.errors import ConversationNotFoundError, FSMError, UsageError
from llm_fsm.server._definitions import DefinitionRegistry, DefinitionSource
from llm_fsm.server._errors import ApiError, api_error_for, logger
from llm_fsm.server._inspector import inspector_api, mount_inspector
from llm_fsm.server._keys import KeyRing
from llm_fsm.server._limits import DEFAULT_MAX_BODY_BYTES, BodyLimitMiddleware, CatchAllMiddleware, RateLimiter
from llm_fsm.server._models import (
    ConversationDetail,
    ConversationItem,
    ConversationList,
    DefinitionItem,
    DefinitionList,
    ErrorOut,
    ForceState,
    GraphOut,
    HandOff,
    HandoffOut,
    Health,
    HistoryMessage,
    OperatorMessage,
    PopFlow,
    PushFlow,
    ResumeBot,
    SendMessage,
    SetContext,
    StartConversation,
    Started,
    TurnResult,
)

DEFAULT_RATE_LIMIT_PER_MINUTE = 600
"""Requests a minute per key (a bucket of as many, refilled evenly); 0 turns the limit off."""

READINESS_TIMEOUT_SECONDS = 5.0
MAX_CONVERSATION_ID_LENGTH = 200
"""Longer ids are no one's (the manager makes 36-character ids): 404 without asking the store, which
might otherwise fail on a file name too long and answer as if it were down."""

SHUTDOWN_GRACE_SECONDS = 30.0
"""How long shutting down waits for turns already running to be saved."""

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": description}
    for status, description in (
        (401, "No API key, or an unknown one (`unauthorized`)"),
        (403, "The key lacks the right (`forbidden`)"),
        (422, "Malformed JSON or a body that does not match the schema"),
        (429, "Rate limit of the key (`rate_limited`); see Retry-After"),
        (503, "The store cannot be reached (`store_unavailable`)"),
    )
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "Unknown id, or another tenant's (`conversation_not_found`)"}
}


@dataclass(frozen=True)
class Caller:
    """Who is calling: the tenant every conversation call is scoped to, and what the key may do."""

    tenant: str
    rights: frozenset[str]
    bucket: str  # the rate limiter's key
    name: str = "anonymous"
    """Who the key is, for the trace of operator changes: its ``name``, else its tenant."""

    def actor(self, person: str | None) -> str:
        """The actor recorded for an operator change: the key, and the person acting through it if named.

        The key part comes from the server, so a caller cannot pass for another key; the person part is
        the caller's word (a desk key shared by several people names who pressed the button).
        """
        return f"{self.name}/{person}" if person else self.name


@dataclass(frozen=True)
class StreamEvent:
    """One server-sent event: the manager's ``token``, ``state`` and ``done``, or our ``error``."""

    event: str
    data: dict[str, Any]

    def encode(self) -> bytes:
        # JSON never holds a raw newline (they are escaped), so one data: line carries the whole object
        return f"event: {self.event}\ndata: {json.dumps(self.data, ensure_ascii=False)}\n\n".encode()


class _TurnRunner:
    """Runs turns in tasks of their own, so that a cancelled request never cuts a turn in the middle."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coroutine: Awaitable[Any]) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # retrieved here, so a turn whose client went away does not fail as "never retrieved"
            logger.debug("turn task ended with %s", type(task.exception()).__name__)

    async def run(self, coroutine: Awaitable[Any]) -> Any:
        """Await the turn; if the awaiting request is cancelled, the turn goes on and lands by itself."""
        return await asyncio.shield(self.spawn(coroutine))

    async def drain(self, timeout: float) -> None:
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=timeout)


def create_app(
    manager: Any,
    definitions: Iterable[DefinitionSource] | Mapping[str, DefinitionSource],
    *,
    keys: KeyRing | None = None,
    anonymous_tenant: str | None = None,
    cors_origins: Iterable[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    rate_limit_per_minute: float = DEFAULT_RATE_LIMIT_PER_MINUTE,
    rate_limit_burst: int | None = None,
    title: str = "llm-fsm",
) -> FastAPI:
    """The API for ``manager``, serving ``definitions`` (files, folders, or ``{id: file or FSMDefinition}``).

    Mount it in an existing application (``parent.mount("/fsm", create_app(...))``) or run it with
    any ASGI server. ``keys`` (default: ``$LLM_FSM_API_KEYS``) say who may call; with no key
    configured, every request acts as ``anonymous_tenant``, which must then be given explicitly
    (``llm-fsm serve`` does so only on a loopback host). ``cors_origins`` is empty by default: no
    browser on another origin may call. The rate limit is per key and per process.
    """
    keyring = keys if keys is not None else KeyRing.from_env()
    if not keyring and anonymous_tenant is None:
        raise UsageError(
            "no API keys configured (keys=, or $LLM_FSM_API_KEYS); pass anonymous_tenant= to serve without keys"
        )
    if max_body_bytes < 1:
        raise UsageError(f"max_body_bytes must be at least 1, not {max_body_bytes}")
    registry = DefinitionRegistry.from_sources(definitions)
    limiter = RateLimiter(rate_limit_per_minute, rate_limit_burst) if rate_limit_per_minute > 0 else None
    runner = _TurnRunner()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await runner.drain(SHUTDOWN_GRACE_SECONDS)  # turns already running are saved before the process ends

    app = FastAPI(
        title=title,
        description="Conversations on declarative finite-state machines (llm-fsm). See docs/server.md.",
        version="1",
        lifespan=lifespan,
    )
    app.state.manager = manager
    app.state.registry = registry
    app.state.turns = runner

    _install_error_handlers(app)
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

    bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer <API key>")
    header_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="The API key, as a header")

    def requires(right: Literal["read", "write"]) -> Callable[..., Awaitable[Caller]]:
        async def caller(
            request: Request,
            credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
            api_key: Annotated[str | None, Depends(header_key)],
        ) -> Caller:
            presented = credentials.credentials if credentials is not None else api_key
            if not keyring:
                found = Caller(str(anonymous_tenant), frozenset({"read", "write"}), "anonymous", "anonymous")
            else:
                key = keyring.verify(presented)
                if key is None:
                    # failed attempts are limited per client address, so guessing keys is slow; a valid key
                    # never touches this bucket, so no one can lock a tenant out by failing on purpose
                    address = request.client.host if request.client is not None else "unknown"
                    _limit(limiter, f"unauthenticated:{address}")
                    raise ApiError(
                        401,
                        "unauthorized",
                        "a valid API key is needed (Authorization: Bearer KEY, or X-API-Key: KEY)",
                        headers={"WWW-Authenticate": "Bearer"},
                    )
                found = Caller(key.tenant, key.rights, key.key_sha256, key.name or key.tenant)
            _limit(limiter, found.bucket)
            if right not in found.rights:
                raise ApiError(403, "forbidden", f"this key may not {right}")
            return found

        return caller

    reader = requires("read")
    writer = requires("write")
    v1 = APIRouter(prefix="/v1", responses=_ERRORS)

    # --- definitions ---------------------------------------------------------------------

    @v1.get("/definitions", response_model=DefinitionList, tags=["definitions"])
    async def list_definitions(caller: Annotated[Caller, Depends(reader)]) -> DefinitionList:
        """The definitions this server offers; start a conversation with one's `id`."""
        items = []
        for served in registry.by_id.values():
            definition = await served.load()
            items.append(
                DefinitionItem(
                    id=served.id,
                    name=definition.name,
                    description=definition.description,
                    initial_state=definition.initial_state,
                    states=list(definition.states),
                )
            )
        return DefinitionList(definitions=items)

    @v1.get(
        "/definitions/{definition_id}/graph",
        response_model=GraphOut,
        tags=["definitions"],
        responses={404: {"model": ErrorOut, "description": "No such definition (`definition_not_found`)"}},
    )
    async def definition_graph(
        definition_id: str,
        caller: Annotated[Caller, Depends(reader)],
        format: Annotated[Literal["mermaid", "dot", "text"], Query(description="Diagram format.")] = "mermaid",
    ) -> GraphOut:
        """A definition's states and transitions as a diagram (Mermaid by default), as `llm-fsm graph` draws it."""
        from llm_fsm.definition._graph import graph_from_definition
        from llm_fsm.renderers import extras_from_definition, render

        definition = await registry.get(definition_id).load()
        text = render(graph_from_definition(definition), format, extras_from_definition(definition))
        return GraphOut(definition=definition_id, format=format, graph=text)

    # --- conversations -------------------------------------------------------------------

    @v1.post("/conversations", status_code=201, response_model=Started, tags=["conversations"])
    async def start_conversation(body: StartConversation, caller: Annotated[Caller, Depends(writer)]) -> Started:
        """Start a conversation of a served definition; returns its id and the assistant's opening."""
        served = registry.get(body.definition)

        async def start() -> Started:
            conversation_id, opening = await manager.astart_conversation(
                served.location, body.context, user_id=caller.tenant
            )
            instance = await manager.aget_instance(conversation_id, user_id=caller.tenant)
            return Started(
                conversation_id=conversation_id,
                definition=served.id,
                opening=opening,
                state=instance.current_state,
                ended=instance.ended,
            )

        result: Started = await runner.run(start())
        return result

    @v1.get("/conversations", response_model=ConversationList, tags=["conversations"])
    async def list_conversations(
        caller: Annotated[Caller, Depends(reader)],
        limit: Annotated[int, Query(ge=1, le=1000, description="At most this many, newest first.")] = 100,
    ) -> ConversationList:
        """The caller's conversations, newest first."""
        summaries = await manager.alist_conversations(user_id=caller.tenant)
        return ConversationList(
            conversations=[
                ConversationItem(
                    conversation_id=s.conversation_id,
                    definition=registry.id_for(s.fsm_id),
                    state=s.current_state,
                    status=s.status,
                    version=s.version,
                    updated_at=s.updated_at,
                )
                for s in summaries[:limit]
            ]
        )

    @v1.get("/conversations/{conversation_id}", response_model=ConversationDetail, tags=["conversations"])
    async def get_conversation(conversation_id: str, caller: Annotated[Caller, Depends(reader)]) -> ConversationDetail:
        """One conversation: state, context (sensitive values masked) and the full history."""
        _check_id(conversation_id)
        return await detail(conversation_id, caller)

    async def detail(conversation_id: str, caller: Caller) -> ConversationDetail:
        instance: FSMInstance = await manager.aget_instance(conversation_id, user_id=caller.tenant)
        definition = await manager.aget_definition(conversation_id, user_id=caller.tenant)
        history = await manager.aget_conversation_history(conversation_id, user_id=caller.tenant)
        handoff = instance.handoff
        return ConversationDetail(
            conversation_id=instance.conversation_id,
            definition=registry.id_for(instance.root_fsm_id),
            state=instance.current_state,
            status=instance.status,
            ended=instance.ended,
            turn_count=instance.turn_count,
            stack=instance.stack,
            mode=instance.mode,
            handoff=HandoffOut.model_validate(handoff.model_dump()) if handoff is not None else None,
            created_at=instance.created_at,
            updated_at=instance.updated_at,
            context=masked(definition, instance.context.data),
            history=[
                HistoryMessage(
                    role=m["role"], content=m["text"], id=m["id"], at=m["at"], metadata=m["metadata"], parts=m["parts"]
                )
                for m in history
            ],
        )

    # --- operators (docs/operations.md): write right; each answers the conversation after the change ------

    operator_errors: dict[int | str, dict[str, Any]] = {
        **_NOT_FOUND,
        409: {"model": ErrorOut, "description": "Ended, a handoff conflict, or a flow refused"},
    }

    async def operate(conversation_id: str, caller: Caller, change: Coroutine[Any, Any, Any]) -> ConversationDetail:
        try:
            _check_id(conversation_id)
        except ConversationNotFoundError:
            change.close()  # never started
            raise
        await runner.run(change)  # like a turn, a change once started lands whole even if the client goes
        return await detail(conversation_id, caller)

    @v1.post(
        "/conversations/{conversation_id}/state",
        response_model=ConversationDetail,
        tags=["operators"],
        responses=operator_errors,
    )
    async def force_state(
        conversation_id: str, body: ForceState, caller: Annotated[Caller, Depends(writer)]
    ) -> ConversationDetail:
        """Put the conversation in any declared state (`force_state`): transitions are not consulted."""
        change = manager.aforce_state(
            conversation_id,
            body.state,
            body.reason or "",
            actor=caller.actor(body.actor),
            user_id=caller.tenant,
        )
        return await operate(conversation_id, caller, change)

    @v1.post(
        "/conversations/{conversation_id}/flows",
        response_model=ConversationDetail,
        tags=["operators"],
        responses=operator_errors,
    )
    async def push_flow(
        conversation_id: str, body: PushFlow, caller: Annotated[Caller, Depends(writer)]
    ) -> ConversationDetail:
        """Start a sub-flow declared for the current state (`push_flow`), with `inputs` of its keys."""
        change = manager.apush_flow(
            conversation_id,
            body.flow,
            body.inputs,
            actor=caller.actor(body.actor),
            reason=body.reason,
            user_id=caller.tenant,
        )
        return await operate(conversation_id, caller, change)

    @v1.post(
        "/conversations/{conversation_id}/flows/pop",
        response_model=ConversationDetail,
        tags=["operators"],
        responses=operator_errors,
    )
    async def pop_flow(conversation_id: str, body: PopFlow, caller: Annotated[Caller, Depends(writer)]) -> Any:
        """Finish the active sub-flow (`pop_flow`): its declared outputs go to the parent."""
        change = manager.apop_flow(
            conversation_id, body.outputs, actor=caller.actor(body.actor), reason=body.reason, user_id=caller.tenant
        )
        return await operate(conversation_id, caller, change)

    @v1.post(
        "/conversations/{conversation_id}/context",
        response_model=ConversationDetail,
        tags=["operators"],
        responses=operator_errors,
    )
    async def set_context(conversation_id: str, body: SetContext, caller: Annotated[Caller, Depends(writer)]) -> Any:
        """Write context keys as the application (`set_context`); declared keys are checked (422)."""
        change = manager.aset_context(
            conversation_id, body.updates, actor=caller.actor(body.actor), reason=body.reason, user_id=caller.tenant
        )
        return await operate(conversation_id, caller, change)

    @v1.post(
        "/conversations/{conversation_id}/handoff",
        response_model=ConversationDetail,
        tags=["operators"],
        responses=operator_errors,
    )
    async def hand_off(conversation_id: str, body: HandOff, caller: Annotated[Caller, Depends(writer)]) -> Any:
        """Give the conversation to a person (`hand_off`): messages are recorded, no model is called."""
        change = manager.ahand_off(conversation_id, body.reason, actor=caller.actor(body.actor), user_id=caller.tenant)
        return await operate(conversation_id, caller, change)

    @v1.post(
        "/conversations/{conversation_id}/operator-messages",
        response_model=ConversationDetail,
        tags=["operators"],
        responses=operator_errors,
    )
    async def operator_message(
        conversation_id: str, body: OperatorMessage, caller: Annotated[Caller, Depends(writer)]
    ) -> Any:
        """Record the person's reply (`post_operator_message`); only while the conversation is handed off."""
        change = manager.apost_operator_message(
            conversation_id,
            body.text,
            actor=caller.actor(body.actor),
            message_id=body.message_id,
            user_id=caller.tenant,
        )
        return await operate(conversation_id, caller, change)

    @v1.post(
        "/conversations/{conversation_id}/resume",
        response_model=ConversationDetail,
        tags=["operators"],
        responses=operator_errors,
    )
    async def resume_bot(conversation_id: str, body: ResumeBot, caller: Annotated[Caller, Depends(writer)]) -> Any:
        """Hand the conversation back to the bot (`resume_bot`), where it was or in `state`."""
        change = manager.aresume_bot(
            conversation_id, actor=caller.actor(body.actor), state=body.state, reason=body.reason, user_id=caller.tenant
        )
        return await operate(conversation_id, caller, change)

    @v1.delete("/conversations/{conversation_id}", status_code=204, response_class=Response, tags=["conversations"])
    async def delete_conversation(conversation_id: str, caller: Annotated[Caller, Depends(writer)]) -> Response:
        """Delete a conversation and everything stored of it."""
        _check_id(conversation_id)
        if not await manager.adelete_conversation(conversation_id, user_id=caller.tenant):
            raise ConversationNotFoundError(conversation_id)
        return Response(status_code=204)

    @v1.post(
        "/conversations/{conversation_id}/messages",
        response_model=TurnResult,
        tags=["conversations"],
        responses={
            **_NOT_FOUND,
            200: {
                "description": "The turn's result; with `Accept: text/event-stream`, server-sent events "
                "`state`, `token`, `done` (its data is this object) or `error`.",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            409: {"model": ErrorOut, "description": "The conversation has ended (`conversation_ended`)"},
            413: {"model": ErrorOut, "description": "Body or message too large"},
            415: {"model": ErrorOut, "description": "Images for a model that reads text only (`unsupported_content`)"},
        },
    )
    async def send_message(
        conversation_id: str, body: SendMessage, request: Request, caller: Annotated[Caller, Depends(writer)]
    ) -> Any:
        """Send the user's message; returns the reply, the state, whether the conversation ended, and the verdict.

        Give a `message_id` to make the call safe to retry: the same id is answered once, with the same reply.
        """
        _check_id(conversation_id)
        message_id = body.message_id or f"srv-{uuid.uuid4().hex}"
        if "text/event-stream" in request.headers.get("accept", ""):
            return await _stream_response(
                manager, runner, conversation_id, body.message, message_id, caller.tenant, body.metadata
            )

        async def turn() -> TurnResult:
            outcome = await manager.aprocess_turn(
                conversation_id, body.message, message_id, user_id=caller.tenant, **_with_metadata(body.metadata)
            )
            if outcome.record is None:  # a retried message id: where its turn went is in the stored record
                return await _turn_result(manager, conversation_id, message_id, outcome.reply, caller.tenant)
            return TurnResult(
                conversation_id=conversation_id,
                message_id=message_id,
                reply=outcome.reply,
                state=outcome.state,
                ended=outcome.ended,
                verdict=outcome.record.verdict,
                mode="human" if outcome.mode == "human" else "bot",
            )

        result: TurnResult = await runner.run(turn())
        return result

    @v1.get(
        "/conversations/{conversation_id}/turns/{turn}",
        response_model=TurnRecord,
        tags=["conversations"],
        responses={404: {"model": ErrorOut, "description": "Unknown conversation or turn not kept"}},
    )
    async def explain_turn(conversation_id: str, turn: int, caller: Annotated[Caller, Depends(reader)]) -> TurnRecord:
        """Why the engine decided what it did in one turn: `turn` is its index (1-based), or -1 for the last."""
        _check_id(conversation_id)
        record: TurnRecord = await manager.aexplain(conversation_id, turn, user_id=caller.tenant)
        return record

    @v1.get(
        "/conversations/{conversation_id}/trace",
        response_model=list[TraceEvent],
        tags=["conversations"],
        responses=_NOT_FOUND,
    )
    async def trace(conversation_id: str, caller: Annotated[Caller, Depends(reader)]) -> list[TraceEvent]:
        """The conversation's audit trail: every turn, update, transition, flow push and pop, refusal."""
        _check_id(conversation_id)
        events: list[TraceEvent] = await manager.aget_trace(conversation_id, user_id=caller.tenant)
        # the stored fsm_id is a path on the server's disk: clients see the definition's id instead
        return [
            e.model_copy(update={"data": {**e.data, "fsm_id": registry.id_for(str(e.data["fsm_id"]))}})
            if "fsm_id" in e.data
            else e
            for e in events
        ]

    app.include_router(v1)
    app.include_router(inspector_api(reader, keys_required=bool(keyring)))  # the web inspector: /v1/me, lint
    mount_inspector(app)  # its page at / (docs/server.md, "The inspector")

    # --- health ----------------------------------------------------------------------------

    @app.get("/healthz", response_model=Health, tags=["health"])
    async def healthz() -> Health:
        """The process answers (no key needed)."""
        return Health(status="ok")

    @app.get("/readyz", response_model=Health, tags=["health"], responses={503: {"model": Health}})
    async def readyz() -> Any:
        """The store answers (no key needed): a load balancer sends traffic only to ready workers."""
        probe = f"readyz-{uuid.uuid4().hex}"
        try:
            await asyncio.wait_for(
                manager.aget_instance(probe, user_id="llm-fsm-readyz"), timeout=READINESS_TIMEOUT_SECONDS
            )
        except ConversationNotFoundError:
            return Health(status="ok")
        except Exception as exc:  # noqa: BLE001 - any failure of the probe means not ready
            detail = "store_unavailable" if isinstance(exc, FSMError | TimeoutError) else "internal_error"
            logger.warning("readiness probe failed: %s: %s", type(exc).__name__, exc)
            return JSONResponse(Health(status="unavailable", detail=detail).model_dump(), status_code=503)
        return Health(status="ok")  # pragma: no cover - a random id is never found

    return app


def _limit(limiter: RateLimiter | None, bucket: str) -> None:
    """Spend a token of ``bucket``, or answer 429 with the seconds until the next one."""
    if limiter is None:
        return
    wait = limiter.take(bucket)
    if wait > 0:
        raise ApiError(
            429, "rate_limited", "too many requests; slow down", headers={"Retry-After": str(max(1, math.ceil(wait)))}
        )


def _check_id(conversation_id: str) -> None:
    if len(conversation_id) > MAX_CONVERSATION_ID_LENGTH:
        raise ConversationNotFoundError("id too long")


def _with_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """``metadata`` as a keyword only when the client sent some: a manager-like object written before messages had
    metadata keeps working for every other request."""
    return {} if metadata is None else {"metadata": metadata}


async def _turn_result(manager: Any, conversation_id: str, message_id: str, reply: str, tenant: str) -> TurnResult:
    """The turn's reply with where it left the conversation: the turn record kept under its message id."""
    instance: FSMInstance = await manager.aget_instance(conversation_id, user_id=tenant)
    record = next((r for r in reversed(instance.turns) if r.message_id == message_id), None)
    return TurnResult(
        conversation_id=conversation_id,
        message_id=message_id,
        reply=reply,
        state=record.state_after if record is not None else instance.current_state,
        ended=instance.ended,
        verdict=record.verdict if record is not None else None,
        mode=instance.mode,
    )


async def _events(
    manager: Any,
    conversation_id: str,
    message: str | list[dict[str, Any]],
    message_id: str,
    tenant: str,
    metadata: dict[str, Any] | None = None,
) -> AsyncIterator[StreamEvent]:
    """The manager's stream of the turn (``FSMManager.astream_message``), its ``done`` completed.

    ``done`` carries the same object as the JSON endpoint (the full verdict, the message id), whatever
    the stream's own ``done`` holds (a duplicate ``message_id`` there says only ``reply``).
    """
    text: list[str] = []
    async for event in manager.astream_message(
        conversation_id, message, message_id=message_id, user_id=tenant, **_with_metadata(metadata)
    ):
        name, data = str(event.event), dict(event.data)
        if name == "token":
            text.append(str(data.get("text", "")))
        elif name == "done":
            reply = str(data.get("reply", "".join(text)))
            result = await _turn_result(manager, conversation_id, message_id, reply, tenant)
            data = {**data, **result.model_dump(mode="json")}
        yield StreamEvent(name, data)


async def _stream_response(
    manager: Any,
    runner: _TurnRunner,
    conversation_id: str,
    message: str | list[dict[str, Any]],
    message_id: str,
    tenant: str,
    metadata: dict[str, Any] | None = None,
) -> Response:
    """Server-sent events of one turn; an error before the first event is an ordinary JSON error response.

    The turn runs in a task of its own that puts events on a queue: a client that disconnects
    cancels only the reading side, and the turn goes on to be saved whole.
    """
    queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()  # unbounded: the producer never waits on a reader

    async def produce() -> None:
        try:
            async for event in _events(manager, conversation_id, message, message_id, tenant, metadata):
                await queue.put(event)
        except Exception as exc:  # noqa: BLE001 - every failure becomes an error event
            error = api_error_for(exc, conversation_id=conversation_id)
            await queue.put(StreamEvent("error", error.body()["error"]))
        finally:
            await queue.put(None)

    runner.spawn(produce())
    first = await queue.get()
    if first is not None and first.event == "error" and "status" in first.data:
        status = int(first.data["status"])
        headers = {"Retry-After": "1"} if status == 503 else None
        return JSONResponse({"error": first.data}, status_code=status, headers=headers)

    async def body() -> AsyncIterator[bytes]:
        event = first
        while event is not None:
            yield event.encode()
            event = await queue.get()

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _install_error_handlers(app: FastAPI) -> None:
    def answer(error: ApiError) -> JSONResponse:
        return JSONResponse(error.body(), status_code=error.status, headers=error.headers)

    async def on_api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return answer(exc)

    async def on_fsm_error(request: Request, exc: Exception) -> Response:
        return answer(api_error_for(exc, conversation_id=request.path_params.get("conversation_id")))

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        problems = exc.errors()
        if any(p.get("type") == "json_invalid" for p in problems):
            return answer(ApiError(422, "malformed_json", "the request body is not valid JSON"))
        details = [
            {"loc": list(p.get("loc", ())), "msg": str(p.get("msg", "")), "type": str(p.get("type", ""))}
            for p in problems
        ]
        return answer(ApiError(422, "invalid_request", "the request does not match the schema", details=details))

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large"}.get(exc.status_code, "http_error")
        error = ApiError(exc.status_code, code, str(exc.detail), headers=dict(exc.headers or {}) or None)
        return answer(error)

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(FSMError, on_fsm_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)


__all__ = ["Caller", "StreamEvent", "create_app"]
