"""``GET /v1/conversations/{id}/events``: the conversation's events as server-sent events (``_events``).

(No ``from __future__ import annotations`` here: FastAPI reads the route signatures' types at run time.)
"""

from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi.responses import StreamingResponse

from llm_fsm.server._deps import Manager, Reader, check_id
from llm_fsm.server._events import Cursor, EventSource, event_stream, read_events
from llm_fsm.server._models import ERRORS, NOT_FOUND

router = APIRouter(prefix="/v1", tags=["conversations"], responses=ERRORS)


@router.get(
    "/conversations/{conversation_id}/events",
    response_class=StreamingResponse,
    responses={
        **NOT_FOUND,
        200: {
            "description": "Server-sent events, each with an `id` to resume from (`Last-Event-ID`): `message` (every "
            "message of the transcript, whoever wrote it), `state`, `handoff` or `ended` (the conversation as last "
            "saved, when it changed), `deleted` (the last). See docs/server.md, Events.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
    },
)
async def conversation_events(
    conversation_id: str,
    request: Request,
    caller: Reader,
    manager: Manager,
    last_event_id: Annotated[str | None, Header(max_length=64, description="Resume after this event.")] = None,
) -> StreamingResponse:
    """The conversation's events, from the beginning or after `Last-Event-ID`, as they are saved: messages of
    every role, state changes, handoffs and the end, made by this server, another channel, an operator or a timer.
    The stream stays open until the client closes it or the conversation is deleted."""
    check_id(conversation_id)
    source: EventSource = request.app.state.events
    first = await read_events(manager, conversation_id, caller.tenant, Cursor.parse(last_event_id))  # 404 here
    return StreamingResponse(
        event_stream(source, manager, conversation_id, caller.tenant, first),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


__all__ = ["router"]
