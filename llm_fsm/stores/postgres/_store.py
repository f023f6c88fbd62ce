"""``PostgresStore``: the operations run on pooled connections, retried on a fresh one when one drops, with
psycopg's errors sorted into what a caller can act on."""

from __future__ import annotations

import asyncio
import builtins
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import StoreError, StoreUnavailableError
from llm_fsm.stores._paging import ConversationPage
from llm_fsm.stores._versions import checked_document, checked_version
from llm_fsm.stores.base import AsyncStoreMixin, ConversationSummary, DueTimer, Retention, close_in_loop
from llm_fsm.stores.codec import DEFAULT_MAX_RECORD_BYTES, SizeLimits
from llm_fsm.stores.postgres._loop_pool import _LoopPool
from llm_fsm.stores.postgres._operations import _adrive, _drive, _Operations, _Ops
from llm_fsm.stores.postgres._sql import _QUERIES

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

logger = logging.getLogger("llm_fsm.stores.postgres")  # the name it had as one module: logging configs name it

DEFAULT_SCHEMA = "llm_fsm"

_T = TypeVar("_T")

_WAIT_SLICE = 0.05
"""Seconds between two looks at whether the pool's last connection attempt failed (see ``_connection``)."""

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class PostgresStore(_Operations, AsyncStoreMixin):
    """Conversations in PostgreSQL, with compare-and-set on a version column, expiry and a turn log."""

    def __init__(
        self,
        url: str = "postgresql://localhost/postgres",
        *,
        schema: str = DEFAULT_SCHEMA,
        ttl_seconds: float | None = None,
        max_record_bytes: int | None = DEFAULT_MAX_RECORD_BYTES,
        max_context_bytes: int | None = None,
        connect_timeout: float = 5.0,
        pool_size: int = 10,
        retries: int = 1,
    ) -> None:
        """``url``: a libpq connection URI (``postgresql://user:password@host:port/dbname?sslmode=...``).

        ``schema``: the PostgreSQL schema holding the tables (created with them on first use), so several
        applications can share a database. ``ttl_seconds``: conversations expire this long after their last
        save (None or 0: kept until deleted or ``expire``). ``connect_timeout``: seconds an operation waits for
        a connection before StoreUnavailableError. ``pool_size``: connections per process (and per event
        loop). ``retries``: attempts on a fresh connection after a dropped one.
        """
        _import_psycopg()
        if not _SCHEMA_NAME.fullmatch(schema):
            raise StoreError(f"postgres schema must be a lowercase SQL name ([a-z_][a-z0-9_]*), got {schema!r}")
        if pool_size < 1 or retries < 0:
            raise StoreError(f"postgres pool_size must be >= 1 and retries >= 0, got {pool_size} and {retries}")
        self.url = url
        self.schema = schema
        self.ttl = timedelta(seconds=ttl_seconds) if ttl_seconds else None
        self._limits = SizeLimits(max_record_bytes=max_record_bytes, max_context_bytes=max_context_bytes)
        self._connect_timeout = float(connect_timeout)
        self._pool_size = int(pool_size)
        self._retries = int(retries)
        self._q = {name: text.replace("{s}", f'"{schema}"') for name, text in _QUERIES.items()}
        self._lock = threading.Lock()
        self._pool: ConnectionPool[Any] | None = None
        self._pid = os.getpid()
        self._inherited: builtins.list[Any] = []  # a parent's pools: never closed here, never collected
        self._ready_pid: int | None = None
        self._refused_at = 0.0  # monotonic time the last connection attempt of a pool failed
        self._closed = False
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopPool] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"PostgresStore({_redact(self.url)!r}, schema={self.schema!r})"

    # --- protocol ---------------------------------------------------------------

    def load(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> FSMInstance:
        return self._run(lambda: self._load(conversation_id, user_id, room_id))

    def load_for_turn(
        self,
        conversation_id: str,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
    ) -> FSMInstance:
        return self._run(lambda: self._load_for_turn(conversation_id, user_id, room_id, message_id))

    def save(self, instance: FSMInstance, *, expected_version: int | None, retention: Retention | None = None) -> int:
        save = self._prepare_save(instance, expected_version, retention)  # size caps checked before any I/O
        return self._run(save)

    def delete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        return self._run(lambda: self._delete(conversation_id, user_id, room_id))

    def list(self, *, user_id: str | None = None, room_id: str | None = None) -> builtins.list[ConversationSummary]:
        return self._run(lambda: self._list(user_id, room_id))

    def list_page(
        self,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        all_rooms: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ConversationPage:
        return self._run(lambda: self._page(user_id, room_id, all_rooms, limit, cursor))

    def expire(self, *, older_than: float) -> int:
        return self._run(lambda: self._expire(older_than))

    def transcript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        return self._run(lambda: self._transcript(conversation_id, user_id, room_id))

    def save_definition_version(self, version: str, document: str) -> None:
        checked_document(version, document, self._limits)
        self._run(lambda: self._save_definition_version(version, document))

    def load_definition_version(self, version: str) -> str:
        checked_version(version)
        return self._run(lambda: self._load_definition_version(version))

    def definition_versions(self) -> builtins.list[str]:
        return self._run(self._definition_versions)

    def claim_due_timers(self, *, now: float, limit: int, lease: float) -> builtins.list[DueTimer]:
        return self._run(lambda: self._claim_due_timers(now, limit, lease))

    def release_timer(self, timer: DueTimer) -> None:
        self._run(lambda: self._release_timer(timer))

    def timer_count(self) -> int:
        return self._run(self._timer_count)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None and self._pid == os.getpid():
            try:
                pool.close(timeout=1.0)
            except Exception as exc:  # closing must never mask the caller's own error
                logger.debug("closing %r: %s", self, exc)
        loops, self._loops = builtins.list(self._loops.items()), weakref.WeakKeyDictionary()
        for loop, pools in loops:
            try:
                close_in_loop(loop, pools.close())
            except Exception as exc:  # noqa: BLE001 - as above
                logger.debug("closing %r's asyncio pool: %s", self, exc)

    # --- async twins: the same operations on the running loop's pool -------------------

    async def aload(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMInstance:
        return await self._arun(lambda: self._load(conversation_id, user_id, room_id))

    async def aload_for_turn(
        self,
        conversation_id: str,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
    ) -> FSMInstance:
        return await self._arun(lambda: self._load_for_turn(conversation_id, user_id, room_id, message_id))

    async def asave(
        self, instance: FSMInstance, *, expected_version: int | None, retention: Retention | None = None
    ) -> int:
        return await self._arun(self._prepare_save(instance, expected_version, retention))

    async def adelete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        return await self._arun(lambda: self._delete(conversation_id, user_id, room_id))

    async def alist(
        self, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[ConversationSummary]:
        return await self._arun(lambda: self._list(user_id, room_id))

    async def alist_page(
        self,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        all_rooms: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ConversationPage:
        return await self._arun(lambda: self._page(user_id, room_id, all_rooms, limit, cursor))

    async def aexpire(self, *, older_than: float) -> int:
        return await self._arun(lambda: self._expire(older_than))

    async def atranscript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        return await self._arun(lambda: self._transcript(conversation_id, user_id, room_id))

    async def asave_definition_version(self, version: str, document: str) -> None:
        checked_document(version, document, self._limits)
        await self._arun(lambda: self._save_definition_version(version, document))

    async def aload_definition_version(self, version: str) -> str:
        checked_version(version)
        return await self._arun(lambda: self._load_definition_version(version))

    async def adefinition_versions(self) -> builtins.list[str]:
        return await self._arun(self._definition_versions)

    async def aclaim_due_timers(self, *, now: float, limit: int, lease: float) -> builtins.list[DueTimer]:
        return await self._arun(lambda: self._claim_due_timers(now, limit, lease))

    async def arelease_timer(self, timer: DueTimer) -> None:
        await self._arun(lambda: self._release_timer(timer))

    async def atimer_count(self) -> int:
        return await self._arun(self._timer_count)

    def ping(self) -> bool:
        """Whether the server answers now (no exception; for health checks)."""
        try:
            return self._run(lambda: self._ping()) == 1
        except StoreError:
            return False

    # --- plumbing ---------------------------------------------------------------

    def _run(self, make: Callable[[], _Ops[_T]]) -> _T:
        """Run an operation on a pooled connection (the tables made or checked first, once per process)."""
        if self._ready_pid != os.getpid():
            self._attempts(self._migrate, transaction=True)
            self._ready_pid = os.getpid()
        return self._attempts(make, transaction=False)

    def _attempts(self, make: Callable[[], _Ops[_T]], *, transaction: bool) -> _T:
        pool = self._sync_pool()
        for attempt in range(self._retries + 1):
            try:
                with self._errors(), self._connection(pool) as conn:
                    if not transaction:
                        return _drive(conn, make())
                    with conn.transaction():
                        return _drive(conn, make())
            except _Retry:
                if attempt == self._retries:
                    raise
                with self._errors():
                    pool.check()  # drops every idle connection that went down with the one that failed
        raise AssertionError("unreachable")  # pragma: no cover

    async def _arun(self, make: Callable[[], _Ops[_T]]) -> _T:
        """``_run`` on the running loop's connections."""
        pools = await self._loop_pool()
        if self._ready_pid != os.getpid():
            await self._aattempts(pools, self._migrate, transaction=True)
            self._ready_pid = os.getpid()
        return await self._aattempts(pools, make, transaction=False)

    async def _aattempts(self, pools: _LoopPool, make: Callable[[], _Ops[_T]], *, transaction: bool) -> _T:
        for attempt in range(self._retries + 1):
            try:
                with self._errors():  # a sync context manager: it only sorts what the block raises
                    async with pools.connection() as conn:
                        if not transaction:
                            return await _adrive(conn, make())
                        async with conn.transaction():
                            return await _adrive(conn, make())
            except _Retry:
                if attempt == self._retries:
                    raise
                await pools.discard_idle()
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def _connection(self, pool: ConnectionPool[Any]) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection; waits up to ``connect_timeout``, but not once the server refused a connection.

        The pool connects in the background and says nothing to a waiting caller when that fails, so the wait
        is taken in slices, each checking whether an attempt failed since it began: a server that is down is
        reported at once, not after the whole timeout.
        """
        from psycopg_pool import PoolTimeout

        asked = time.monotonic()
        deadline = asked + self._connect_timeout
        while True:
            try:
                conn = pool.getconn(timeout=max(0.001, min(_WAIT_SLICE, deadline - time.monotonic())))
                break
            except PoolTimeout:
                if self._refused_at > asked or time.monotonic() >= deadline:
                    raise
        try:
            yield conn
        finally:
            pool.putconn(conn)

    def _refused(self, pool: object) -> None:
        """The pool's ``reconnect_failed``: with ``reconnect_timeout=0``, called on the first failed attempt."""
        self._refused_at = time.monotonic()

    def _sync_pool(self) -> ConnectionPool[Any]:
        """The process's pool, opened on first use and again in a forked child (a parent's is never touched)."""
        with self._lock:
            if self._closed:
                raise StoreError(f"{self!r} is closed")
            if self._pool is not None and self._pid == os.getpid():
                return self._pool
            if self._pool is not None:
                self._inherited.append(self._pool)
            self._pid = os.getpid()
            from psycopg_pool import ConnectionPool

            pool: ConnectionPool[Any] = ConnectionPool(
                self.url,
                min_size=1,
                max_size=self._pool_size,
                kwargs={"autocommit": True},
                timeout=self._connect_timeout,
                reconnect_timeout=0,
                reconnect_failed=self._refused,
                name=f"llm_fsm-{self.schema}",
                open=False,
            )
            with self._errors():
                pool.open(wait=False)
            self._pool = pool
            return pool

    async def _loop_pool(self) -> _LoopPool:
        """The running loop's connections (an asyncio connection belongs to one loop), made on first use."""
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        loop = asyncio.get_running_loop()
        pools = self._loops.get(loop)
        if pools is None:
            pools = _LoopPool(self.url, self._pool_size, self._connect_timeout)
            self._loops[loop] = pools
            await pools.closer.__anext__()  # started in this loop: the loop's shutdown_asyncgens() closes it
        return pools

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """psycopg's errors, sorted into what a caller can act on (see ``_translate``)."""
        try:
            yield
        except StoreError:
            raise
        except Exception as exc:
            raise self._translate(exc) from exc

    def _translate(self, exc: Exception) -> StoreError | Exception:
        import psycopg
        from psycopg_pool import PoolClosed, PoolTimeout

        where = f"postgres at {_redact(self.url)}"
        if isinstance(exc, PoolTimeout):
            return StoreUnavailableError(
                f"{where} is unavailable: no connection (refused, or none within {self._connect_timeout} s)"
            )
        if isinstance(exc, PoolClosed):
            return StoreError(f"{self!r} is closed")
        if isinstance(exc, TimeoutError):
            return StoreUnavailableError(f"{where} is unavailable: no connection within {self._connect_timeout} s")
        if isinstance(exc, psycopg.OperationalError) and _connection_lost(exc):
            return _Retry(f"{where} is unavailable: {_first_line(exc)}")
        if isinstance(exc, psycopg.OperationalError | psycopg.errors.TransactionRollback):
            return StoreUnavailableError(f"{where} is unavailable: {_first_line(exc)}")
        if isinstance(exc, psycopg.Error):
            return StoreError(f"{where}: {type(exc).__name__}: {_first_line(exc)}")
        return exc


class _Retry(StoreUnavailableError):
    """The connection dropped: retried on a fresh connection (a save is recognised by its ``save_id``), then
    raised as the StoreUnavailableError it is."""


def _connection_lost(exc: Exception) -> bool:
    """A dropped or refused connection, or a server shutting down: another connection may do better."""
    sqlstate = getattr(exc, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith(("08", "57P"))


def _import_psycopg() -> Any:
    """psycopg, imported only when a PostgreSQL store is opened, so ``import llm_fsm`` never needs it."""
    try:
        import psycopg
        import psycopg_pool  # noqa: F401 - checked here, used when the first pool is made
    except ImportError as exc:
        raise StoreError(
            'the PostgreSQL store needs psycopg 3 and psycopg_pool: pip install "llm_fsm[postgres]"'
        ) from exc
    return psycopg


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    if "@" not in url or "://" not in url:
        return re.sub(r"password=\S*", "password=***", url)
    scheme, rest = url.split("://", 1)
    credentials, host = rest.rsplit("@", 1)
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user + ':***' if ':' in credentials else '***'}@{host}"
