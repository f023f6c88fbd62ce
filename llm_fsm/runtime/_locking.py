"""A first-come, first-served lock that threads and coroutines share without parking a thread on it.

Why not ``threading.Lock`` awaited through ``asyncio.to_thread(lock.acquire)``: every waiting
coroutine then holds a pool thread, and the turn holding the lock needs a pool thread of its own
for the store, so with more waiters than pool threads nothing ever finishes; and a cancelled
waiter's thread still acquires the lock later, which nobody releases.

Here a waiter is a queue entry. A thread waits on an event; a coroutine awaits a future of its
own loop. ``release`` hands ownership to the oldest live waiter directly (the lock never looks
free in between), so turns on one conversation run in arrival order. A coroutine cancelled
while waiting leaves the queue; one cancelled just after being handed the lock passes it on.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque


class _ThreadWaiter:
    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = threading.Event()

    def grant(self) -> bool:
        self.event.set()
        return True


class _TaskWaiter:
    __slots__ = ("loop", "future", "granted", "abandoned")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        self.granted = False
        self.abandoned = False

    def grant(self) -> bool:
        """Called with the guard held, from any thread; False when this waiter can no longer take the lock."""
        if self.abandoned:
            return False
        try:
            self.loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # its loop is closed: nobody is left to take the lock
            return False
        self.granted = True
        return True

    def _wake(self) -> None:
        if not self.future.done():
            self.future.set_result(None)


class FairLock:
    """Not reentrant. ``acquire``/``release`` from threads, ``await aacquire()``/``release`` from coroutines."""

    __slots__ = ("_guard", "_locked", "_waiters", "__weakref__")

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locked = False
        self._waiters: deque[_ThreadWaiter | _TaskWaiter] = deque()

    def locked(self) -> bool:
        return self._locked

    def acquire(self) -> None:
        with self._guard:
            if not self._locked:
                self._locked = True
                return
            waiter = _ThreadWaiter()
            self._waiters.append(waiter)
        waiter.event.wait()  # ownership arrives with the event

    async def aacquire(self) -> None:
        with self._guard:
            if not self._locked:
                self._locked = True
                return
            waiter = _TaskWaiter(asyncio.get_running_loop())
            self._waiters.append(waiter)
        try:
            await waiter.future
        except BaseException:
            with self._guard:
                owned = waiter.granted
                if not owned:
                    waiter.abandoned = True
                    self._waiters.remove(waiter)
            if owned:  # handed the lock as we were cancelled: pass it on
                self.release()
            raise

    def release(self) -> None:
        with self._guard:
            if not self._locked:
                raise RuntimeError("release of an unlocked FairLock")
            while self._waiters:
                if self._waiters.popleft().grant():
                    return  # still locked: it belongs to that waiter now
            self._locked = False

    def __enter__(self) -> FairLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    async def __aenter__(self) -> FairLock:
        await self.aacquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()
