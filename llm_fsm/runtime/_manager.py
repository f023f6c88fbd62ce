"""FSMManager: runs conversations turn by turn, with any LLM, on any store.

The facade of the conversation runtime. Every method builds an operation (``_operations.py``) and runs it
through the one performer (``_performer.py``), from a thread or from async code (``_base.py``). A turn
either lands whole or not at all: if the model's output cannot be used, a hook fails, or another worker
saved first and retries run out, the stored conversation is exactly what it was.

Turns on one conversation are serialised by a lock per conversation (threads and asyncio share it);
different conversations run concurrently. Across processes the store's version check does the same job:
the losing worker reloads and runs its turn again on the new version, and the calls its lost attempt
made are counted and recorded all the same.

The readers come from ``ReadersAPI`` (``_readers.py``) and the operator API (force_state, push_flow,
pop_flow, set_context, hand_off, post_operator_message, resume_bot, the seed's ``instances`` view) from
``OperatorAPI`` (``_operator.py``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from llm_fsm.definition._model import FlowDeclaration, FSMDefinition
from llm_fsm.engine._instance import Conversation, FSMContext, FSMInstance
from llm_fsm.engine._messages import UserMessage
from llm_fsm.engine._turn import TurnOutcome
from llm_fsm.errors import StateNotFoundError
from llm_fsm.runtime._audit import AuditAPI
from llm_fsm.runtime._base import DEFAULT_MAX_CONCURRENT_TURNS, DEFAULT_MAX_INPUT_CHARS
from llm_fsm.runtime._effects import LoadConversation, SaveConversation, StoreCall
from llm_fsm.runtime._operations import (
    Opening,
    Operation,
    TurnRequest,
    compare_and_set,
    context_update,
    ending,
    starting,
    turn,
)
from llm_fsm.runtime._performer import Ledger, Performer
from llm_fsm.runtime._provenance import ProvenanceAPI

if TYPE_CHECKING:
    from llm_fsm.runtime._stream import StreamEvent

logger = logging.getLogger(__name__)


class FSMManager(AuditAPI, ProvenanceAPI):
    """Starts conversations and processes their messages (the seed's API, plus stores and async)."""

    # --- starting ------------------------------------------------------------------

    def _opening(self, user_id: str | None, room_id: str | None) -> Opening:
        def new_instance(fsm_id: Any, definition: FSMDefinition) -> FSMInstance:
            if definition.initial_state not in definition.states:
                raise StateNotFoundError(
                    f"initial state {definition.initial_state!r} is not declared in FSM {definition.name!r}"
                )
            return FSMInstance(
                fsm_id=fsm_id if isinstance(fsm_id, str) else definition.name,
                current_state=definition.initial_state,
                context=FSMContext(
                    conversation=Conversation(
                        max_history_size=self.max_history_size, max_message_length=self.max_message_length
                    )
                ),
                persona=definition.persona,
                flow_name=definition.name,
                user_id=user_id,
                room_id=room_id,
                definition_hash=definition.content_hash,
            )

        return Opening(
            self.actions, self.prompt_builder, self.config, self._schema_sent(), new_instance, self.definitions.given
        )

    def start_conversation(
        self,
        fsm_id: str | FSMDefinition,
        initial_context: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        version: str | None = None,
        language: str | None = None,
    ) -> tuple[str, str]:
        """Create a conversation and return ``(conversation_id, opening message)``.

        ``fsm_id`` is an id or path for the loader, or an ``FSMDefinition``: this manager then keeps
        it under its name for the conversation's later turns (another process needs a loader that
        finds that name). ``version``: start on that version of the definition (its content hash) rather than the
        loader's current one: one this manager holds or the store keeps, else ``DefinitionVersionNotFoundError``.
        ``language``: the conversation's language, one of the definition's ``languages`` (else
        ``UnknownLanguageError``); without it, the definition's default language.
        """
        return self._run(starting(self._opening(user_id, room_id), fsm_id, initial_context, version, language))

    async def astart_conversation(
        self,
        fsm_id: str | FSMDefinition,
        initial_context: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        version: str | None = None,
        language: str | None = None,
    ) -> tuple[str, str]:
        async with self._turn_slot():  # the opening is a model call and a turn's worth of work
            return await self._arun(
                starting(self._opening(user_id, room_id), fsm_id, initial_context, version, language)
            )

    # --- turns ---------------------------------------------------------------------

    def _turn(self, request: TurnRequest, ledger: Ledger) -> Operation[TurnOutcome]:
        return turn(
            request,
            self.prompt_builder,
            self.config,
            schema_sent=self._schema_sent(),
            retries=self.max_save_retries,
            ledger=ledger,
        )

    def _request(
        self,
        conversation_id: str,
        message: Any,
        message_id: Any,
        user_id: str | None,
        room_id: str | None,
        metadata: Any,
    ) -> TurnRequest:
        user: UserMessage = self._check_message(message, message_id, metadata)
        return TurnRequest(conversation_id, user, message_id, user_id, room_id)

    def process_message(
        self,
        conversation_id: str,
        message: str | list[dict[str, Any]],
        message_id: str | None = None,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Run one turn and return the reply. A repeated ``message_id`` returns the stored reply.

        ``message`` is text, or content parts in litellm's format (text and ``image_url`` parts) for a model that
        reads images; the text parts joined by newlines are the text the engine reasons with. ``metadata`` (a small
        JSON object: channel ids, attachments) is stored with the message and returned by
        ``get_conversation_history``. Anything the engine cannot take raises ``InvalidMessageError`` (or a child)
        before any model call, and nothing is saved.

        While a person has the conversation (``hand_off``, or a state declared ``handoff: true``) the message
        is recorded, no model is called and the reply is ``""``: the person answers (``post_operator_message``).
        """
        return self.process_turn(
            conversation_id, message, message_id, user_id=user_id, room_id=room_id, metadata=metadata
        ).reply

    def process_turn(
        self,
        conversation_id: str,
        message: str | list[dict[str, Any]],
        message_id: str | None = None,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> TurnOutcome:
        """``process_message`` returning the whole outcome: reply, turn record, state reached, ended.

        Saves a server or a channel adapter a second load to learn where the turn went. For a repeated
        ``message_id`` the record is None and the state is the conversation's current one.
        """
        request = self._request(conversation_id, message, message_id, user_id, room_id, metadata)
        ledger = Ledger()
        with self._lock_for(conversation_id), self._turn_span(conversation_id) as finished:
            outcome = self._run(self._turn(request, ledger), ledger=ledger)
            finished(outcome)
            return outcome

    async def aprocess_message(
        self,
        conversation_id: str,
        message: str | list[dict[str, Any]],
        message_id: str | None = None,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Run one turn and return the reply, awaiting the conversation's lock without holding a thread.

        Turns on one conversation run in arrival order; a duplicate ``message_id`` waits for the
        first delivery and returns its stored reply, with no second model call.
        """
        outcome = await self.aprocess_turn(
            conversation_id, message, message_id, user_id=user_id, room_id=room_id, metadata=metadata
        )
        return outcome.reply

    async def aprocess_turn(
        self,
        conversation_id: str,
        message: str | list[dict[str, Any]],
        message_id: str | None = None,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> TurnOutcome:
        """The async twin of ``process_turn``."""
        request = self._request(conversation_id, message, message_id, user_id, room_id, metadata)
        ledger = Ledger()
        async with self._async_turn(conversation_id) as finished:
            outcome = await self._arun(self._turn(request, ledger), ledger=ledger)
            finished(outcome)
            return outcome

    def astream_message(
        self,
        conversation_id: str,
        message: str | list[dict[str, Any]],
        message_id: str | None = None,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Run one turn and stream it: ``state`` once decided, ``token`` events with the reply's text, ``done``.

        No text of a refused move is ever streamed: the engine decides as soon as the decision part of
        the model's reply has arrived, and streams the message only when it keeps it (otherwise the
        regenerated reply is streamed). The turn runs to its end even if the consumer stops reading; a
        failure raises the same typed errors as ``aprocess_message``, and nothing of the turn is saved.
        Interfaces that cannot stream give the same events once the whole reply is there.
        """
        from llm_fsm.runtime._stream import stream_turn

        request = self._request(conversation_id, message, message_id, user_id, room_id, metadata)
        ledger = Ledger()
        operation = self._turn(request, ledger)
        return stream_turn(
            Performer(self, ledger), operation, lambda: self._async_turn(conversation_id), self._background
        )

    # --- the application's writes ------------------------------------------------

    def end_conversation(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> None:
        """Mark the conversation ended; its data stays readable until deleted."""
        self._write(conversation_id, user_id, room_id, ending(self.config))

    async def aend_conversation(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> None:
        await self._awrite(conversation_id, user_id, room_id, ending(self.config))

    def update_context(
        self,
        conversation_id: str,
        updates: Mapping[str, Any],
        *,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> dict[str, Any]:
        """Set context keys as the application (protected keys allowed; ``None`` removes a key).

        Values of declared keys are normalised and checked; an invalid one raises ``ContextValidationError``
        and nothing of the update is kept.
        """
        data: dict[str, Any] = self._write(conversation_id, user_id, room_id, context_update(updates, self.config))
        return data

    async def aupdate_context(
        self,
        conversation_id: str,
        updates: Mapping[str, Any],
        *,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> dict[str, Any]:
        data: dict[str, Any] = await self._awrite(
            conversation_id, user_id, room_id, context_update(updates, self.config)
        )
        return data

    def _write(self, conversation_id: str, user_id: str | None, room_id: str | None, change: Any) -> Any:
        load = LoadConversation(conversation_id, user_id, room_id)
        return self._run(compare_and_set(self.max_save_retries, load, change), lock=conversation_id)

    async def _awrite(self, conversation_id: str, user_id: str | None, room_id: str | None, change: Any) -> Any:
        load = LoadConversation(conversation_id, user_id, room_id)
        return await self._arun(compare_and_set(self.max_save_retries, load, change), lock=conversation_id)

    def delete_conversation(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> bool:
        deleted: bool = self._run(_deleting(conversation_id, user_id, room_id))
        return deleted

    async def adelete_conversation(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> bool:
        deleted: bool = await self._arun(_deleting(conversation_id, user_id, room_id))
        return deleted

    def _resolve_flow(self, declaration: FlowDeclaration, parent: FSMDefinition) -> tuple[str, FSMDefinition]:
        """A sub-flow's definition, found exactly where fsm-lint looks (next to the parent's file first)."""
        reference = self.definitions.flow_reference(declaration, parent)
        return reference, self.definitions.load(reference)


def _deleting(conversation_id: str, user_id: str | None, room_id: str | None) -> Operation[bool]:
    deleted: bool = yield StoreCall("delete", (conversation_id,), {"user_id": user_id, "room_id": room_id})
    return deleted


__all__ = [
    "DEFAULT_MAX_CONCURRENT_TURNS",
    "DEFAULT_MAX_INPUT_CHARS",
    "FSMManager",
    "LoadConversation",
    "SaveConversation",
]
