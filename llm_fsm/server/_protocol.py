"""What the server needs of a manager: the async methods its endpoints call, and nothing else.

The routers are typed against this protocol rather than ``FSMManager`` so that the server depends
on the manager's public async surface only (the runtime behind it may move and change freely), and a
test or an application can serve any object that has these methods. ``FSMManager`` satisfies it
structurally; the check at the bottom makes mypy prove it on every run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from llm_fsm.definition import FSMDefinition
from llm_fsm.engine import FSMInstance, TraceEvent, TurnOutcome, TurnRecord
from llm_fsm.runtime._provenance import ValueOrigin
from llm_fsm.stores import ConversationPage

Message = str | list[dict[str, Any]]
"""A user message: text, or content parts in OpenAI's format."""


class TurnEvent(Protocol):
    """One event of a streamed turn as the manager yields it: ``state``, ``token`` or ``done``, and its data.

    A protocol (read-only), not the manager's own class: the server reads these two fields only.
    """

    @property
    def event(self) -> str: ...

    @property
    def data(self) -> Mapping[str, Any]: ...


class ManagerProtocol(Protocol):
    """The async methods of ``FSMManager`` the HTTP API calls; ``user_id`` is always the caller's tenant."""

    # --- conversations ----------------------------------------------------------------------

    async def astart_conversation(
        self,
        fsm_id: str | FSMDefinition,
        initial_context: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
        version: str | None = None,
        language: str | None = None,
    ) -> tuple[str, str]: ...

    async def aprocess_turn(
        self,
        conversation_id: str,
        message: Message,
        message_id: str | None = None,
        *,
        user_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> TurnOutcome: ...

    def astream_message(
        self,
        conversation_id: str,
        message: Message,
        message_id: str | None = None,
        *,
        user_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[TurnEvent]: ...

    async def adelete_conversation(self, conversation_id: str, *, user_id: str | None = None) -> bool: ...

    # --- readers ----------------------------------------------------------------------------

    async def aget_instance(self, conversation_id: str, *, user_id: str | None = None) -> FSMInstance: ...

    async def aget_definition(self, conversation_id: str, *, user_id: str | None = None) -> FSMDefinition: ...

    async def aget_conversation_history(
        self, conversation_id: str, *, user_id: str | None = None
    ) -> list[dict[str, Any]]: ...

    async def alist_conversations(
        self, *, user_id: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> ConversationPage: ...

    async def aexplain(self, conversation_id: str, turn: int = -1, *, user_id: str | None = None) -> TurnRecord: ...

    async def aget_trace(self, conversation_id: str, *, user_id: str | None = None) -> list[TraceEvent]: ...

    async def aprovenance(
        self, conversation_id: str, key: str | None = None, *, user_id: str | None = None
    ) -> dict[str, ValueOrigin]: ...

    # --- operators (docs/operations.md) -----------------------------------------------------

    async def aforce_state(
        self, conversation_id: str, state: str, reason: str, *, actor: str, user_id: str | None = None
    ) -> None: ...

    async def apush_flow(
        self,
        conversation_id: str,
        flow: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        actor: str,
        reason: str | None = None,
        user_id: str | None = None,
    ) -> None: ...

    async def apop_flow(
        self,
        conversation_id: str,
        outputs: Mapping[str, Any] | None = None,
        *,
        actor: str,
        reason: str | None = None,
        user_id: str | None = None,
    ) -> None: ...

    async def aset_context(
        self,
        conversation_id: str,
        updates: Mapping[str, Any],
        *,
        actor: str,
        reason: str | None = None,
        user_id: str | None = None,
    ) -> object: ...

    async def ahand_off(self, conversation_id: str, reason: str, *, actor: str, user_id: str | None = None) -> None: ...

    async def apost_operator_message(
        self, conversation_id: str, text: str, *, actor: str, message_id: str | None = None, user_id: str | None = None
    ) -> None: ...

    async def aresume_bot(
        self,
        conversation_id: str,
        *,
        actor: str,
        state: str | None = None,
        reason: str | None = None,
        user_id: str | None = None,
    ) -> None: ...


if TYPE_CHECKING:  # mypy proves here that the library's manager is one the server can serve
    from llm_fsm.manager import FSMManager

    def _fsm_manager_satisfies_the_protocol(manager: FSMManager) -> ManagerProtocol:
        served: ManagerProtocol = manager
        return served


__all__ = ["ManagerProtocol", "Message", "TurnEvent"]
