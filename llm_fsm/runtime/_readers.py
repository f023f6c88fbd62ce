"""The manager's readers: what a conversation is, says, knows and cost, each with its async twin.

Each reader is one operation (a load, or one of the store's reads) run by ``_run`` or ``_arun``; only
``get_instance`` and ``explain`` read the turn log, the others need the hot record alone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._messages import entry_view
from llm_fsm.engine._records import TraceEvent, TurnRecord, Usage
from llm_fsm.engine._tape import retrieval_result_of
from llm_fsm.engine._transitions import validate_transition as _validate_transition
from llm_fsm.engine._turn import LoadDefinition
from llm_fsm.errors import TurnNotFoundError, UsageError
from llm_fsm.runtime._base import RuntimeBase
from llm_fsm.runtime._effects import LoadActiveDefinition, LoadConversation, StoreCall
from llm_fsm.runtime._operations import Operation, read
from llm_fsm.stores import ConversationPage, ConversationSummary
from llm_fsm.stores._paging import check_limit, decode_cursor, page_of

logger = logging.getLogger(__name__)


class ReadersAPI(RuntimeBase):
    """The readers ``FSMManager`` inherits (see the module docstring)."""

    def get_instance(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMInstance:
        """The stored conversation, turn records and message ids included (a copy: changing it changes nothing)."""
        return self._run(read(LoadConversation(conversation_id, user_id, room_id, whole=True)))

    async def aget_instance(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMInstance:
        return await self._arun(read(LoadConversation(conversation_id, user_id, room_id, whole=True)))

    def is_conversation_ended(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> bool:
        return self._run(read(LoadConversation(conversation_id, user_id, room_id))).ended

    async def ais_conversation_ended(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> bool:
        return (await self._arun(read(LoadConversation(conversation_id, user_id, room_id)))).ended

    def get_conversation_data(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> dict[str, Any]:
        """The context data collected so far (a copy)."""
        return self._run(read(LoadConversation(conversation_id, user_id, room_id))).context.data

    async def aget_conversation_data(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> dict[str, Any]:
        return (await self._arun(read(LoadConversation(conversation_id, user_id, room_id)))).context.data

    def get_current_state(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> str:
        return self._run(read(LoadConversation(conversation_id, user_id, room_id))).current_state

    async def aget_current_state(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> str:
        return (await self._arun(read(LoadConversation(conversation_id, user_id, room_id)))).current_state

    def get_conversation_history(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The full transcript, oldest first, messages the store archived included.

        One dict per message, with the same keys for every message: ``role`` (``user``, ``assistant`` or
        ``operator``), ``text``, ``id`` (the ``message_id`` a user message came with, a generated ``m<number>``
        otherwise), ``at`` (epoch seconds), ``metadata`` (``{}`` when none was given) and ``parts`` (the content
        parts as stored, None for plain text). ``id`` and ``at`` are None for messages stored before they existed.
        """
        return self._run(_history(conversation_id, user_id, room_id))

    async def aget_conversation_history(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> list[dict[str, Any]]:
        return await self._arun(_history(conversation_id, user_id, room_id))

    def explain(
        self, conversation_id: str, turn: int = -1, *, user_id: str | None = None, room_id: str | None = None
    ) -> TurnRecord:
        """The record of one turn: ``turn=-1`` is the last, a positive number is the turn's index (1-based)."""
        return _turn_record(self.get_instance(conversation_id, user_id=user_id, room_id=room_id), turn)

    async def aexplain(
        self, conversation_id: str, turn: int = -1, *, user_id: str | None = None, room_id: str | None = None
    ) -> TurnRecord:
        return _turn_record(await self.aget_instance(conversation_id, user_id=user_id, room_id=room_id), turn)

    def get_usage(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> Usage:
        """Model calls, tokens and cost of the conversation so far (each turn's calls are in its explain record)."""
        return self._run(read(LoadConversation(conversation_id, user_id, room_id))).usage

    async def aget_usage(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> Usage:
        return (await self._arun(read(LoadConversation(conversation_id, user_id, room_id)))).usage

    def get_trace(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> list[TraceEvent]:
        return self._run(read(LoadConversation(conversation_id, user_id, room_id))).trace

    async def aget_trace(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> list[TraceEvent]:
        return (await self._arun(read(LoadConversation(conversation_id, user_id, room_id)))).trace

    def get_definition(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMDefinition:
        """The definition the conversation runs on (``on_definition_change`` applies, as for a turn)."""
        return self._run(_active_definition(LoadConversation(conversation_id, user_id, room_id)))

    async def aget_definition(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMDefinition:
        return await self._arun(_active_definition(LoadConversation(conversation_id, user_id, room_id)))

    def validate_transition(
        self,
        conversation: str | FSMInstance,
        target_state: str,
        conversation_id: str | None = None,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> tuple[bool, str | None]:
        """Could the conversation move to ``target_state`` now? ``(True, None)`` or ``(False, why)``.

        ``conversation`` is a conversation id, like every other method's first argument (an
        ``FSMInstance`` is accepted too, as earlier versions took).
        """
        return self._run(_validating(conversation, target_state, user_id, room_id))

    async def avalidate_transition(
        self, conversation_id: str, target_state: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> tuple[bool, str | None]:
        return await self._arun(_validating(conversation_id, target_state, user_id, room_id))

    def list_conversations(
        self,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        all_users: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ConversationPage:
        """Conversations newest first: one user's (in every room, or in ``room_id``), or everyone's.

        Listing every user's conversations is an operator's act, so it must be asked for with
        ``all_users=True``; without a user it is refused rather than silently done.

        Pages: with ``limit``, at most that many, and ``next_cursor`` (None on the last page) to pass back as
        ``cursor`` for the next; without it, everything (after ``cursor``). The result is a list of summaries
        (``.items`` too), so code written before pages keeps working. A cursor no listing gave raises
        InvalidCursorError. Pages are stable: a conversation started or saved while a client pages is newer
        than the cursor, so it neither appears on a later page nor shifts one.
        """
        return self._run(_listing(_Listing(user_id, room_id, all_users, limit, cursor), self._pages()))

    async def alist_conversations(
        self,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        all_users: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ConversationPage:
        return await self._arun(_listing(_Listing(user_id, room_id, all_users, limit, cursor), self._pages()))

    def _pages(self) -> bool:
        """Whether the store pages itself (``PagedStore``); a store written to the older protocol only lists."""
        return callable(getattr(self.store, "list_page", None))


# --- the operations behind them -------------------------------------------------------------------------------


def _history(conversation_id: str, user_id: str | None, room_id: str | None) -> Operation[list[dict[str, Any]]]:
    entries = yield StoreCall("transcript", (conversation_id,), {"user_id": user_id, "room_id": room_id})
    return [entry_view(entry) for entry in entries]


def _active_definition(load: LoadConversation) -> Operation[FSMDefinition]:
    instance = yield load
    definition: FSMDefinition = yield LoadActiveDefinition(instance)
    return definition


def _validating(
    conversation: str | FSMInstance, target_state: str, user_id: str | None, room_id: str | None
) -> Operation[tuple[bool, str | None]]:
    instance = conversation
    if not isinstance(instance, FSMInstance):
        instance = yield LoadConversation(instance, user_id, room_id)
    definition: FSMDefinition = yield LoadDefinition(instance.fsm_id)
    valid, why = _validate_transition(definition, instance.current_state, target_state, instance.context.data)
    if not valid:
        logger.info(
            "transition %s → %s refused in %s: %s",
            instance.current_state,
            target_state,
            instance.conversation_id,
            why,
        )
    return valid, why


@dataclass(frozen=True)
class _Listing:
    user_id: str | None
    room_id: str | None
    all_users: bool
    limit: int | None
    cursor: str | None


def _listing(asked: _Listing, pages: bool) -> Operation[ConversationPage]:
    check_limit(asked.limit)
    if asked.cursor is not None:
        decode_cursor(asked.cursor)  # refused before the store is asked
    scope = _listing_scope(asked.user_id, asked.room_id, asked.all_users)
    if pages:
        page: ConversationPage = yield StoreCall(
            "list_page", (), {**scope, "limit": asked.limit, "cursor": asked.cursor}
        )
        return page
    listed = {} if scope.get("all_rooms") else scope  # ``list`` knows no user in every room: all, then filtered
    summaries: list[ConversationSummary] = yield StoreCall("list", (), listed)
    if scope.get("all_rooms"):
        summaries = [s for s in summaries if s.user_id == asked.user_id]  # every room of this user
    return page_of(summaries, asked.limit, asked.cursor)


def _listing_scope(user_id: str | None, room_id: str | None, all_users: bool) -> dict[str, Any]:
    """What to ask the store for: an exact (user, room) pair, a user in every room, or everything (both None)."""
    if all_users:
        if user_id is not None or room_id is not None:
            raise UsageError("all_users=True lists every conversation; do not also give user_id or room_id")
        return {}
    if user_id is None:
        raise UsageError(
            "list_conversations() needs user_id (that user's conversations) or all_users=True (everyone's, "
            "an operator's listing); room_id alone does not say whose"
        )
    if room_id is not None:
        return {"user_id": user_id, "room_id": room_id}
    return {"user_id": user_id, "all_rooms": True}


def _turn_record(instance: FSMInstance, turn: int) -> TurnRecord:
    """The record of ``turn`` (1-based, or negative from the end), or why there is none: a turn the conversation
    never had and a turn whose record the trail bound dropped are different answers ("is not kept" for a turn 9
    of a one-turn conversation sent people looking for a retention setting)."""
    records = instance.turns
    cid = instance.conversation_id
    count = max(instance.turn_count, records[-1].index if records else 0)
    if turn == 0:  # people count from 0 as often as from 1: say which
        raise TurnNotFoundError(f"conversation {cid} has no turn 0: turns count from 1 (-1 is the last)")
    if abs(turn) > count:
        had = "no turns yet" if count == 0 else f"only {count} turn{'s' if count != 1 else ''}"
        raise TurnNotFoundError(f"conversation {cid} has {had}: there is no turn {turn}")
    wanted = turn if turn > 0 else count + turn + 1
    for record in records:
        if record.index == wanted:
            # what re-deciding it needs (sensitive values included) is the audit's, not a reader's
            return record.model_copy(update={"inputs": None, **_with_snippet_texts(record)})
    named = f"turn {turn}" if turn > 0 else f"turn {turn} (turn {wanted})"
    kept = f"only turns {records[0].index} to {records[-1].index} are" if records else "no turn record is"
    raise TurnNotFoundError(
        f"{named} of conversation {cid} is not kept: {kept} (a conversation keeps the records of its last turns "
        "only, EngineConfig.max_turn_records)"
    )


def _with_snippet_texts(record: TurnRecord) -> dict[str, Any]:
    """``retrieval`` with each snippet's text as the prompt held it, read from the turn's tape (the retriever's
    whole answer, cut here to the characters the record says the prompt held); {} when there is nothing to add."""
    retrieval = record.retrieval
    if retrieval is None or not retrieval.snippets or record.inputs is None:
        return {}
    texts: dict[str, str] = {}
    for entry in record.inputs.tape:
        answer = retrieval_result_of(entry.get("answer")) if entry.get("effect") == "retrieval" else None
        texts.update({snippet.id: snippet.text for snippet in answer.snippets} if answer is not None else {})
    snippets = [
        s.model_copy(update={"text": texts[s.id][: s.chars]}) if s.id in texts else s for s in retrieval.snippets
    ]
    return {"retrieval": retrieval.model_copy(update={"snippets": snippets})}


__all__ = ["ReadersAPI"]
