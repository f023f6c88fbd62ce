"""Live connections to the configured MCP servers, owned by one event loop on a thread of their own.

A stdio server is a process: starting one per call would cost its start-up on every turn and lose whatever it
keeps between calls, so each server gets one connection, opened on first use and kept. The SDK's sessions are
anyio task groups that must be entered and left by the same task, so every connection lives in one task on one
loop (``_Connection._hold``), and callers on any thread — pool threads running sync actions, the lint command —
submit coroutines to that loop and wait on a concurrent future.

A connection whose server died is noticed by its read stream reaching its end; the next call opens a new one.
A call that was in flight when it died fails (it may or may not have run: it is never sent twice).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import tempfile
import threading
from collections.abc import AsyncIterator, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import IO, Any, TypeVar

from llm_fsm.errors import MCPToolError
from llm_fsm.mcp._config import HTTPServer, MCPConfig, ServerConfig, StdioServer

_T = TypeVar("_T")

CONNECT_TIMEOUT_S = 20.0
"""The longest a server may take to start and answer the handshake, on top of a call's own timeout: a Python
server importing the SDK takes a second or two on a busy machine."""

CLOSE_TIMEOUT_S = 10.0
"""How long closing waits for the servers: the SDK gives a stdio server 2 s to exit on its own, then kills it."""


class _WatchedRead:
    """A transport's read stream that says when it ended: the server closed its side (a process that died, an
    HTTP session that went away). The SDK fails the calls in flight; this is how the next call knows to
    reconnect instead of failing too."""

    def __init__(self, inner: Any, connection: _Connection) -> None:
        self._inner = inner
        self._connection = connection

    async def receive(self) -> Any:
        import anyio

        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._connection.ended = True
            raise

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedRead:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc, tb)
        return result

    def __getattr__(self, name: str) -> Any:  # last_context, which the SDK reads when a stream has it
        return getattr(self._inner, name)


class _Connection:
    """One server's live client session, held open by one task until ``stop`` or the server's end."""

    def __init__(self, name: str, server: ServerConfig) -> None:
        self.name = name
        self.server = server
        self.client: Any = None
        self.ended = False
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stderr: IO[str] | None = None

    @property
    def usable(self) -> bool:
        return self.client is not None and not self.ended and self._task is not None and not self._task.done()

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        server = self.server
        if isinstance(server, StdioServer):
            from mcp.client.stdio import StdioServerParameters, stdio_client

            # the server's stderr goes to a file, not the terminal a chat runs in: its last line explains a death
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            params = StdioServerParameters(command=server.command, args=server.args, env=server.env, cwd=server.cwd)
            return _watched(stdio_client(params, errlog=self._stderr), self)
        assert isinstance(server, HTTPServer)
        return _watched(_http(server), self)

    async def open(self, timeout: float) -> None:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(ready), name=f"llm_fsm-mcp-{self.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            await self.close()
            raise MCPToolError(
                f"MCP server {self.name!r} did not finish its handshake within {timeout:g} s{self.last_words()}"
            ) from None
        except MCPToolError:
            await self.close()
            raise

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        from mcp import Client

        try:
            async with Client(self._transport()) as client:
                self.client = client
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 - a server that cannot be started or reached: the caller's error
            if not ready.done():
                ready.set_exception(
                    MCPToolError(f"cannot reach MCP server {self.name!r}: {_cause(exc)}{self.last_words()}")
                )
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.client = None
            self.ended = True

    async def close(self) -> None:
        """Leave the session (a stdio server gets its stdin closed, then SIGTERM, then SIGKILL) and wait for it."""
        self._stop.set()
        if self._task is not None and not self._task.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._task), CLOSE_TIMEOUT_S)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def last_words(self) -> str:
        """The last line the server wrote on stderr, to say why it is gone."""
        if self._stderr is None or self._stderr.closed:
            return ""
        try:
            self._stderr.seek(0)
            lines = [line.strip() for line in self._stderr.read()[-2000:].splitlines() if line.strip()]
        except (OSError, ValueError):
            return ""
        return f" (its stderr: {lines[-1][:300]})" if lines else ""


@asynccontextmanager
async def _watched(transport: AbstractAsyncContextManager[Any], connection: _Connection) -> AsyncIterator[Any]:
    async with transport as (read, write):
        yield _WatchedRead(read, connection), write


@asynccontextmanager
async def _http(server: HTTPServer) -> AsyncIterator[Any]:
    """Streamable HTTP with the configured headers, on an HTTP client closed with the connection."""
    import httpx2  # the SDK's HTTP client (a dependency of mcp)
    from mcp.client.streamable_http import streamable_http_client

    # the SDK's own defaults: 30 s to connect and write, 300 s to read (a server may hold a stream open)
    http = httpx2.AsyncClient(headers=server.headers or None, timeout=httpx2.Timeout(30, read=300))
    async with http, streamable_http_client(server.url, http_client=http) as streams:
        yield streams


def _cause(exc: BaseException) -> str:
    """The innermost reason, as one line: anyio wraps a failed connect in exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class MCPConnections:
    """The configured servers' connections and the loop thread they live on (started on first use)."""

    def __init__(self, config: MCPConfig) -> None:
        self.config = config
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._start_guard = threading.Lock()
        self._connections: dict[str, _Connection] = {}  # read and written on the loop only
        self._opening: dict[str, asyncio.Lock] = {}
        self._closed = False

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._start_guard:
            if self._closed:
                raise MCPToolError("the MCP client was closed")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=loop.run_forever, name="llm_fsm-mcp", daemon=True)
                self._thread.start()
                self._loop = loop
                atexit.register(self.close)  # no stdio server outlives the process that started it
            return self._loop

    def run(self, coroutine: Coroutine[Any, Any, _T], timeout: float | None = None) -> _T:
        """Run ``coroutine`` on the connections' loop and wait for it, from any thread but that loop's."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._started())
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise MCPToolError(f"the MCP call did not finish within {timeout:g} s") from None

    async def connection(self, name: str, timeout: float) -> Any:
        """The live client of server ``name``, connecting (or reconnecting to a server that died) first."""
        server = self.config.servers.get(name)
        if server is None:
            configured = ", ".join(sorted(self.config.servers)) or "none"
            raise MCPToolError(f"no MCP server named {name!r} is configured (configured: {configured})")
        lock = self._opening.setdefault(name, asyncio.Lock())
        async with lock:
            found = self._connections.get(name)
            if found is None or not found.usable:
                if found is not None:
                    await found.close()
                found = self._connections[name] = _Connection(name, server)
                await found.open(timeout)
            return found.client

    async def drop(self, name: str) -> str:
        """Close server ``name``'s connection after a failure that left it unusable; what its stderr last said."""
        found = self._connections.pop(name, None)
        if found is None:
            return ""
        words = found.last_words()
        await found.close()
        return words

    async def _close_all(self) -> None:
        await asyncio.gather(*(c.close() for c in self._connections.values()), return_exceptions=True)
        self._connections.clear()

    def close(self) -> None:
        """Close every connection (stdio servers exit) and stop the loop thread; calls after it fail."""
        with self._start_guard:
            self._closed = True
            loop, thread, self._loop = self._loop, self._thread, None
        if loop is None:
            return
        atexit.unregister(self.close)
        # a server that would not exit was killed by the SDK already; the thread is a daemon
        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(self._close_all(), loop).result(CLOSE_TIMEOUT_S + 2)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)
        if not loop.is_running():
            loop.close()


__all__ = ["CONNECT_TIMEOUT_S", "MCPConnections"]
