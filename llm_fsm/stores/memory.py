"""Process-memory store: the default of ``FSMManager``, tests, notebooks, and the fallback when Redis is down.

Records are kept as objects and handed out as copies (``FSMInstance.copy_for_turn``):
a loaded instance never aliases the stored one, and no turn pays for a JSON
round trip of the whole conversation. Caps are the same as elsewhere, but the
record cap (which needs the record serialised to measure it) is off unless asked for.

Like the durable stores it keeps the hot record apart from the turn log (turn
records, processed message ids with their replies), trimmed to the save's
``Retention``, so a conversation keeps the same explain data on every store.
Definition versions are kept in a dict of their own, which ``delete`` and ``expire`` leave alone. Armed timers are
mirrored into an index of their own on every save (``TimerStore``), which a claim scans: process memory holds few
enough conversations that a scan beats keeping a heap in step.
"""

from __future__ import annotations

import builtins
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from llm_fsm.engine._data import copy_json
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._records import TurnRecord
from llm_fsm.errors import ConcurrentUpdateError
from llm_fsm.stores._paging import ConversationPage, ScanPaging
from llm_fsm.stores._versions import checked_document, checked_version, version_not_found
from llm_fsm.stores.base import AsyncStoreMixin, ConversationSummary, DueTimer, Retention
from llm_fsm.stores.codec import (
    SizeLimits,
    check_limits,
    for_turn,
    new_version,
    not_found,
    owned_by,
    summary_of,
    with_log,
)


@dataclass
class _Entry:
    record: FSMInstance
    """The hot record: ``turns`` and ``processed_messages`` empty."""
    summary: ConversationSummary
    archive: list[dict[str, Any]] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    replies: dict[str, str] = field(default_factory=dict)


@dataclass
class _Timer:
    """An index entry: the timer's due time and, while a worker holds it, its claim."""

    due_at: float
    token: str | None = None
    claimed_until: float = 0.0


class MemoryStore(ScanPaging, AsyncStoreMixin):
    """A dict behind a lock; same compare-and-set and isolation rules as every other store."""

    def __init__(self, *, max_record_bytes: int | None = None, max_context_bytes: int | None = None) -> None:
        self._limits = SizeLimits(max_record_bytes=max_record_bytes, max_context_bytes=max_context_bytes)
        self._entries: dict[str, _Entry] = {}
        self._definitions: dict[str, str] = {}
        self._timers: dict[str, dict[str, _Timer]] = {}
        """Conversation id → its armed timers by id (a save touches only its own conversation's)."""
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "MemoryStore()"

    def load(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> FSMInstance:
        with self._lock:
            entry = self._entry(conversation_id, user_id, room_id)
            return with_log(entry.record.copy_for_turn(), entry.turns, entry.replies.items())

    def load_for_turn(
        self,
        conversation_id: str,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
    ) -> FSMInstance:
        with self._lock:
            entry = self._entry(conversation_id, user_id, room_id)
            reply = entry.replies.get(message_id) if message_id is not None else None
            return for_turn(entry.record.copy_for_turn(), message_id, reply)

    def save(self, instance: FSMInstance, *, expected_version: int | None, retention: Retention | None = None) -> int:
        return self._put(instance, expected_version, adopt=False, retention=retention)

    def adopt(self, instance: FSMInstance, *, expected_version: int, retention: Retention | None = None) -> int:
        """Take over a conversation this store has never seen, as if it were stored at ``expected_version``.

        For the Redis fallback: a turn whose save finds Redis gone continues in
        memory at the version it would have had, instead of being lost.
        """
        return self._put(instance, expected_version, adopt=True, retention=retention)

    def _put(
        self, instance: FSMInstance, expected_version: int | None, *, adopt: bool, retention: Retention | None
    ) -> int:
        keep = retention or Retention()
        check_limits(instance, self._limits)
        version = new_version(expected_version)
        cid = instance.conversation_id
        with self._lock:
            current = self._entries.get(cid)
            if expected_version is None and current is not None:
                raise ConcurrentUpdateError(f"conversation {cid!r} already exists")
            if expected_version is not None and not (adopt and current is None):
                if current is None or not _same_owner(current.summary, instance):
                    raise ConcurrentUpdateError(
                        f"conversation {cid!r} expected at version {expected_version} but absent"
                    )
                if current.summary.version != expected_version:
                    raise ConcurrentUpdateError(
                        f"conversation {cid!r} is at version {current.summary.version}, not {expected_version}"
                    )
            # The new entry is built aside and swapped in last: a failure on the way leaves the stored one whole.
            archive = current.archive if current is not None else []
            turns = current.turns if current is not None else []
            last = turns[-1].index if turns else None
            fresh = sorted((t for t in instance.turns if last is None or t.index > last), key=lambda t: t.index)
            if fresh:
                turns = (turns + fresh)[-keep.turn_records :]
            replies = current.replies if current is not None else {}
            new_ids = [(m, reply) for m, reply in instance.processed_messages.items() if m not in replies]
            if new_ids:  # an id keeps its first reply; the oldest ids go first
                replies = dict([*replies.items(), *new_ids][-keep.message_ids :])
            stored = instance.copy_for_turn()
            stored.version = version
            stored.archive_outbox = []
            stored.turns = []
            stored.processed_messages = {}
            entry = _Entry(stored, summary_of(stored), archive, turns, replies)
            archive.extend(
                copy_json(m) for m in instance.archive_outbox
            )  # appends only: what a load copies stays valid
            self._entries[cid] = entry
            self._index_timers(cid, {timer.id: timer.due_at for timer in stored.timers})
        instance.version = version
        instance.archive_outbox = []
        return version

    def delete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        with self._lock:
            entry = self._entries.get(conversation_id)
            if entry is None or not _owner_is(entry.summary, user_id, room_id):
                return False
            del self._entries[conversation_id]
            self._index_timers(conversation_id, {})
            return True

    def list(self, *, user_id: str | None = None, room_id: str | None = None) -> list[ConversationSummary]:
        everyone = user_id is None and room_id is None
        with self._lock:
            found = [e.summary for e in self._entries.values() if everyone or _owner_is(e.summary, user_id, room_id)]
        return sorted(found, key=lambda s: s.updated_at, reverse=True)

    def expire(self, *, older_than: float) -> int:
        cutoff = time.time() - older_than
        with self._lock:
            old = [cid for cid, e in self._entries.items() if e.summary.updated_at < cutoff]
            for cid in old:
                del self._entries[cid]
                self._index_timers(cid, {})
        return len(old)

    def transcript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        with self._lock:
            entry = self._entry(conversation_id, user_id, room_id)
            # copies all the way down: an entry's metadata and parts are the caller's to change
            archived = [copy_json(m) for m in entry.archive]
            live = [copy_json(m) for m in entry.record.context.conversation.exchanges]
        return archived + live

    def save_definition_version(self, version: str, document: str) -> None:
        checked_document(version, document, self._limits)
        with self._lock:
            self._definitions.setdefault(version, document)

    def load_definition_version(self, version: str) -> str:
        with self._lock:
            document = self._definitions.get(checked_version(version))
        if document is None:
            raise version_not_found(version)
        return document

    def definition_versions(self) -> builtins.list[str]:
        with self._lock:
            return sorted(self._definitions)

    def claim_due_timers(self, *, now: float, limit: int, lease: float) -> builtins.list[DueTimer]:
        with self._lock:
            due = sorted(
                (entry.due_at, cid, timer_id)
                for cid, timers in self._timers.items()
                for timer_id, entry in timers.items()
                if entry.due_at <= now and (entry.token is None or entry.claimed_until <= now)
            )[: max(limit, 0)]
            claimed = []
            for due_at, cid, timer_id in due:
                entry = self._timers[cid][timer_id]
                entry.token, entry.claimed_until = uuid.uuid4().hex, now + lease
                held = self._entries.get(
                    cid
                )  # the owner the worker loads it as (absent: it finds the conversation gone)
                owner = (held.summary.user_id, held.summary.room_id) if held is not None else (None, None)
                claimed.append(DueTimer(cid, timer_id, due_at, entry.token, *owner))
        return claimed

    def release_timer(self, timer: DueTimer) -> None:
        with self._lock:
            timers = self._timers.get(timer.conversation_id, {})
            entry = timers.get(timer.timer_id)
            if entry is not None and entry.token == timer.token:
                del timers[timer.timer_id]
                if not timers:
                    del self._timers[timer.conversation_id]

    def timer_count(self) -> int:
        with self._lock:
            return sum(len(timers) for timers in self._timers.values())

    def _index_timers(self, conversation_id: str, armed: dict[str, float]) -> None:
        """Make the conversation's index entries exactly ``armed`` (id → due time); one kept as it was keeps its
        claim. Called with the lock held."""
        old = self._timers.pop(conversation_id, {})
        kept = {
            timer_id: old[timer_id] if timer_id in old and old[timer_id].due_at == due_at else _Timer(due_at)
            for timer_id, due_at in armed.items()
        }
        if kept:
            self._timers[conversation_id] = kept

    # No I/O happens here (a dict behind a lock held for microseconds), so the async twins run inline:
    # a thread hop would cost more than the operation and stall the loop's pool under load.

    async def aload(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMInstance:
        return self.load(conversation_id, user_id=user_id, room_id=room_id)

    async def aload_for_turn(
        self,
        conversation_id: str,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
    ) -> FSMInstance:
        return self.load_for_turn(conversation_id, user_id=user_id, room_id=room_id, message_id=message_id)

    async def asave(
        self, instance: FSMInstance, *, expected_version: int | None, retention: Retention | None = None
    ) -> int:
        return self.save(instance, expected_version=expected_version, retention=retention)

    async def adelete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        return self.delete(conversation_id, user_id=user_id, room_id=room_id)

    async def alist(
        self, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[ConversationSummary]:
        return self.list(user_id=user_id, room_id=room_id)

    async def alist_page(
        self,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        all_rooms: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ConversationPage:
        return self.list_page(user_id=user_id, room_id=room_id, all_rooms=all_rooms, limit=limit, cursor=cursor)

    async def atranscript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        return self.transcript(conversation_id, user_id=user_id, room_id=room_id)

    async def aexpire(self, *, older_than: float) -> int:
        return self.expire(older_than=older_than)

    async def asave_definition_version(self, version: str, document: str) -> None:
        self.save_definition_version(version, document)

    async def aload_definition_version(self, version: str) -> str:
        return self.load_definition_version(version)

    async def adefinition_versions(self) -> builtins.list[str]:
        return self.definition_versions()

    async def aclaim_due_timers(self, *, now: float, limit: int, lease: float) -> builtins.list[DueTimer]:
        return self.claim_due_timers(now=now, limit=limit, lease=lease)

    async def arelease_timer(self, timer: DueTimer) -> None:
        self.release_timer(timer)

    async def atimer_count(self) -> int:
        return self.timer_count()

    def close(self) -> None:
        """Nothing to release; the records live as long as the object."""

    def contains(self, conversation_id: str) -> bool:
        """Whether this process holds the conversation at all (used by the Redis fallback to route calls)."""
        with self._lock:
            return conversation_id in self._entries

    def _entry(self, conversation_id: str, user_id: str | None, room_id: str | None) -> _Entry:
        entry = self._entries.get(conversation_id)
        if entry is None or not _owner_is(entry.summary, user_id, room_id):
            raise not_found(conversation_id)
        return entry


def _owner_is(summary: ConversationSummary, user_id: str | None, room_id: str | None) -> bool:
    return summary.user_id == user_id and summary.room_id == room_id


def _same_owner(summary: ConversationSummary, instance: FSMInstance) -> bool:
    return owned_by(instance, summary.user_id, summary.room_id)


__all__ = ["MemoryStore"]
