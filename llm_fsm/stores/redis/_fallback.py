"""``FallbackStore``: the seed's degradation to process memory while Redis is unreachable, opt-in."""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import ConversationNotFoundError, DefinitionVersionNotFoundError, StoreUnavailableError
from llm_fsm.stores._paging import ConversationPage, encode_cursor, sort_key
from llm_fsm.stores.base import AsyncStoreMixin, ConversationSummary, DueTimer, Retention
from llm_fsm.stores.memory import MemoryStore
from llm_fsm.stores.redis._store import RedisStore, _redact

logger = logging.getLogger("llm_fsm.stores.redis")  # the name it had as one module: logging configs name it

_T = TypeVar("_T")


class FallbackStore(AsyncStoreMixin):
    """Redis first; process memory while Redis is unreachable (opt-in, ``fallback_to_memory=True``).

    The seed's graceful fallback, made explicit: a conversation started while
    Redis is down lives in this process's memory for the rest of its life (other
    workers cannot see it), and a turn whose save finds Redis gone is kept in
    memory instead of being lost. A conversation that lives in Redis cannot be
    loaded while Redis is down: that raises StoreUnavailableError rather than
    pretending the conversation does not exist. Every switch to memory is logged
    as a warning. The async twins follow the same rules on Redis's asyncio path
    (the memory store needs no I/O). Definition versions follow the conversations: one saved while Redis
    is down is kept in memory, and a version is looked up in memory first. Timers too: a conversation held in memory has
    its timers indexed there, and a claim takes them before Redis's.
    """

    def __init__(self, primary: RedisStore, fallback: MemoryStore | None = None) -> None:
        self.primary = primary
        self.fallback = fallback or MemoryStore(
            max_record_bytes=primary._limits.max_record_bytes, max_context_bytes=primary._limits.max_context_bytes
        )
        self._degraded = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FallbackStore({self.primary!r})"

    @property
    def degraded(self) -> bool:
        """Whether the last call to Redis failed."""
        return self._degraded

    def load(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> FSMInstance:
        if self.fallback.contains(conversation_id):
            return self.fallback.load(conversation_id, user_id=user_id, room_id=room_id)
        return self._redis(lambda: self.primary.load(conversation_id, user_id=user_id, room_id=room_id))

    def load_for_turn(
        self,
        conversation_id: str,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
    ) -> FSMInstance:
        if self.fallback.contains(conversation_id):
            return self.fallback.load_for_turn(conversation_id, user_id=user_id, room_id=room_id, message_id=message_id)
        return self._redis(
            lambda: self.primary.load_for_turn(conversation_id, user_id=user_id, room_id=room_id, message_id=message_id)
        )

    def save(self, instance: FSMInstance, *, expected_version: int | None, retention: Retention | None = None) -> int:
        if self.fallback.contains(instance.conversation_id):
            return self.fallback.save(instance, expected_version=expected_version, retention=retention)
        try:
            return self._redis(
                lambda: self.primary.save(instance, expected_version=expected_version, retention=retention)
            )
        except StoreUnavailableError:
            self._warn(f"saving conversation {instance.conversation_id} in process memory")
            if expected_version is None:
                return self.fallback.save(instance, expected_version=None, retention=retention)
            return self._adopt(instance, expected_version, retention)

    def delete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        if self.fallback.contains(conversation_id):
            return self.fallback.delete(conversation_id, user_id=user_id, room_id=room_id)
        return self._redis(lambda: self.primary.delete(conversation_id, user_id=user_id, room_id=room_id))

    def list(self, *, user_id: str | None = None, room_id: str | None = None) -> list[ConversationSummary]:
        local = self.fallback.list(user_id=user_id, room_id=room_id)
        try:
            remote = self._redis(lambda: self.primary.list(user_id=user_id, room_id=room_id))
        except StoreUnavailableError:
            self._warn("listing only conversations held in process memory")
            remote = []
        return sorted(local + remote, key=lambda s: s.updated_at, reverse=True)

    def list_page(
        self,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        all_rooms: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ConversationPage:
        """A page of both halves merged: each gives its page after the cursor, the newest of the two are kept."""
        scope: dict[str, Any] = {"user_id": user_id, "room_id": room_id, "all_rooms": all_rooms}
        local = self.fallback.list_page(**scope, limit=limit, cursor=cursor)
        try:
            remote = self._redis(lambda: self.primary.list_page(**scope, limit=limit, cursor=cursor))
        except StoreUnavailableError:
            self._warn("listing only conversations held in process memory")
            remote = ConversationPage()
        return _merged(local, remote, limit)

    def expire(self, *, older_than: float) -> int:
        removed = self.fallback.expire(older_than=older_than)
        try:
            removed += self._redis(lambda: self.primary.expire(older_than=older_than))
        except StoreUnavailableError:
            self._warn("expiring only conversations held in process memory")
        return removed

    def transcript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        if self.fallback.contains(conversation_id):
            return self.fallback.transcript(conversation_id, user_id=user_id, room_id=room_id)
        return self._redis(lambda: self.primary.transcript(conversation_id, user_id=user_id, room_id=room_id))

    def close(self) -> None:
        self.primary.close()
        self.fallback.close()

    async def aload(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMInstance:
        if self.fallback.contains(conversation_id):
            return self.fallback.load(conversation_id, user_id=user_id, room_id=room_id)
        return await self._aredis(lambda: self.primary.aload(conversation_id, user_id=user_id, room_id=room_id))

    async def aload_for_turn(
        self,
        conversation_id: str,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
    ) -> FSMInstance:
        if self.fallback.contains(conversation_id):
            return self.fallback.load_for_turn(conversation_id, user_id=user_id, room_id=room_id, message_id=message_id)
        return await self._aredis(
            lambda: self.primary.aload_for_turn(
                conversation_id, user_id=user_id, room_id=room_id, message_id=message_id
            )
        )

    async def asave(
        self, instance: FSMInstance, *, expected_version: int | None, retention: Retention | None = None
    ) -> int:
        if self.fallback.contains(instance.conversation_id):
            return self.fallback.save(instance, expected_version=expected_version, retention=retention)
        try:
            return await self._aredis(
                lambda: self.primary.asave(instance, expected_version=expected_version, retention=retention)
            )
        except StoreUnavailableError:
            self._warn(f"saving conversation {instance.conversation_id} in process memory")
            if expected_version is None:
                return self.fallback.save(instance, expected_version=None, retention=retention)
            return self._adopt(instance, expected_version, retention)

    async def adelete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        if self.fallback.contains(conversation_id):
            return self.fallback.delete(conversation_id, user_id=user_id, room_id=room_id)
        return await self._aredis(lambda: self.primary.adelete(conversation_id, user_id=user_id, room_id=room_id))

    async def alist(
        self, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[ConversationSummary]:
        local = self.fallback.list(user_id=user_id, room_id=room_id)
        try:
            remote: builtins.list[ConversationSummary] = await self._aredis(
                lambda: self.primary.alist(user_id=user_id, room_id=room_id)
            )
        except StoreUnavailableError:
            self._warn("listing only conversations held in process memory")
            remote = []
        return sorted(local + remote, key=lambda s: s.updated_at, reverse=True)

    async def alist_page(
        self,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        all_rooms: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ConversationPage:
        scope: dict[str, Any] = {"user_id": user_id, "room_id": room_id, "all_rooms": all_rooms}
        local = self.fallback.list_page(**scope, limit=limit, cursor=cursor)
        try:
            remote: ConversationPage = await self._aredis(
                lambda: self.primary.alist_page(**scope, limit=limit, cursor=cursor)
            )
        except StoreUnavailableError:
            self._warn("listing only conversations held in process memory")
            remote = ConversationPage()
        return _merged(local, remote, limit)

    async def aexpire(self, *, older_than: float) -> int:
        removed = self.fallback.expire(older_than=older_than)
        try:
            removed += await self._aredis(lambda: self.primary.aexpire(older_than=older_than))
        except StoreUnavailableError:
            self._warn("expiring only conversations held in process memory")
        return removed

    async def atranscript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        if self.fallback.contains(conversation_id):
            return self.fallback.transcript(conversation_id, user_id=user_id, room_id=room_id)
        return await self._aredis(lambda: self.primary.atranscript(conversation_id, user_id=user_id, room_id=room_id))

    def save_definition_version(self, version: str, document: str) -> None:
        try:
            self._redis(lambda: self.primary.save_definition_version(version, document))
        except StoreUnavailableError:
            self._warn(f"keeping definition version {version} in process memory")
            self.fallback.save_definition_version(version, document)

    def load_definition_version(self, version: str) -> str:
        held = self._held_version(version)
        if held is not None:
            return held
        return self._redis(lambda: self.primary.load_definition_version(version))

    def definition_versions(self) -> builtins.list[str]:
        try:
            remote = self._redis(self.primary.definition_versions)
        except StoreUnavailableError:
            self._warn("listing only definition versions held in process memory")
            remote = []
        return sorted({*self.fallback.definition_versions(), *remote})

    async def asave_definition_version(self, version: str, document: str) -> None:
        try:
            await self._aredis(lambda: self.primary.asave_definition_version(version, document))
        except StoreUnavailableError:
            self._warn(f"keeping definition version {version} in process memory")
            self.fallback.save_definition_version(version, document)

    async def aload_definition_version(self, version: str) -> str:
        held = self._held_version(version)
        if held is not None:
            return held
        return await self._aredis(lambda: self.primary.aload_definition_version(version))

    async def adefinition_versions(self) -> builtins.list[str]:
        try:
            remote: builtins.list[str] = await self._aredis(self.primary.adefinition_versions)
        except StoreUnavailableError:
            self._warn("listing only definition versions held in process memory")
            remote = []
        return sorted({*self.fallback.definition_versions(), *remote})

    def claim_due_timers(self, *, now: float, limit: int, lease: float) -> builtins.list[DueTimer]:
        """The due timers of conversations held in memory first, then Redis's up to ``limit`` (earliest first within
        each; while Redis is down, memory's alone)."""
        held = self.fallback.claim_due_timers(now=now, limit=limit, lease=lease)
        try:
            remote = self._redis(lambda: self.primary.claim_due_timers(now=now, limit=limit - len(held), lease=lease))
        except StoreUnavailableError:
            self._warn("claiming only timers of conversations held in process memory")
            remote = []
        return held + remote

    def release_timer(self, timer: DueTimer) -> None:
        self.fallback.release_timer(timer)  # a no-op unless memory gave that claim
        if not self.fallback.contains(timer.conversation_id):
            self._redis(lambda: self.primary.release_timer(timer))

    def timer_count(self) -> int:
        try:
            remote = self._redis(self.primary.timer_count)
        except StoreUnavailableError:
            self._warn("counting only timers of conversations held in process memory")
            remote = 0
        return self.fallback.timer_count() + remote

    async def aclaim_due_timers(self, *, now: float, limit: int, lease: float) -> builtins.list[DueTimer]:
        held = self.fallback.claim_due_timers(now=now, limit=limit, lease=lease)
        try:
            remote: builtins.list[DueTimer] = await self._aredis(
                lambda: self.primary.aclaim_due_timers(now=now, limit=limit - len(held), lease=lease)
            )
        except StoreUnavailableError:
            self._warn("claiming only timers of conversations held in process memory")
            remote = []
        return held + remote

    async def arelease_timer(self, timer: DueTimer) -> None:
        self.fallback.release_timer(timer)
        if not self.fallback.contains(timer.conversation_id):
            await self._aredis(lambda: self.primary.arelease_timer(timer))

    async def atimer_count(self) -> int:
        try:
            remote: int = await self._aredis(self.primary.atimer_count)
        except StoreUnavailableError:
            self._warn("counting only timers of conversations held in process memory")
            remote = 0
        return self.fallback.timer_count() + remote

    def _held_version(self, version: str) -> str | None:
        """The version's text when this process kept it in memory (saved while Redis was down)."""
        try:
            return self.fallback.load_definition_version(version)
        except DefinitionVersionNotFoundError:
            return None

    def _adopt(self, instance: FSMInstance, expected_version: int, retention: Retention | None = None) -> int:
        """Keep a turn of a Redis conversation in memory at the version it would have had.

        Only the turn's own records come along: the turn log stays in Redis, out of reach.
        """
        return self.fallback.adopt(instance, expected_version=expected_version, retention=retention)

    def _redis(self, call: Callable[[], _T]) -> _T:
        with self._tracking():
            return call()

    async def _aredis(self, call: Callable[[], Awaitable[_T]]) -> _T:
        with self._tracking():
            return await call()

    @contextmanager
    def _tracking(self) -> Iterator[None]:
        """Around one call to Redis by either twin: whether it answered becomes ``degraded``."""
        try:
            yield
        except StoreUnavailableError:
            with self._lock:
                self._degraded = True
            raise
        except ConversationNotFoundError:
            self._recovered()
            raise
        self._recovered()

    def _recovered(self) -> None:
        with self._lock:
            if self._degraded:
                logger.warning("redis at %s is reachable again", _redact(self.primary.url))
            self._degraded = False

    def _warn(self, what: str) -> None:
        logger.warning("redis at %s is unavailable; %s (fallback_to_memory)", _redact(self.primary.url), what)


def _merged(local: ConversationPage, remote: ConversationPage, limit: int | None) -> ConversationPage:
    """Two pages after the same cursor as one: the newest ``limit``, and a next page when either half has more."""
    ordered = sorted([*local, *remote], key=sort_key, reverse=True)
    more = local.next_cursor is not None or remote.next_cursor is not None
    if limit is None or (len(ordered) <= limit and not more):
        return ConversationPage(ordered)
    page = ordered[:limit]
    return ConversationPage(page, encode_cursor(page[-1]))
