"""The runtime's vocabulary: the effects its operations yield, and the waits its performer hands a driver.

Two levels, one direction. The engine's turn and the runtime's operations (start, turn, application
write, operator change, read) are generators of *effects*: what they need done, as data (load this
conversation, call the model with this request, run this action). The performer turns each effect into
the work around it — accounting, budgets, checks, telemetry, error translation — and the *waits* that
remain: the one blocking call, model read or notification that only a driver can make, because only the
driver knows whether the caller waits by blocking a thread, by awaiting, or by streaming.

This is h11's split (a pure state machine, thin drivers) one level up: every guarantee lives where the
effects are handled, and a driver has nothing to skip.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._records import LLMRequest
from llm_fsm.engine._turn import Decided

# --- effects of the runtime's own operations (the engine's are in llm_fsm.engine._effects) -----------------


@dataclass(frozen=True)
class LoadConversation:
    """Load what a turn or a change needs of a conversation (the hot record, on a ``TurnLogStore``)."""

    conversation_id: str
    user_id: str | None
    room_id: str | None
    message_id: str | None = None
    """The turn's message id: a store with a turn log looks up its reply, should it have been answered already."""
    whole: bool = False
    """The whole instance, turn records and processed message ids included (readers that show them)."""


@dataclass(frozen=True)
class SaveConversation:
    """Save with compare-and-set (``expected_version`` None: create)."""

    instance: FSMInstance
    expected_version: int | None
    message_id: str | None = None
    """The turn's message id, for the error that tells the caller how to resend safely should the save fail."""


@dataclass(frozen=True)
class LoadActiveDefinition:
    """The definition a loaded conversation runs on, after the ``on_definition_change`` policy.

    An effect of its own, not ``LoadDefinition`` plus a check each operation remembers to make: a turn, an
    application write and an operator change all ask this way, so none can act on a changed definition the
    policy refuses.
    """

    instance: FSMInstance


@dataclass(frozen=True)
class StoreCall:
    """One of the store's plain reads or deletes (``transcript``, ``list``, ``delete``), with its keywords."""

    operation: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


# --- waits: what only a driver can do ------------------------------------------------------------------------


@dataclass(frozen=True)
class Blocking:
    """A call that waits on I/O: ``call`` from a thread; ``acall`` (a native coroutine) from async code, or,
    when there is none, ``call`` on the library's I/O pool (never on the event loop)."""

    call: Callable[[], Any]
    acall: Callable[[], Awaitable[Any]] | None = None


@dataclass(frozen=True)
class ReadModel(Blocking):
    """A model call. Sync and async drivers make it like any blocking call; a streaming driver reads the
    model's stream instead (``request.purpose`` says whether it is the turn's call or a regenerated reply)."""

    request: LLMRequest | None = None
    stream: Callable[[], AsyncIterator[Any]] | None = None
    """The interface's ``astream(request)``, for an interface that streams."""


@dataclass(frozen=True)
class Tell:
    """The turn has decided: a streaming driver tells its client (``state`` event); the others go on."""

    decided: Decided


@dataclass(frozen=True)
class Retract:
    """The attempt's save lost the compare-and-set: what a streaming driver showed of it is withdrawn (``retract``
    event) before the turn runs again on the new version. The other drivers showed nothing, and go on."""


@dataclass(frozen=True)
class ReadRest:
    """The rest of a streamed reply whose decision came first: only a streaming driver ever has one pending."""


Wait = Blocking | Tell | Retract | ReadRest

__all__ = [
    "Blocking",
    "LoadActiveDefinition",
    "LoadConversation",
    "ReadModel",
    "ReadRest",
    "Retract",
    "SaveConversation",
    "StoreCall",
    "Tell",
    "Wait",
]
