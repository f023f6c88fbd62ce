"""``/v1/webhooks``: what the outbox owes the caller's tenant, its dead letters, and sending them again.

Operator routes (the write right, like the operator changes): a dead letter holds the event's whole body. Every
call is scoped to the caller's tenant: another tenant's dead letter is, to a caller, an unknown id.

(No ``from __future__ import annotations`` here: FastAPI reads the route signatures' types at run time.)
"""

import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field

from llm_fsm._threads import run_blocking
from llm_fsm.server._deps import Writer
from llm_fsm.server._errors import ApiError
from llm_fsm.server._models import ERRORS, ErrorOut, Responses
from llm_fsm.server._outbox import Delivery
from llm_fsm.server._webhooks import WebhookDispatcher

NOT_CONFIGURED: Responses = {
    404: {"model": ErrorOut, "description": "The server sends no webhooks (`webhooks_not_configured`)"}
}

MAX_ID = 2**63 - 1
"""The largest dead-letter id the outbox (SQLite's integers) can hold: a larger one is an input error, not a fault."""

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], responses={**ERRORS, **NOT_CONFIGURED})


class WebhookStatus(BaseModel):
    pending: int = Field(description="Deliveries of the tenant's events waiting for their first or next attempt.")
    dead: int = Field(description="Dead letters: deliveries that failed every attempt.")


class DeadLetter(BaseModel):
    id: int = Field(description="The dead letter's id, to send it again.")
    event_id: str = Field(description="The event's idempotency id (`id` in its body).")
    url: str
    conversation_id: str
    attempts: int
    last_error: str | None = Field(description="What the last attempt got: `HTTP 500`, `ConnectError: ...`.")
    created_at: float
    failed_at: float | None
    event: dict[str, Any] = Field(description="The body every attempt sent.")


class DeadLetters(BaseModel):
    dead_letters: list[DeadLetter]
    next_after: int | None = Field(description="Pass as `after` for the next page; null on the last.")


class Redelivered(BaseModel):
    redelivered: int = Field(description="Dead letters made due now, each with a fresh count of attempts.")


def _dispatcher(request: Request) -> WebhookDispatcher:
    dispatcher: WebhookDispatcher | None = request.app.state.webhooks
    if dispatcher is None:
        raise ApiError(404, "webhooks_not_configured", "this server sends no webhooks (create_app(webhooks=...))")
    return dispatcher


def _dead_letter(delivery: Delivery) -> DeadLetter:
    return DeadLetter(
        id=delivery.seq,
        event_id=delivery.event_id,
        url=delivery.url,
        conversation_id=delivery.conversation_id,
        attempts=delivery.attempts,
        last_error=delivery.last_error,
        created_at=delivery.created_at,
        failed_at=delivery.failed_at,
        event=json.loads(delivery.body),
    )


@router.get("", response_model=WebhookStatus)
async def webhook_status(request: Request, caller: Writer) -> WebhookStatus:
    """How many deliveries of the caller's tenant's events are pending and dead."""
    counts = await run_blocking(_dispatcher(request).outbox.counts, caller.tenant)
    return WebhookStatus(pending=counts["pending"], dead=counts["dead"])


@router.get("/dead-letters", response_model=DeadLetters)
async def dead_letters(
    request: Request,
    caller: Writer,
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many, oldest first.")] = 100,
    after: Annotated[int, Query(ge=0, le=MAX_ID, description="The `next_after` of the page before.")] = 0,
) -> DeadLetters:
    """The caller's tenant's dead letters, oldest first, with the body each attempt sent and the last error."""
    found = await run_blocking(_dispatcher(request).outbox.dead_letters, caller.tenant, limit, after)
    return DeadLetters(
        dead_letters=[_dead_letter(d) for d in found], next_after=found[-1].seq if len(found) == limit else None
    )


@router.post("/dead-letters/redeliver", response_model=Redelivered)
async def redeliver_all(request: Request, caller: Writer) -> Redelivered:
    """Send every dead letter of the caller's tenant again (same bodies and ids, a fresh count of attempts)."""
    dispatcher = _dispatcher(request)
    count = await run_blocking(dispatcher.outbox.redeliver, caller.tenant)
    dispatcher.nudge()
    return Redelivered(redelivered=count)


@router.post(
    "/dead-letters/{dead_letter_id}/redeliver",
    response_model=Redelivered,
    responses={404: {"model": ErrorOut, "description": "No such dead letter (`dead_letter_not_found`)"}},
)
async def redeliver_one(
    dead_letter_id: Annotated[int, Path(ge=1, le=MAX_ID)], request: Request, caller: Writer
) -> Redelivered:
    """Send one dead letter again."""
    dispatcher = _dispatcher(request)
    count = await run_blocking(dispatcher.outbox.redeliver, caller.tenant, dead_letter_id)
    if not count:
        raise ApiError(404, "dead_letter_not_found", f"the tenant has no dead letter {dead_letter_id}")
    dispatcher.nudge()
    return Redelivered(redelivered=count)


__all__ = ["router"]
