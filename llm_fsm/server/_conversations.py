"""``/v1/conversations``: start, send a message (JSON or server-sent events), read, list, explain, trace, provenance,
delete.

Everything goes through the manager's async API, so no request blocks the event loop, turns on
one conversation are serialised and a repeated ``message_id`` is answered once. The tenant of
the caller's key is passed as ``user_id`` on every call; the stores answer only to the exact
owner, so another tenant's conversation is, to a caller, exactly an unknown id (404).

(No ``from __future__ import annotations`` here: FastAPI reads the route signatures' types at run time.)
"""

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from llm_fsm.engine import TraceEvent, TurnRecord
from llm_fsm.engine._values import masked
from llm_fsm.errors import ConversationNotFoundError
from llm_fsm.runtime._provenance import ValueOrigin
from llm_fsm.server._definitions import DefinitionRegistry
from llm_fsm.server._deps import Manager, Reader, Registry, Turns, Writer, check_id, served
from llm_fsm.server._models import (
    ERRORS,
    NOT_FOUND,
    ConversationDetail,
    ConversationItem,
    ConversationList,
    ErrorOut,
    HandoffOut,
    HistoryMessage,
    SendMessage,
    StartConversation,
    Started,
    TurnResult,
)
from llm_fsm.server._protocol import ManagerProtocol
from llm_fsm.server._turns import stream_response, turn_result, with_metadata
from llm_fsm.server._versions import chosen_version

router = APIRouter(prefix="/v1", tags=["conversations"], responses=ERRORS)


async def conversation_detail(
    manager: ManagerProtocol, registry: DefinitionRegistry, conversation_id: str, tenant: str
) -> ConversationDetail:
    """The conversation as ``GET /v1/conversations/{id}`` shows it (also the answer of every operator change)."""
    instance = await manager.aget_instance(conversation_id, user_id=tenant)
    definition = await manager.aget_definition(conversation_id, user_id=tenant)
    history = await manager.aget_conversation_history(conversation_id, user_id=tenant)
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
        definition_version=instance.definition_hash or None,
    )


@router.post("/conversations", status_code=201, response_model=Started)
async def start_conversation(
    body: StartConversation, caller: Writer, manager: Manager, registry: Registry, turns: Turns
) -> Started:
    """Start a conversation of a served definition, on its current version, a `version` or an `alias`; returns its
    id, the assistant's opening and the version it runs on (and stays on)."""
    definition = served(registry, body.definition)
    version, alias = await chosen_version(manager, registry, definition, body.version, body.alias)

    async def start() -> Started:
        # a definition served as an object is passed as one: the manager takes an FSMDefinition as well as a path
        conversation_id, opening = await manager.astart_conversation(
            definition.location, body.context, user_id=caller.tenant, version=version, language=body.language
        )
        instance = await manager.aget_instance(conversation_id, user_id=caller.tenant)
        return Started(
            conversation_id=conversation_id,
            definition=definition.id,
            opening=opening,
            state=instance.current_state,
            ended=instance.ended,
            definition_version=instance.definition_hash or None,
            alias=alias,
        )

    return await turns.run(start())


@router.get("/conversations", response_model=ConversationList)
async def list_conversations(
    caller: Reader,
    manager: Manager,
    registry: Registry,
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many, newest first.")] = 100,
    cursor: Annotated[
        str | None,
        Query(description="The `next_cursor` of the page before; absent or empty for the first page."),
    ] = None,
) -> ConversationList:
    """The caller's conversations, newest first, a page at a time: pass `next_cursor` back as `cursor` (null: the
    last page). A conversation started while a client pages shows on no later page and shifts none."""
    # empty is the first page: a client sends `cursor=${next ?? ""}` from its first request on
    page = await manager.alist_conversations(user_id=caller.tenant, limit=limit, cursor=cursor or None)
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
            for s in page.items
        ],
        next_cursor=page.next_cursor,
    )


@router.get("/conversations/{conversation_id}", response_model=ConversationDetail)
async def get_conversation(
    conversation_id: str, caller: Reader, manager: Manager, registry: Registry
) -> ConversationDetail:
    """One conversation: state, context (sensitive values masked) and the full history."""
    check_id(conversation_id)
    return await conversation_detail(manager, registry, conversation_id, caller.tenant)


@router.delete("/conversations/{conversation_id}", status_code=204, response_class=Response)
async def delete_conversation(conversation_id: str, request: Request, caller: Writer, manager: Manager) -> Response:
    """Delete a conversation and everything stored of it."""
    check_id(conversation_id)
    if not await manager.adelete_conversation(conversation_id, user_id=caller.tenant):
        raise ConversationNotFoundError(conversation_id)
    request.app.state.events.signals.wake(conversation_id)  # its open event streams end now, not at their poll
    return Response(status_code=204)


@router.post(
    "/conversations/{conversation_id}/messages",
    response_model=TurnResult,
    responses={
        **NOT_FOUND,
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
    conversation_id: str, body: SendMessage, request: Request, caller: Writer, manager: Manager, turns: Turns
) -> TurnResult | Response:
    """Send the user's message; returns the reply, the state, whether the conversation ended, and the verdict.

    Give a `message_id` to make the call safe to retry: the same id is answered once, with the same reply.
    """
    check_id(conversation_id)
    message_id = body.message_id or f"srv-{uuid.uuid4().hex}"
    if "text/event-stream" in request.headers.get("accept", ""):
        return await stream_response(
            manager, turns, conversation_id, body.message, message_id, caller.tenant, body.metadata
        )

    async def turn() -> TurnResult:
        outcome = await manager.aprocess_turn(
            conversation_id, body.message, message_id, user_id=caller.tenant, **with_metadata(body.metadata)
        )
        if outcome.record is None:  # a retried message id: where its turn went is in the stored record
            return await turn_result(manager, conversation_id, message_id, outcome.reply, caller.tenant, duplicate=True)
        return TurnResult(
            conversation_id=conversation_id,
            message_id=message_id,
            reply=outcome.reply,
            state=outcome.state,
            ended=outcome.ended,
            verdict=outcome.record.verdict,
            mode="human" if outcome.mode == "human" else "bot",
        )

    return await turns.run(turn())


@router.get(
    "/conversations/{conversation_id}/turns/{turn}",
    response_model=TurnRecord,
    responses={404: {"model": ErrorOut, "description": "Unknown conversation or turn not kept"}},
)
async def explain_turn(conversation_id: str, turn: int, caller: Reader, manager: Manager) -> TurnRecord:
    """Why the engine decided what it did in one turn: `turn` is its index (1-based), or -1 for the last."""
    check_id(conversation_id)
    return await manager.aexplain(conversation_id, turn, user_id=caller.tenant)


@router.get("/conversations/{conversation_id}/trace", response_model=list[TraceEvent], responses=NOT_FOUND)
async def trace(conversation_id: str, caller: Reader, manager: Manager, registry: Registry) -> list[TraceEvent]:
    """The conversation's audit trail: every turn, update, transition, flow push and pop, refusal."""
    check_id(conversation_id)
    events = await manager.aget_trace(conversation_id, user_id=caller.tenant)
    # the stored fsm_id is a path on the server's disk: clients see the definition's id instead
    return [
        e.model_copy(update={"data": {**e.data, "fsm_id": registry.id_for(str(e.data["fsm_id"]))}})
        if "fsm_id" in e.data
        else e
        for e in events
    ]


@router.get(
    "/conversations/{conversation_id}/provenance",
    response_model=dict[str, ValueOrigin],
    responses=NOT_FOUND,
)
async def provenance(
    conversation_id: str,
    caller: Reader,
    manager: Manager,
    key: Annotated[str | None, Query(max_length=256, description="One key (and the paths under it) only.")] = None,
) -> dict[str, ValueOrigin]:
    """Where each value of the conversation came from, by key path: who wrote it and, for a value read from what was
    said, the message and the words (`quote`: before / inside / after, to highlight `inside`). Sensitive values and
    their words are masked."""
    check_id(conversation_id)
    return await manager.aprovenance(conversation_id, key, user_id=caller.tenant)


__all__ = ["conversation_detail", "router"]
