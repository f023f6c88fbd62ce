"""A conversation's events, derived from what the store holds: ``GET /v1/conversations/{id}/events`` (server-sent).

Events are read, not recorded: every message of the transcript (user, assistant, operator, a timer's nudge) is an
event at its position in the whole transcript (archived messages counted), and the conversation's state as last
saved (state, status, mode, flow) is one more whenever it differs from what the reader saw last. So any worker,
after any restart, derives the same events with the same ids from the same store, whoever made the change (this
server, another channel through ``FSMManager``, an operator, a timer), and nothing has to be written per event.

An event id is the reader's cursor, ``<messages seen>-<digest of the state seen>``: a client that reconnects with
``Last-Event-ID`` gets the messages after it and, if the state moved on meanwhile, the state as it is now (states
passed through while nobody was reading are not replayed one by one: the messages are, every one).

The stream wakes at once on this process's saves (``SaveSignals``, a listener on the manager's
``save_listeners``) and reads the store every ``poll_seconds`` otherwise, which is how saves of other workers and
processes arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from llm_fsm.engine import FSMInstance
from llm_fsm.engine._messages import entry_view
from llm_fsm.errors import ConversationNotFoundError, StoreUnavailableError
from llm_fsm.runtime._performer import Saved
from llm_fsm.server._protocol import ManagerProtocol

logger = logging.getLogger(__name__)

DEFAULT_POLL_SECONDS = 1.0
"""How often an open stream reads the store when no save of this process woke it: the delay of events made by
other workers and processes."""

KEEPALIVE_SECONDS = 15.0
"""A comment line after this much silence, so proxies and clients do not take an idle stream for a dead one."""

_CURSOR = re.compile(r"(\d{1,12})(?:-([0-9a-f]{0,32}))?")


@dataclass(frozen=True)
class Cursor:
    """Where a reader is: how many messages it has seen, and the digest of the state it saw last ("" none)."""

    messages: int = 0
    state: str = ""

    def encode(self) -> str:
        return f"{self.messages}-{self.state}"

    @classmethod
    def parse(cls, text: str | None) -> Cursor:
        """The cursor of a ``Last-Event-ID``; anything we did not write starts from the beginning (a stream
        that replays is safe, one that skips is not)."""
        found = _CURSOR.fullmatch((text or "").strip())
        if found is None:
            return cls()
        return cls(int(found.group(1)), found.group(2) or "")


@dataclass(frozen=True)
class ConversationEvent:
    """One event: its id (the cursor after it), its type and its data (JSON)."""

    id: str
    event: str
    """``message``; ``state``, ``handoff`` (a person has it) or ``ended`` for the state; ``deleted``."""
    data: dict[str, Any]
    key: str = ""
    """The event's own name in its conversation, whatever cursor it was read from: ``message-<position>``,
    ``state-<position>-<digest>``; a webhook's idempotency id is the conversation id and this."""

    def encode(self) -> bytes:
        # JSON escapes newlines, so one data: line carries the whole object
        return f"id: {self.id}\nevent: {self.event}\ndata: {json.dumps(self.data, ensure_ascii=False)}\n\n".encode()


def state_of(instance: FSMInstance) -> dict[str, Any]:
    """What a state event says (without the conversation id, version and time, which are not part of its digest)."""
    handoff = instance.handoff
    return {
        "state": instance.current_state,
        "status": instance.status,
        "ended": instance.ended,
        "mode": instance.mode,
        "flow": instance.flow_name,
        "handoff": None if handoff is None else {"reason": handoff.reason, "actor": handoff.actor},
    }


def _digest(state: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:12]


def state_event_type(state: dict[str, Any]) -> str:
    if state["ended"]:
        return "ended"
    return "handoff" if state["mode"] == "human" else "state"


class Reading(NamedTuple):
    """What one read of a conversation gives: the events after the cursor, the cursor after them, and the version
    of the conversation they were read from."""

    events: list[ConversationEvent]
    cursor: Cursor
    version: int


async def read_events(manager: ManagerProtocol, conversation_id: str, user_id: str | None, cursor: Cursor) -> Reading:
    """The events after ``cursor`` as the store holds them now, and the cursor after them.

    Raises ConversationNotFoundError for an unknown id (or another tenant's). The transcript is read from the
    store only when the reader is behind the messages the hot record still holds (the archive is a second read).
    """
    instance = await manager.aget_instance(conversation_id, user_id=user_id)
    transcript = instance.context.conversation
    archived = transcript.archived_messages
    if cursor.messages > archived + len(transcript.exchanges):  # no id we gave for this conversation: from the start
        cursor = Cursor()
    if cursor.messages < archived:
        views = (await manager.aget_conversation_history(conversation_id, user_id=user_id))[cursor.messages :]
    else:
        views = [entry_view(entry) for entry in transcript.exchanges[cursor.messages - archived :]]
    events: list[ConversationEvent] = []
    position = cursor.messages
    for view in views:
        position += 1
        data = {"conversation_id": conversation_id, "position": position, **view}
        events.append(
            ConversationEvent(Cursor(position, cursor.state).encode(), "message", data, f"message-{position}")
        )
    state = state_of(instance)
    digest = _digest(state)
    after = Cursor(position, digest)
    if digest != cursor.state:
        data = {"conversation_id": conversation_id, **state, "version": instance.version, "at": instance.updated_at}
        events.append(ConversationEvent(after.encode(), state_event_type(state), data, f"state-{position}-{digest}"))
    return Reading(events, after, instance.version)


@dataclass(eq=False)
class _Waiter:
    loop: asyncio.AbstractEventLoop
    event: asyncio.Event = field(default_factory=asyncio.Event)

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # its loop has closed: nobody is waiting any more
            self.loop.call_soon_threadsafe(self.event.set)


class SaveSignals:
    """The app's listener on its manager's saves: wakes the streams of the saved conversation, tells subscribers.

    Called on whatever thread saved (a sync ``FSMManager`` call from a worker thread included), so it only
    schedules wake-ups on the waiting loops; it never reads, writes or waits.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._waiters: dict[str, set[_Waiter]] = {}
        self.subscribers: list[Callable[[Saved], None]] = []

    def __call__(self, saved: Saved) -> None:
        self.wake(saved.conversation_id)
        for subscriber in self.subscribers:
            subscriber(saved)

    def wake(self, conversation_id: str) -> None:
        """Wake the streams of ``conversation_id`` (a save, or a delete: deletes are no saves, the route tells)."""
        with self._guard:
            waiters = list(self._waiters.get(conversation_id, ()))
        for waiter in waiters:
            waiter.wake()

    @contextlib.contextmanager
    def watching(self, conversation_id: str) -> Iterator[asyncio.Event]:
        """An event set whenever this process saves ``conversation_id``, for the block (the caller clears it)."""
        waiter = _Waiter(asyncio.get_running_loop())
        with self._guard:
            self._waiters.setdefault(conversation_id, set()).add(waiter)
        try:
            yield waiter.event
        finally:
            with self._guard:
                waiters = self._waiters.get(conversation_id)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del self._waiters[conversation_id]

    def watched(self) -> int:
        """Streams open in this process (what a disconnected client must not leave behind)."""
        with self._guard:
            return sum(len(waiters) for waiters in self._waiters.values())

    def attach(self, manager: object) -> bool:
        """Listen to ``manager``'s saves if it tells them (``FSMManager.save_listeners``); a manager-like object
        without them is polled only."""
        listeners = getattr(manager, "save_listeners", None)
        if not isinstance(listeners, list):
            return False
        listeners.append(self)
        return True

    def detach(self, manager: object) -> None:
        listeners = getattr(manager, "save_listeners", None)
        if isinstance(listeners, list) and self in listeners:
            listeners.remove(self)


@dataclass
class EventSource:
    """What the events route needs of the app: its save signals and how often to read the store."""

    signals: SaveSignals
    poll_seconds: float = DEFAULT_POLL_SECONDS


async def event_stream(
    source: EventSource,
    manager: ManagerProtocol,
    conversation_id: str,
    user_id: str,
    first: Reading,
) -> AsyncIterator[bytes]:
    """The body of the stream: the first read's events, then each read's after a save or a poll, until the
    conversation is deleted or the client goes (Starlette cancels this generator at the disconnect, and leaving
    ``watching`` forgets the stream: a client gone costs nothing)."""
    events, cursor, _ = first
    loop = asyncio.get_running_loop()
    with source.signals.watching(conversation_id) as wake:
        wake.set()  # read once more at once: a save between the first read and watching would wait for a poll
        yield f"retry: {max(1, round(source.poll_seconds * 1000))}\n\n".encode()
        while True:
            for event in events:
                yield event.encode()
            quiet_since = loop.time()
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), timeout=source.poll_seconds)
                wake.clear()  # cleared before the read: a save during it wakes the next wait
                try:
                    events, cursor, _ = await read_events(manager, conversation_id, user_id, cursor)
                except ConversationNotFoundError:
                    yield ConversationEvent(cursor.encode(), "deleted", {"conversation_id": conversation_id}).encode()
                    return
                except StoreUnavailableError as exc:  # the store is down: the stream waits for it, as a poll
                    logger.warning("events of %s: the store is unavailable (%s)", conversation_id, exc)
                    events = []
                if events:
                    break
                if loop.time() - quiet_since >= KEEPALIVE_SECONDS:
                    yield b": keep-alive\n\n"
                    quiet_since = loop.time()


__all__ = [
    "DEFAULT_POLL_SECONDS",
    "KEEPALIVE_SECONDS",
    "ConversationEvent",
    "Cursor",
    "EventSource",
    "Reading",
    "SaveSignals",
    "event_stream",
    "read_events",
    "state_of",
]
