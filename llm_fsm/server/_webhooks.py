"""Webhooks: every conversation event this server's process saves, POSTed signed to the configured URLs.

Two tasks per app, started by its lifespan, so no turn ever waits on a receiver:

- the producer: a save (``SaveSignals``, on any thread) only notes the conversation id in a bounded set. The
  producer reads each noted conversation's events after its cursor (``_events.read_events``, the same events as
  the stream) and writes them to the outbox (``_outbox``) with the moved cursor, in one transaction. When the set
  is full, the id is not kept, but the time of the first such save is: the producer then sweeps the store for
  conversations saved since (``alist_conversations(all_users=True)``), so an overflow costs a sweep, never an
  event. A start after a stop or a crash sweeps the same way from the outbox's last clean point.
- the deliverer: claims due deliveries from the outbox (a lease, so processes sharing the file never send one
  twice at once), POSTs each signed (``llm_fsm.webhooks``), deletes it on a 2xx, and otherwise schedules the next
  attempt (exponential, bounded) or, after the last, leaves it as a dead letter for the API to show and resend.

See docs/server.md, Webhooks, for what is guaranteed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from llm_fsm._threads import run_blocking
from llm_fsm.errors import ConversationNotFoundError
from llm_fsm.runtime._performer import Saved
from llm_fsm.server._events import Cursor, read_events
from llm_fsm.server._outbox import Delivery, Outbox
from llm_fsm.server._protocol import ManagerProtocol
from llm_fsm.webhooks import EVENT_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookSettings, sign

logger = logging.getLogger(__name__)

CLEAN_UNTIL = "clean_until"
"""The outbox's meta key: every save before this time (epoch seconds) has its events in the outbox."""

SWEEP_MARGIN_SECONDS = 300.0
"""How far before the clean point a sweep looks: a conversation's ``updated_at`` is taken during its turn, before
the save, so a slow turn's save is younger than it. Sweeping more costs reads, never a duplicate (cursors)."""

IDLE_POLL_SECONDS = 1.0
"""How often an idle deliverer looks at the outbox (for deliveries other processes sharing the file wrote)."""

_CHECKPOINT_EVERY = 1.0


class WebhookDispatcher:
    """The producer and the deliverer of one app (see the module docstring)."""

    def __init__(self, settings: WebhookSettings, manager: ManagerProtocol) -> None:
        self.settings = settings
        self.manager = manager
        self.outbox = Outbox(settings.outbox)
        self._guard = threading.Lock()
        self._dirty: dict[str, str | None] = {}
        self._overflow_since: float | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._produce_wake = asyncio.Event()
        self._deliver_wake = asyncio.Event()
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self._checkpointed = 0.0
        self._clean_since = time.time()
        self._unsweepable = False
        self._swept_at = time.time()
        self.overflows = 0
        """Saves not kept in the bounded set (each found again by a sweep)."""

    # --- the save listener: any thread, never waits ------------------------------------------------------------

    def on_save(self, saved: Saved) -> None:
        with self._guard:
            if saved.conversation_id in self._dirty or len(self._dirty) < self.settings.queue_size:
                self._dirty[saved.conversation_id] = saved.user_id
            else:
                self.overflows += 1
                if self._overflow_since is None:
                    self._overflow_since = time.time()
                    logger.warning(
                        "webhooks: %d conversations are waiting for their events; later saves are found by a sweep "
                        "of the store instead (raise queue_size if this repeats)",
                        self.settings.queue_size,
                    )
        self._wake(self._produce_wake)

    def _wake(self, event: asyncio.Event) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(event.set)

    def nudge(self) -> None:
        """Look at the outbox now (a dead letter was made due again)."""
        self._wake(self._deliver_wake)

    # --- lifecycle (the app's lifespan) ------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._produce_wake, self._deliver_wake = asyncio.Event(), asyncio.Event()
        clean = await run_blocking(self.outbox.meta, CLEAN_UNTIL)
        if clean is None:  # a new outbox: events from now on, not the store's whole history
            await run_blocking(self.outbox.set_meta, CLEAN_UNTIL, repr(time.time()))
        else:  # what was saved while no dispatcher was running (or before a crash) is found by a sweep
            with self._guard:
                self._overflow_since = float(clean)
        self._clean_since = time.time() if clean is None else float(clean)
        self._tasks = [
            asyncio.create_task(self._guarded("producer", self._produce), name="webhooks-producer"),
            asyncio.create_task(self._guarded("deliverer", self._deliver), name="webhooks-deliverer"),
        ]
        self._produce_wake.set()

    async def stop(self, grace: float) -> None:
        """Derive what is noted, let attempts in flight finish (up to ``grace`` seconds), close the outbox."""
        self._stopping = True
        self._produce_wake.set()
        self._deliver_wake.set()
        if self._tasks:
            _, late = await asyncio.wait(self._tasks, timeout=grace)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        await run_blocking(self.outbox.close)

    async def _guarded(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        """Run one of the two tasks; a fault it did not expect (the outbox's disk, a bug) is logged and the task
        starts again, never dies silently. What a failed producer pass had taken is found by a sweep from the last
        clean point; a delivery a failed deliverer had claimed is claimed again when its lease ends."""
        while True:
            try:
                await run()
                return
            except Exception:  # noqa: BLE001 - logged; the task starts again
                logger.exception("webhooks: the %s failed; it starts again", name)
                if self._stopping:
                    return
                self._note_again({}, self._clean_since)
                await asyncio.sleep(IDLE_POLL_SECONDS)
                self._produce_wake.set()

    # --- the producer ------------------------------------------------------------------------------------------

    async def _produce(self) -> None:
        every = self.settings.sweep_seconds
        while True:
            with contextlib.suppress(TimeoutError):
                wait = None if not every else max(0.0, self._swept_at + every - time.time())
                await asyncio.wait_for(self._produce_wake.wait(), timeout=wait)
            self._produce_wake.clear()
            taken_at = time.time()
            if every and taken_at >= self._swept_at + every and not self._unsweepable:
                self._note_again({}, self._swept_at)  # other processes' saves: a sweep since the last one
                self._swept_at = taken_at
            with self._guard:
                batch, self._dirty = self._dirty, {}
                since, self._overflow_since = self._overflow_since, None
            failed: dict[str, str | None] = batch
            try:
                if since is not None:
                    batch = {**await self._sweep(since - SWEEP_MARGIN_SECONDS), **batch}
            except Exception:  # noqa: BLE001 - the store is down: the sweep is made again, later
                logger.exception("webhooks: sweeping the store failed; retrying")
                self._note_again(batch, since)
            else:
                failed = {cid: tenant for cid, tenant in batch.items() if not await self._derive(cid, tenant)}
                self._note_again(failed, None)
                since = None
                if not failed and (taken_at - self._checkpointed >= _CHECKPOINT_EVERY or self._stopping):
                    await run_blocking(self.outbox.set_meta, CLEAN_UNTIL, repr(taken_at))
                    self._checkpointed = self._clean_since = taken_at
            self._deliver_wake.set()
            if self._stopping:
                return  # one last pass; what failed in it is found by the next start's sweep
            if failed or since is not None:  # not again sooner than a poll, so a store that is down is not hammered
                await asyncio.sleep(IDLE_POLL_SECONDS)
                self._produce_wake.set()

    def _note_again(self, batch: dict[str, str | None], since: float | None) -> None:
        if not batch and since is None:
            return
        with self._guard:
            self._dirty = {**batch, **self._dirty}
            if since is not None:
                self._overflow_since = min(since, self._overflow_since or since)

    async def _derive(self, conversation_id: str, tenant: str | None) -> bool:
        """Put the conversation's new events in the outbox; False when the store could not be read (retried)."""
        try:
            cursor = Cursor.parse(await run_blocking(self.outbox.cursor_of, conversation_id))
            events, after, version = await read_events(self.manager, conversation_id, tenant, cursor)
            now = time.time()
            bodies = [
                (
                    f"{conversation_id}:{event.key}",
                    json.dumps(
                        {
                            "id": f"{conversation_id}:{event.key}",
                            "type": event.event,
                            "conversation_id": conversation_id,
                            "tenant": tenant,
                            "created_at": now,
                            "data": event.data,
                        },
                        ensure_ascii=False,
                    ).encode(),
                )
                for event in events
            ]
            await run_blocking(
                self.outbox.record, conversation_id, tenant, bodies, self.settings.urls, after.encode(), version
            )
            return True
        except ConversationNotFoundError:  # deleted since its save: nothing more will be said
            await run_blocking(self.outbox.forget, conversation_id)
            return True
        except Exception:  # noqa: BLE001 - the store or the outbox failed: noted again, retried
            logger.exception("webhooks: reading the events of %s failed; retrying", conversation_id)
            return False

    async def _sweep(self, since: float) -> dict[str, str | None]:
        """Conversations of every tenant saved since ``since`` whose saved version the outbox has not read yet.

        Listings are newest-saved first, so the sweep reads pages only until the first older conversation; a manager
        that cannot list every tenant's conversations is swept by nobody (said once in the log)."""
        lister: Any = getattr(self.manager, "alist_conversations", None)
        listed: dict[str, tuple[str | None, int]] = {}
        cursor: str | None = None
        while True:
            try:
                page = await lister(all_users=True, limit=200, cursor=cursor)
            except TypeError:
                if not self._unsweepable:
                    logger.warning("webhooks: this manager cannot list every tenant's conversations; no sweeps")
                self._unsweepable = True
                return {}
            recent = [s for s in page.items if s.updated_at >= since]
            listed.update({s.conversation_id: (s.user_id, s.version) for s in recent})
            cursor = page.next_cursor
            if cursor is None or len(recent) < len(page.items):
                break
        read = await run_blocking(self.outbox.versions, list(listed))
        return {cid: user for cid, (user, version) in listed.items() if read.get(cid, -1) < version}

    # --- the deliverer -----------------------------------------------------------------------------------------

    async def _deliver(self) -> None:
        settings = self.settings
        lease = settings.timeout_seconds * 2 + 5
        slots = asyncio.Semaphore(settings.concurrency)
        async with httpx.AsyncClient(timeout=settings.timeout_seconds) as client:
            while True:
                batch = await run_blocking(self.outbox.claim, settings.concurrency * 4, lease)
                if batch:
                    sent = await asyncio.gather(*(self._attempt(client, slots, delivery) for delivery in batch))
                    await run_blocking(self.outbox.delivered, [seq for seq in sent if seq is not None])
                    continue
                if self._stopping and self._tasks[0].done():
                    return  # the producer's last pass is in the outbox, nothing is due now: the rest waits there
                due = await run_blocking(self.outbox.next_due)
                wait = IDLE_POLL_SECONDS if due is None else min(IDLE_POLL_SECONDS, max(0.0, due - time.time()))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._deliver_wake.wait(), timeout=wait)
                self._deliver_wake.clear()

    async def _attempt(self, client: httpx.AsyncClient, slots: asyncio.Semaphore, delivery: Delivery) -> int | None:
        """One attempt; the delivery's ``seq`` when it was acknowledged (forgotten with its batch), else None."""
        async with slots:
            stamp = int(time.time())
            headers = {
                "Content-Type": "application/json",
                EVENT_ID_HEADER: delivery.event_id,
                TIMESTAMP_HEADER: str(stamp),
                SIGNATURE_HEADER: sign(self.settings.secret, stamp, delivery.body),
            }
            try:
                response = await client.post(delivery.url, content=delivery.body, headers=headers)
                error = None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"
            except Exception as exc:  # noqa: BLE001 - whatever the attempt met is a failed attempt, never a dead task
                error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if error is None:
            return delivery.seq
        attempts = delivery.attempts + 1
        retry_at = None if attempts >= self.settings.max_attempts else time.time() + self.settings.retry_delay(attempts)
        if retry_at is None:
            logger.warning(
                "webhooks: %s to %s is a dead letter after %d attempts (%s)",
                delivery.event_id,
                delivery.url,
                attempts,
                error,
            )
        await run_blocking(self.outbox.failed, delivery.seq, attempts, error, retry_at)
        return None


__all__ = ["CLEAN_UNTIL", "IDLE_POLL_SECONDS", "SWEEP_MARGIN_SECONDS", "WebhookDispatcher"]
