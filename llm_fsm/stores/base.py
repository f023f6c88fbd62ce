"""The one protocol every conversation store implements.

A store keeps ``FSMInstance`` records between turns. Saving is compare-and-set
on ``instance.version``: a worker that loaded version 3 can only save if the
stored record is still at version 3, so two workers can never both apply a turn
to the same version. The engine retries the losing turn on the new version.

Records belong to a (user, room) pair when the application gives one; a load
with another pair finds nothing, exactly as if the id did not exist.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from llm_fsm._threads import run_blocking
from llm_fsm.engine._instance import FSMInstance


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

    def save(self, instance: FSMInstance, *, expected_version: int | None) -> int:
        """Write the record if the stored version equals ``expected_version`` (None: must not exist yet).

        Returns the new version and sets ``instance.version`` to it.
        Raises ConcurrentUpdateError on a version mismatch, StoreUnavailableError
        when the backend cannot be reached (nothing written), RecordTooLargeError
        over the size cap.
        """

    def delete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        """Remove the conversation; False when there was nothing to remove."""

    def list(self, *, user_id: str | None = None, room_id: str | None = None) -> list[ConversationSummary]:
        """Conversations of this user and room (all, when both are None), newest first."""

    def expire(self, *, older_than: float) -> int:
        """Remove conversations not updated for ``older_than`` seconds; returns how many."""

    def transcript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, str]]:
        """The full transcript: archived messages (oldest first) followed by the live ones."""

    def close(self) -> None:
        """Release connections and files."""


@runtime_checkable
class AsyncConversationStore(Protocol):
    """Async protocol: the same operations as ``ConversationStore``, awaited (``aload`` for ``load``, ...)."""

    async def aload(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMInstance: ...

    async def asave(self, instance: FSMInstance, *, expected_version: int | None) -> int: ...

    async def adelete(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> bool: ...

    async def alist(self, *, user_id: str | None = None, room_id: str | None = None) -> list[ConversationSummary]: ...

    async def atranscript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> list[dict[str, str]]: ...

    async def aexpire(self, *, older_than: float) -> int: ...


class AsyncStoreMixin:
    """Async twins of the sync methods, run on the library's I/O pool so the event loop never blocks on I/O.

    A store whose operations do no I/O (the memory store) overrides them to run inline instead.
    """

    async def aload(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMInstance:
        return await run_blocking(self.load, conversation_id, user_id=user_id, room_id=room_id)  # type: ignore[attr-defined]

    async def asave(self, instance: FSMInstance, *, expected_version: int | None) -> int:
        return await run_blocking(self.save, instance, expected_version=expected_version)  # type: ignore[attr-defined]

    async def adelete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        return await run_blocking(self.delete, conversation_id, user_id=user_id, room_id=room_id)  # type: ignore[attr-defined]

    async def alist(self, *, user_id: str | None = None, room_id: str | None = None) -> list[ConversationSummary]:
        return await run_blocking(self.list, user_id=user_id, room_id=room_id)  # type: ignore[attr-defined]

    async def atranscript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> list[dict[str, str]]:
        return await run_blocking(self.transcript, conversation_id, user_id=user_id, room_id=room_id)  # type: ignore[attr-defined]

    async def aexpire(self, *, older_than: float) -> int:
        return await run_blocking(self.expire, older_than=older_than)  # type: ignore[attr-defined]


__all__ = ["AsyncConversationStore", "AsyncStoreMixin", "ConversationStore", "ConversationSummary"]
