"""The asyncio connections of one event loop: an async turn talks to PostgreSQL without a thread hop."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any

from llm_fsm.errors import StoreUnavailableError

if TYPE_CHECKING:
    import psycopg


class _LoopPool:
    """Connections of one event loop: opened on demand, ``size`` at most at once, kept while idle, closed with the loop.

    Not psycopg_pool's ``AsyncConnectionPool``: its worker tasks are cancelled by ``asyncio.run`` before the loop
    finalises async generators, so it could not close its connections there and left pending tasks behind. This one
    runs nothing in the background, so a loop's end (or ``close()``) closes everything, and a refused connection
    is reported at once.
    """

    def __init__(self, url: str, size: int, connect_timeout: float) -> None:
        self.url = url
        self.connect_timeout = connect_timeout
        self.idle: builtins.list[psycopg.AsyncConnection[Any]] = []
        self.slots = asyncio.Semaphore(size)
        self.closed = False
        self.closer = self._close_with_the_loop()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        import psycopg

        try:
            await asyncio.wait_for(self.slots.acquire(), self.connect_timeout)
        except TimeoutError:
            raise StoreUnavailableError(
                f"every connection of this event loop stayed busy for {self.connect_timeout} s"
            ) from None
        try:
            if self.idle:
                conn = self.idle.pop()
            else:
                conn = await asyncio.wait_for(
                    psycopg.AsyncConnection.connect(self.url, autocommit=True), self.connect_timeout
                )
            try:
                yield conn
            finally:
                reusable = not (self.closed or conn.closed or conn.broken)
                if reusable and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                    self.idle.append(conn)
                else:
                    with suppress(Exception):
                        await conn.close()
        finally:
            self.slots.release()

    async def discard_idle(self) -> None:
        """Close the idle connections (after one dropped: the others went down with the same server)."""
        idle, self.idle = self.idle, []
        for conn in idle:
            with suppress(Exception):
                await conn.close()

    async def close(self) -> None:
        self.closed = True
        await self.discard_idle()

    async def _close_with_the_loop(self) -> AsyncIterator[None]:
        """Suspended for the connections' life; ``asyncio.run`` finalises it (closing them) before the loop closes.

        Without it, a loop that ends (every ``asyncio.run``) would leave its connections open.
        """
        try:
            yield
        finally:
            await self.close()
