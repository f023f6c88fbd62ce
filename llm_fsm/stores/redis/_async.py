"""The asyncio client of one event loop: an async turn talks to Redis without a thread hop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from llm_fsm.stores.redis._operations import _Call, _Command, _Pipeline
from llm_fsm.stores.redis._scripts import SCRIPTS

_ASYNC_MAX_CONNECTIONS = 100
"""Connections of one event loop's client (the manager runs at most max_concurrent_turns, 100, turns at once)."""

_ASYNC_POOL_WAIT = 5.0
"""Seconds a call waits for a free connection when no socket timeout is configured."""


class _AsyncClient:
    """A ``redis.asyncio`` client of one event loop, with its scripts."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.scripts = {name: client.register_script(text) for name, text in SCRIPTS.items()}
        self.closer = self._close_with_the_loop()

    @classmethod
    def connect(cls, url: str, options: dict[str, Any]) -> _AsyncClient:
        from redis.asyncio import BlockingConnectionPool, Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import ExponentialBackoff

        options = dict(options)
        retry = Retry(ExponentialBackoff(cap=0.2, base=0.02), options.pop("retries"))
        # A blocking pool: past max_connections a call waits for a free connection (up to the socket timeout)
        # instead of failing at once with "Too many connections", which turned a burst of turns into 503s.
        options.setdefault("max_connections", _ASYNC_MAX_CONNECTIONS)
        options.setdefault("timeout", options.get("socket_timeout") or _ASYNC_POOL_WAIT)
        pool = BlockingConnectionPool.from_url(url, **options)
        client = Redis(connection_pool=pool, retry=retry)
        client.auto_close_connection_pool = True  # the client owns this pool: closing it closes the connections
        return cls(client)

    async def perform(self, call: _Call) -> Any:
        if isinstance(call, _Command):
            return await getattr(self.client, call.name)(*call.args)
        if isinstance(call, _Pipeline):
            pipe = self.client.pipeline(transaction=call.transaction)
            for command in call.commands:
                getattr(pipe, command.name)(*command.args)  # buffered: a pipeline's commands are not awaited
            return await pipe.execute()
        return await self.scripts[call.name](keys=call.keys, args=call.args)

    async def _close_with_the_loop(self) -> AsyncIterator[None]:
        """Suspended for the client's life; ``asyncio.run`` finalises it (closing the client) before the loop closes.

        Without it, a loop that ends (every ``asyncio.run``) would leave its client's sockets open.
        """
        try:
            yield
        finally:
            await self.client.aclose()
