"""The operator endpoints (docs/operations.md), generated from one table: ``OPERATIONS``.

Every operator change has the same shape over HTTP: ``POST /v1/conversations/{id}/<path>`` with a
body, the write right, the change run like a turn (once started it lands whole even if the client
goes), and the conversation after it as the answer. Only four things differ per change, and they
are a row of the table: the path, the request model, the manager method and how the body maps
to its arguments. A new operator change is a new row; it cannot forget a check the others make.

(No ``from __future__ import annotations`` here: FastAPI reads the generated signatures at run time.)
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypedDict, TypeVar

from fastapi import APIRouter

from llm_fsm.server._conversations import conversation_detail
from llm_fsm.server._deps import Manager, Registry, Turns, Writer, check_id
from llm_fsm.server._models import (
    ERRORS,
    NOT_FOUND,
    ConversationDetail,
    ErrorOut,
    ForceState,
    HandOff,
    OperatorMessage,
    PopFlow,
    PushFlow,
    Responses,
    ResumeBot,
    SetContext,
)
from llm_fsm.server._protocol import ManagerProtocol


class By(TypedDict):
    """Who makes a change, as every operator method takes it: the actor recorded, the tenant it is scoped to."""

    actor: str
    user_id: str


class Acting(Protocol):
    """What every operator request model has: the person acting through the key, if named."""

    @property
    def actor(self) -> str | None: ...


Body = TypeVar("Body", bound=Acting)


@dataclass(frozen=True)
class Operation(Generic[Body]):
    """One operator endpoint: a row of ``OPERATIONS``."""

    path: str
    """Under ``/v1/conversations/{conversation_id}/``."""
    name: str
    """The route's name, which makes its OpenAPI operation id and summary."""
    body: type[Body]
    """The request model: FastAPI validates the body with it and documents it."""
    call: Callable[[ManagerProtocol, str, Body, By], Awaitable[object]]
    """The manager method and how the body maps to its arguments (after the conversation id; ``By`` last)."""
    description: str


def _row(
    path: str,
    name: str,
    body: type[Body],
    call: Callable[[ManagerProtocol, str, Body, By], Awaitable[object]],
    description: str,
) -> Operation[Any]:
    """A row of the table, its call type-checked against its own model (in a tuple of ``Operation[Any]``, a bare
    ``Operation(...)`` would take ``Any`` for the body and check nothing)."""
    return Operation(path, name, body, call, description)


OPERATIONS: tuple[Operation[Any], ...] = (
    _row(
        "state",
        "force_state",
        ForceState,
        lambda manager, cid, body, by: manager.aforce_state(cid, body.state, body.reason or "", **by),
        "Put the conversation in any declared state (`force_state`): transitions are not consulted.",
    ),
    _row(
        "flows",
        "push_flow",
        PushFlow,
        lambda manager, cid, body, by: manager.apush_flow(cid, body.flow, body.inputs, reason=body.reason, **by),
        "Start a sub-flow declared for the current state (`push_flow`), with `inputs` of its keys.",
    ),
    _row(
        "flows/pop",
        "pop_flow",
        PopFlow,
        lambda manager, cid, body, by: manager.apop_flow(cid, body.outputs, reason=body.reason, **by),
        "Finish the active sub-flow (`pop_flow`): its declared outputs go to the parent.",
    ),
    _row(
        "context",
        "set_context",
        SetContext,
        lambda manager, cid, body, by: manager.aset_context(cid, body.updates, reason=body.reason, **by),
        "Write context keys as the application (`set_context`); declared keys are checked (422).",
    ),
    _row(
        "handoff",
        "hand_off",
        HandOff,
        lambda manager, cid, body, by: manager.ahand_off(cid, body.reason, **by),
        "Give the conversation to a person (`hand_off`): messages are recorded, no model is called.",
    ),
    _row(
        "operator-messages",
        "operator_message",
        OperatorMessage,
        lambda manager, cid, body, by: manager.apost_operator_message(cid, body.text, message_id=body.message_id, **by),
        "Record the person's reply (`post_operator_message`); only while the conversation is handed off.",
    ),
    _row(
        "resume",
        "resume_bot",
        ResumeBot,
        lambda manager, cid, body, by: manager.aresume_bot(cid, state=body.state, reason=body.reason, **by),
        "Hand the conversation back to the bot (`resume_bot`), where it was or in `state`.",
    ),
)

OPERATOR_ERRORS: Responses = {
    **NOT_FOUND,
    409: {"model": ErrorOut, "description": "Ended, a handoff conflict, or a flow refused"},
}


def _endpoint(operation: Operation[Any]) -> Callable[..., Awaitable[ConversationDetail]]:
    """The route function of one row; FastAPI reads its ``body`` parameter's type, so that is the row's model."""

    async def endpoint(
        conversation_id: str, body: Acting, caller: Writer, manager: Manager, registry: Registry, turns: Turns
    ) -> ConversationDetail:
        check_id(conversation_id)
        by = By(actor=caller.actor(body.actor), user_id=caller.tenant)
        await turns.run(operation.call(manager, conversation_id, body, by))
        return await conversation_detail(manager, registry, conversation_id, caller.tenant)

    endpoint.__annotations__["body"] = operation.body
    return endpoint


router = APIRouter(prefix="/v1", tags=["operators"], responses=ERRORS)
for _operation in OPERATIONS:
    router.add_api_route(
        f"/conversations/{{conversation_id}}/{_operation.path}",
        _endpoint(_operation),
        methods=["POST"],
        name=_operation.name,
        description=_operation.description,
        response_model=ConversationDetail,
        responses=OPERATOR_ERRORS,
    )


__all__ = ["OPERATIONS", "OPERATOR_ERRORS", "Acting", "By", "Operation", "router"]
