"""The one protocol every conversation store implements.

A store keeps ``FSMInstance`` records between turns. Saving is compare-and-set
on ``instance.version``: a worker that loaded version 3 can only save if the
stored record is still at version 3, so two workers can never both apply a turn
to the same version. The engine retries the losing turn on the new version.

Records belong to a (user, room) pair when the application gives one; a load
with another pair finds nothing, exactly as if the id did not exist.

The stores of this package also implement ``TurnLogStore``: they keep the *hot
record* (what the next turn reads) apart from the *turn log* (turn records and
the replies of processed message ids, which only ``explain``, inspection and a
retried message read). A turn loads and rewrites the hot record and appends to
the log, so its cost no longer grows with the explain data kept.

They also implement ``DefinitionVersionStore``: the canonical text of every definition version a
conversation runs on, kept once by its content hash, so a conversation can be loaded (and its turns
re-decided) with its own version after the file has changed.
"""

from __future__ import annotations

import asyncio
import builtins
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from llm_fsm._threads import run_blocking
from llm_fsm.engine._data import DEFAULT_MAX_TURN_RECORDS
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._turn import DEFAULT_MAX_PROCESSED_MESSAGE_IDS

if TYPE_CHECKING:
    from llm_fsm.stores._paging import ConversationPage


@dataclass(frozen=True)
class Retention:
    """How much of its turn log a ``TurnLogStore`` keeps per conversation (``EngineConfig``'s limits).

    Passed on every save by ``FSMManager``, so the limits of the engine's configuration hold
    whichever store object it was given; a store that keeps the whole instance in one record
    ignores it (the engine trims the lists in the instance itself).
    """

    turn_records: int = DEFAULT_MAX_TURN_RECORDS
    """Turn records (explain data) kept, the newest."""
    message_ids: int = DEFAULT_MAX_PROCESSED_MESSAGE_IDS
    """Processed message ids kept with their replies, the newest, so a retried delivery is answered once."""

    def __post_init__(self) -> None:
        if self.turn_records < 1 or self.message_ids < 1:
            raise ValueError(f"retention limits must be at least 1, got {self}")


@dataclass(frozen=True)
class ConversationSummary:
    """What ``list`` returns: enough to pick a conversation without loading it."""

    conversation_id: str
    fsm_id: str
    user_id: str | None
    room_id: str | None
    current_state: str
    status: str
    version: int
    updated_at: float


@runtime_checkable
class ConversationStore(Protocol):
    """Sync protocol. ``AsyncStoreMixin`` derives the async twins by running these in a thread."""

    def load(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> FSMInstance:
        """The stored conversation; ConversationNotFoundError when absent, expired or another user's."""

    def save(self, instance: FSMInstance, *, expected_version: int | None, retention: Retention | None = None) -> int:
        """Write the record if the stored version equals ``expected_version`` (None: must not exist yet).

        Returns the new version and sets ``instance.version`` to it.
        Raises ConcurrentUpdateError on a version mismatch, StoreUnavailableError
        when the backend cannot be reached (nothing written), RecordTooLargeError
        over the size cap. ``retention``: the turn log's limits (see ``Retention``;
        None: the defaults); a store without a turn log ignores it.
        """

    def delete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        """Remove the conversation; False when there was nothing to remove."""

    def list(self, *, user_id: str | None = None, room_id: str | None = None) -> list[ConversationSummary]:
        """Conversations of this user and room (all, when both are None), newest first."""

    def expire(self, *, older_than: float) -> int:
        """Remove conversations not updated for ``older_than`` seconds; returns how many."""

    def transcript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        """The full transcript: archived messages (oldest first) followed by the live ones."""

    def close(self) -> None:
        """Release connections and files."""


@runtime_checkable
class AsyncConversationStore(Protocol):
    """Async protocol: the same operations as ``ConversationStore``, awaited (``aload`` for ``load``, ...)."""

    async def aload(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMInstance: ...

    async def asave(
        self, instance: FSMInstance, *, expected_version: int | None, retention: Retention | None = None
    ) -> int: ...

    async def adelete(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> bool: ...

    async def alist(self, *, user_id: str | None = None, room_id: str | None = None) -> list[ConversationSummary]: ...

    async def atranscript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> list[dict[str, Any]]: ...

    async def aexpire(self, *, older_than: float) -> int: ...


@runtime_checkable
class TurnLogStore(Protocol):
    """A store that keeps the hot record apart from the turn log, and can load the hot record alone.

    What a save does: the instance, less ``turns`` and ``processed_messages``, becomes the hot record;
    turn records with an index above the last one logged are appended to the log, and message ids not
    logged yet are logged with their reply; both logs are trimmed to the save's ``Retention``; all of it
    atomically with the compare-and-set. ``load`` gives the whole instance back (log included), as every
    store does; ``load_for_turn`` what a turn needs.
    """

    def load_for_turn(
        self,
        conversation_id: str,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
    ) -> FSMInstance:
        """The hot record: ``turns`` empty, ``processed_messages`` holding ``message_id`` → its reply when that id
        was processed (and nothing else).

        A record stored by an earlier version of this library, with its turns and message ids inside, comes
        back with them, so the next save moves them to the log.
        """

    async def aload_for_turn(
        self,
        conversation_id: str,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
    ) -> FSMInstance:
        """``load_for_turn``, awaited."""


@runtime_checkable
class PagedStore(Protocol):
    """A store that lists a page at a time (every store of this package; the manager pages over ``list`` otherwise).

    Pages are newest first by ``(updated_at, conversation_id)``; ``cursor`` is the ``next_cursor`` of the
    page before (opaque, see ``llm_fsm.stores._paging``; InvalidCursorError when no listing gave it);
    ``limit`` None lists everything after the cursor. Scope: ``all_rooms=True`` is ``user_id``'s
    conversations in every room; otherwise the exact (user, room) pair, or everyone's when both are None,
    as ``list``. The SQL stores and Redis serve a page from an index, never a scan.
    """

    def list_page(
        self,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        all_rooms: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ConversationPage: ...

    async def alist_page(
        self,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        all_rooms: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ConversationPage: ...


@runtime_checkable
class DefinitionVersionStore(Protocol):
    """A store that keeps definition versions, content-addressed: one copy per version, whatever the number of
    conversations on it.

    ``version`` is ``FSMDefinition.content_hash`` (8 to 64 lowercase hex digits, else ValueError) and names its
    ``document``, the definition's canonical JSON text: the caller guarantees it, so a version already stored is
    never rewritten. Versions outlive the conversations on them (``delete`` and ``expire`` keep them: another
    conversation may run on the same version). StoreUnavailableError when the backend cannot be reached.
    """

    def save_definition_version(self, version: str, document: str) -> None:
        """Keep ``document`` as ``version``; a no-op when the version is stored already. RecordTooLargeError over
        the store's record cap (nothing written)."""

    def load_definition_version(self, version: str) -> str:
        """The document stored as ``version``; DefinitionVersionNotFoundError when the store has none."""

    def definition_versions(self) -> list[str]:
        """Every stored version, sorted."""

    async def asave_definition_version(self, version: str, document: str) -> None:
        """``save_definition_version``, awaited."""

    async def aload_definition_version(self, version: str) -> str:
        """``load_definition_version``, awaited."""

    async def adefinition_versions(self) -> list[str]:
        """``definition_versions``, awaited."""


@dataclass(frozen=True)
class DueTimer:
    """A timer a worker has claimed: which conversation, which armed timer, and the claim that lets it release it."""

    conversation_id: str
    timer_id: str
    """``ArmedTimer.id``."""
    due_at: float
    token: str
    """This claim's id: ``release_timer`` removes the entry only while it still holds this claim."""
    user_id: str | None = None
    room_id: str | None = None
    """The conversation's owner: every store loads a conversation only for the (user, room) it was saved for, so
    the worker that fires the timer loads it as that owner."""


@runtime_checkable
class TimerStore(Protocol):
    """A store that indexes the conversations' armed timers by due time, so workers find due ones without a scan.

    The index mirrors ``FSMInstance.timers``: every ``save`` makes the conversation's entries exactly the
    instance's armed timers (an entry kept with the same id and due time keeps its claim), atomically with the
    compare-and-set; ``delete`` and ``expire`` remove a conversation's entries. A claim is a lease: an entry claimed
    by a worker that died is claimable again once the lease has run out. Exactly-once firing does not rest on the
    claim but on the conversation's compare-and-set (the save that records a firing drops the timer), so two
    workers that claimed the same timer can never both record it. StoreUnavailableError when the backend cannot
    be reached.
    """

    def claim_due_timers(self, *, now: float, limit: int, lease: float) -> list[DueTimer]:
        """Claim up to ``limit`` entries due at ``now`` (``due_at <= now``) that no unexpired claim holds, earliest
        first; each claim holds until ``now + lease``. Concurrent callers never get the same unexpired claim."""

    def release_timer(self, timer: DueTimer) -> None:
        """Drop the entry ``timer`` claimed, if it still holds that claim (fired, stale, or its conversation gone)."""

    def timer_count(self) -> int:
        """Entries in the index, claimed or not (operations and benchmarks)."""

    async def aclaim_due_timers(self, *, now: float, limit: int, lease: float) -> list[DueTimer]:
        """``claim_due_timers``, awaited."""

    async def arelease_timer(self, timer: DueTimer) -> None:
        """``release_timer``, awaited."""

    async def atimer_count(self) -> int:
        """``timer_count``, awaited."""


class AsyncStoreMixin:
    """Async twins of the sync methods, run on the library's I/O pool so the event loop never blocks on I/O.

    A store whose operations do no I/O (the memory store) overrides them to run inline instead.
    """

    async def aload(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMInstance:
        return await run_blocking(self.load, conversation_id, user_id=user_id, room_id=room_id)  # type: ignore[attr-defined]

    async def aload_for_turn(
        self,
        conversation_id: str,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
    ) -> FSMInstance:
        return await run_blocking(
            self.load_for_turn,  # type: ignore[attr-defined]
            conversation_id,
            user_id=user_id,
            room_id=room_id,
            message_id=message_id,
        )

    async def asave(
        self, instance: FSMInstance, *, expected_version: int | None, retention: Retention | None = None
    ) -> int:
        if retention is None:  # a store written to the older protocol has no ``retention`` to pass it to
            return await run_blocking(self.save, instance, expected_version=expected_version)  # type: ignore[attr-defined]
        return await run_blocking(self.save, instance, expected_version=expected_version, retention=retention)  # type: ignore[attr-defined]

    async def adelete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        return await run_blocking(self.delete, conversation_id, user_id=user_id, room_id=room_id)  # type: ignore[attr-defined]

    async def alist(self, *, user_id: str | None = None, room_id: str | None = None) -> list[ConversationSummary]:
        return await run_blocking(self.list, user_id=user_id, room_id=room_id)  # type: ignore[attr-defined]

    async def alist_page(
        self,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        all_rooms: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ConversationPage:
        page: ConversationPage = await run_blocking(
            self.list_page,  # type: ignore[attr-defined]
            user_id=user_id,
            room_id=room_id,
            all_rooms=all_rooms,
            limit=limit,
            cursor=cursor,
        )
        return page

    async def atranscript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> list[dict[str, Any]]:
        return await run_blocking(self.transcript, conversation_id, user_id=user_id, room_id=room_id)  # type: ignore[attr-defined]

    async def aexpire(self, *, older_than: float) -> int:
        return await run_blocking(self.expire, older_than=older_than)  # type: ignore[attr-defined]

    async def asave_definition_version(self, version: str, document: str) -> None:
        await run_blocking(self.save_definition_version, version, document)  # type: ignore[attr-defined]

    async def aload_definition_version(self, version: str) -> str:
        document: str = await run_blocking(self.load_definition_version, version)  # type: ignore[attr-defined]
        return document

    async def adefinition_versions(self) -> list[str]:
        found: list[str] = await run_blocking(self.definition_versions)  # type: ignore[attr-defined]
        return found

    async def aclaim_due_timers(self, *, now: float, limit: int, lease: float) -> list[DueTimer]:
        claimed: list[DueTimer] = await run_blocking(self.claim_due_timers, now=now, limit=limit, lease=lease)  # type: ignore[attr-defined]
        return claimed

    async def arelease_timer(self, timer: DueTimer) -> None:
        await run_blocking(self.release_timer, timer)  # type: ignore[attr-defined]

    async def atimer_count(self) -> int:
        count: int = await run_blocking(self.timer_count)  # type: ignore[attr-defined]
        return count


def close_in_loop(loop: asyncio.AbstractEventLoop, closing: Any) -> None:
    """Run the coroutine ``closing`` (an asyncio client's close) in ``loop``, however that loop stands now.

    Shared by the stores that keep one asyncio client per event loop (Redis, PostgreSQL).
    """
    if loop.is_closed():
        closing.close()  # the loop took its sockets with it
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop is running:
        loop.create_task(closing)
    elif loop.is_running():
        asyncio.run_coroutine_threadsafe(closing, loop)
    else:
        loop.run_until_complete(closing)


__all__ = [
    "close_in_loop",
    "AsyncConversationStore",
    "AsyncStoreMixin",
    "ConversationStore",
    "ConversationSummary",
    "DefinitionVersionStore",
    "DueTimer",
    "PagedStore",
    "Retention",
    "TimerStore",
    "TurnLogStore",
]
