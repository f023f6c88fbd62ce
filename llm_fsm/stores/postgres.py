"""PostgreSQL store: one database shared by many worker processes on many machines.

Layout (every table in one PostgreSQL schema, ``llm_fsm`` by default, created on first use)::

    schema_version  one row: the layout version these tables have (see ``SCHEMA_VERSION``)
    conversations   one row per conversation: owner, fsm, state, status, ``version`` (the compare-and-set
                    column), created/updated times, ``expires_at`` (NULL: never), ``save_id`` and the hot
                    record as JSON text
    archive         transcript messages archived beyond the stored window, by (conversation, seq)
    turns           the turn log: turn records by (conversation, index), trimmed to the save's retention
    replies         processed message ids with their reply, by (conversation, message id), with a seq

The log tables reference ``conversations`` with ``ON DELETE CASCADE``, so deleting or expiring a
conversation takes its archive and log with it and a conversation created again starts empty.

A save is ONE statement: data-modifying CTEs that compare-and-set the row
(``UPDATE ... WHERE conversation_id = ... AND version = ...``, or ``INSERT ... ON CONFLICT DO NOTHING``
for a new conversation) and append the archive and the turn log only when that row was written. One
statement is atomic on its own and costs one round trip; a server that dies in the middle leaves
nothing of it. Each save carries a random ``save_id``: when the connection drops after the server
committed, the retry finds its own ``save_id`` at the new version and reports success instead of
applying the turn twice or calling it a conflict (as the Redis store's script does).

Expiry: ``ttl_seconds`` (None, the default: never) sets ``expires_at = now() + ttl`` on every save, in
the server's clock; a conversation past it is not found, listed, loaded or saved over, and ``expire``
deletes it along with those idle longer than ``older_than``.

Connections come from a psycopg_pool ``ConnectionPool`` (sync) and, for the async twins, from
``psycopg.AsyncConnection``s of the running event loop (``_LoopPool``), made on first use in that loop and
closed with it, so an async turn makes no thread hop. Both drive the same operations: generators of SQL statements
(see ``_run`` and ``_arun``). A child process that inherits the store opens its own pool.

Errors: a server that cannot be reached, is shutting down or drops the connection raises
StoreUnavailableError (one retry on a fresh connection first, which a pool holding connections to a
restarted server needs); a version mismatch ConcurrentUpdateError; a record over the cap
RecordTooLargeError before anything is sent; a row that does not decode StoreCorruptedError; tables of
a newer layout than this code knows StoreError, before anything is written.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import os
import re
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import (
    ConcurrentUpdateError,
    StoreError,
    StoreUnavailableError,
)
from llm_fsm.stores.base import AsyncStoreMixin, ConversationSummary, Retention, close_in_loop
from llm_fsm.stores.codec import (
    DEFAULT_MAX_RECORD_BYTES,
    SizeLimits,
    committed,
    decode,
    decode_message,
    decode_turn,
    encode,
    encode_message,
    for_turn,
    not_found,
    turns_after,
    with_log,
)

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
"""The table layout this code reads and writes; a database whose ``schema_version`` is higher is refused."""

DEFAULT_SCHEMA = "llm_fsm"

_T = TypeVar("_T")

_WAIT_SLICE = 0.05
"""Seconds between two looks at whether the pool's last connection attempt failed (see ``_connection``)."""

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_CREATE = """
CREATE TABLE IF NOT EXISTS {s}.conversations (
    conversation_id text PRIMARY KEY,
    user_id text,
    room_id text,
    fsm_id text NOT NULL,
    state text NOT NULL,
    status text NOT NULL,
    version bigint NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    expires_at timestamptz,
    save_id text NOT NULL,
    record text NOT NULL
);
CREATE INDEX IF NOT EXISTS conversations_by_owner ON {s}.conversations (user_id, room_id, updated_at);
CREATE INDEX IF NOT EXISTS conversations_by_age ON {s}.conversations (updated_at);
CREATE INDEX IF NOT EXISTS conversations_by_expiry ON {s}.conversations (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS {s}.archive (
    conversation_id text NOT NULL REFERENCES {s}.conversations ON DELETE CASCADE,
    seq bigint NOT NULL,
    message text NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE TABLE IF NOT EXISTS {s}.turns (
    conversation_id text NOT NULL REFERENCES {s}.conversations ON DELETE CASCADE,
    idx bigint NOT NULL,
    record text NOT NULL,
    PRIMARY KEY (conversation_id, idx)
);
CREATE TABLE IF NOT EXISTS {s}.replies (
    conversation_id text NOT NULL REFERENCES {s}.conversations ON DELETE CASCADE,
    message_id text NOT NULL,
    seq bigint NOT NULL,
    reply text NOT NULL,
    PRIMARY KEY (conversation_id, message_id)
);
CREATE INDEX IF NOT EXISTS replies_by_seq ON {s}.replies (conversation_id, seq)
"""

_OWNER = "c.user_id IS NOT DISTINCT FROM %(user)s AND c.room_id IS NOT DISTINCT FROM %(room)s"
_ALIVE = "(c.expires_at IS NULL OR c.expires_at > now())"
_SUMMARY_COLUMNS = "conversation_id, fsm_id, user_id, room_id, state, status, version, updated_at"

# The log half of a save, shared by the create and the update statement: it runs only when ``cas`` (the CTE
# that wrote the row) returned it. Every subquery reads the statement's snapshot, which is the state the CAS
# compared against: a concurrent save that committed in between changed the version and failed the CAS.
# The trims cannot see the rows this statement inserts, so they count them in from the INSERTs' RETURNING.
_LOG = """,
archived AS (
    INSERT INTO {s}.archive (conversation_id, seq, message)
    SELECT cas.conversation_id,
           COALESCE((SELECT max(seq) FROM {s}.archive WHERE conversation_id = %(id)s), 0) + m.n, m.message
    FROM cas, unnest(%(archive)s::text[]) WITH ORDINALITY AS m(message, n)
),
logged AS (
    INSERT INTO {s}.turns (conversation_id, idx, record)
    SELECT cas.conversation_id, t.idx, t.record
    FROM cas, unnest(%(turn_idx)s::bigint[], %(turn_records)s::text[]) AS t(idx, record)
    WHERE NOT EXISTS (SELECT 1 FROM {s}.turns o WHERE o.conversation_id = %(id)s AND o.idx >= t.idx)
    RETURNING idx
),
trimmed AS (
    DELETE FROM {s}.turns
    WHERE conversation_id = %(id)s AND EXISTS (SELECT 1 FROM logged) AND idx < (
        SELECT k.idx FROM (SELECT idx FROM {s}.turns WHERE conversation_id = %(id)s UNION ALL SELECT idx FROM logged) k
        ORDER BY k.idx DESC OFFSET %(keep_turns)s LIMIT 1)
),
answered AS (
    INSERT INTO {s}.replies (conversation_id, message_id, seq, reply)
    SELECT cas.conversation_id, r.message_id,
           COALESCE((SELECT max(seq) FROM {s}.replies WHERE conversation_id = %(id)s), 0) + r.n, r.reply
    FROM cas, unnest(%(message_ids)s::text[], %(replies)s::text[]) WITH ORDINALITY AS r(message_id, reply, n)
    ON CONFLICT (conversation_id, message_id) DO NOTHING
    RETURNING seq
),
forgotten AS (
    DELETE FROM {s}.replies
    WHERE conversation_id = %(id)s AND EXISTS (SELECT 1 FROM answered) AND seq < (
        SELECT k.seq
        FROM (SELECT seq FROM {s}.replies WHERE conversation_id = %(id)s UNION ALL SELECT seq FROM answered) k
        ORDER BY k.seq DESC OFFSET %(keep_ids)s LIMIT 1)
)
SELECT count(*) FROM cas
"""

_COLUMNS = "user_id, room_id, fsm_id, state, status, version, created_at, updated_at, expires_at, save_id, record"
_VALUES = (
    "%(user)s, %(room)s, %(fsm_id)s, %(state)s, %(status)s, %(version)s, %(created_at)s, %(updated_at)s,"
    " now() + %(ttl)s::interval, %(save_id)s, %(record)s"
)

_CREATE_ROW = (
    "WITH cas AS (INSERT INTO {s}.conversations (conversation_id, " + _COLUMNS + ") VALUES (%(id)s, " + _VALUES + ")"
    " ON CONFLICT (conversation_id) DO NOTHING RETURNING conversation_id)" + _LOG
)
_UPDATE_ROW = (
    "WITH cas AS (UPDATE {s}.conversations c SET (" + _COLUMNS + ") = (" + _VALUES + ")"
    " WHERE c.conversation_id = %(id)s AND c.version = %(expected)s AND " + _OWNER + " AND " + _ALIVE + ""
    " RETURNING c.conversation_id)" + _LOG
)


@dataclass(frozen=True)
class _Sql:
    """One statement and its parameters; answered with a ``_Result``."""

    query: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Result:
    rowcount: int
    rows: builtins.list[tuple[Any, ...]]


_Ops = Generator[_Sql, _Result, _T]
"""A store operation: yields the statements it needs, receives each one's result, returns its own."""


class PostgresStore(AsyncStoreMixin):
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

    def expire(self, *, older_than: float) -> int:
        return self._run(lambda: self._expire(older_than))

    def transcript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        return self._run(lambda: self._transcript(conversation_id, user_id, room_id))

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

    async def aexpire(self, *, older_than: float) -> int:
        return await self._arun(lambda: self._expire(older_than))

    async def atranscript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        return await self._arun(lambda: self._transcript(conversation_id, user_id, room_id))

    def ping(self) -> bool:
        """Whether the server answers now (no exception; for health checks)."""
        try:
            return self._run(lambda: self._ping()) == 1
        except StoreError:
            return False

    # --- operations -------------------------------------------------------------

    def _load(self, conversation_id: str, user_id: str | None, room_id: str | None) -> _Ops[FSMInstance]:
        result = yield _Sql(self._q["load"], {"id": conversation_id, "user": user_id, "room": room_id})
        if not result.rows:
            raise not_found(conversation_id)
        record, turns, replies = result.rows[0]
        where = self._where(conversation_id)
        return with_log(
            decode(record, where=where),
            [decode_turn(t, where=f"{where} turns") for t in turns],
            [(m, r) for m, r in (replies or [])],
        )

    def _load_for_turn(
        self, conversation_id: str, user_id: str | None, room_id: str | None, message_id: str | None
    ) -> _Ops[FSMInstance]:
        params = {"id": conversation_id, "user": user_id, "room": room_id, "message_id": message_id}
        result = yield _Sql(self._q["load_for_turn"], params)
        if not result.rows:
            raise not_found(conversation_id)
        record, reply = result.rows[0]
        return for_turn(decode(record, where=self._where(conversation_id)), message_id, reply)

    def _prepare_save(
        self, instance: FSMInstance, expected_version: int | None, retention: Retention | None
    ) -> Callable[[], _Ops[int]]:
        """Encode now (a record over the cap never reaches the server); the statement runs per attempt."""
        encoded = encode(
            instance, expected_version=expected_version, limits=self._limits, split=True, retention=retention
        )
        turns = turns_after(encoded.turns, None)
        params: dict[str, Any] = {
            "id": instance.conversation_id,
            "user": instance.user_id,
            "room": instance.room_id,
            "fsm_id": instance.fsm_id,
            "state": instance.current_state,
            "status": instance.status,
            "version": encoded.version,
            "expected": expected_version,
            "created_at": float(instance.created_at),
            "updated_at": float(instance.updated_at),
            "ttl": self.ttl,
            "save_id": uuid.uuid4().hex,  # one per save() call, the same on its retries
            "record": encoded.record,
            "archive": [encode_message(m) for m in encoded.archive],
            "turn_idx": [index for index, _ in turns],
            "turn_records": [text for _, text in turns],
            "keep_turns": encoded.retention.turn_records - 1,
            "message_ids": [message_id for message_id, _ in encoded.replies],
            "replies": [reply for _, reply in encoded.replies],
            "keep_ids": encoded.retention.message_ids - 1,
        }

        def save() -> _Ops[int]:
            query = self._q["create" if expected_version is None else "update"]
            result = yield _Sql(query, params)
            if result.rows[0][0] == 1:
                return committed(instance, encoded)
            if expected_version is None:  # an expired leftover of the same id does not block a new conversation
                swept = yield _Sql(self._q["sweep_one"], params)
                if swept.rowcount:
                    result = yield _Sql(query, params)
                    if result.rows[0][0] == 1:
                        return committed(instance, encoded)
            current = yield _Sql(self._q["version"], params)
            if current.rows and current.rows[0] == (encoded.version, params["save_id"]):
                return committed(instance, encoded)  # our own save, committed before the connection dropped
            cid = instance.conversation_id
            found = f"at version {current.rows[0][0]}" if current.rows else "absent"
            if expected_version is None:
                raise ConcurrentUpdateError(f"conversation {cid!r} already exists")
            raise ConcurrentUpdateError(f"conversation {cid!r} is {found}, not at version {expected_version}")

        return save

    def _delete(self, conversation_id: str, user_id: str | None, room_id: str | None) -> _Ops[bool]:
        result = yield _Sql(self._q["delete"], {"id": conversation_id, "user": user_id, "room": room_id})
        return bool(result.rows) and bool(result.rows[0][0])  # an expired one is swept, but was not there

    def _list(self, user_id: str | None, room_id: str | None) -> _Ops[builtins.list[ConversationSummary]]:
        if user_id is None and room_id is None:
            result = yield _Sql(self._q["list_all"])
        else:
            query = self._q["list"].replace("%(user_test)s", "IS NULL" if user_id is None else "= %(user)s")
            query = query.replace("%(room_test)s", "IS NULL" if room_id is None else "= %(room)s")
            result = yield _Sql(query, {"user": user_id, "room": room_id})
        return [ConversationSummary(*row) for row in result.rows]

    def _expire(self, older_than: float) -> _Ops[int]:
        result = yield _Sql(self._q["expire"], {"cutoff": time.time() - older_than})
        return result.rowcount

    def _transcript(
        self, conversation_id: str, user_id: str | None, room_id: str | None
    ) -> _Ops[builtins.list[dict[str, Any]]]:
        result = yield _Sql(self._q["transcript"], {"id": conversation_id, "user": user_id, "room": room_id})
        if not result.rows:
            raise not_found(conversation_id)
        record, archived = result.rows[0]
        where = self._where(conversation_id)
        live = decode(record, where=where).context.conversation.exchanges
        return [decode_message(m, where=f"{where} archive") for m in archived] + [dict(m) for m in live]

    def _ping(self) -> _Ops[int]:
        result = yield _Sql("SELECT 1")
        return int(result.rows[0][0])

    def _migrate(self) -> _Ops[None]:
        """Create the schema and tables, or check they are of a layout this code knows; run in one transaction.

        The advisory lock makes processes that start together take turns, so two never create at once.
        """
        yield _Sql("SELECT pg_advisory_xact_lock(hashtext(%(key)s))", {"key": f"llm_fsm schema {self.schema}"})
        exists = yield _Sql("SELECT to_regclass(%(table)s) IS NOT NULL", {"table": f'"{self.schema}".schema_version'})
        version = None
        if exists.rows[0][0]:
            found = yield _Sql(f'SELECT max(version) FROM "{self.schema}".schema_version')
            version = found.rows[0][0]
        if version == SCHEMA_VERSION:
            return
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(
                f"postgres schema {self.schema!r} has table layout version {version}, newer than this llm_fsm"
                f" understands ({SCHEMA_VERSION}); upgrade llm_fsm"
            )
        yield _Sql(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
        for statement in self._q["create_tables"].split(";"):
            yield _Sql(statement)
        yield _Sql(
            f'CREATE TABLE IF NOT EXISTS "{self.schema}".schema_version (version integer NOT NULL,'
            " one boolean PRIMARY KEY DEFAULT true CHECK (one))"
        )
        yield _Sql(
            f'INSERT INTO "{self.schema}".schema_version (version) VALUES (%(v)s)'
            " ON CONFLICT (one) DO UPDATE SET version = excluded.version",
            {"v": SCHEMA_VERSION},
        )

    def _where(self, conversation_id: str) -> str:
        return f"postgres {self.schema}.conversations[{conversation_id!r}]"

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
                async with self._aerrors(), pools.connection() as conn:
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

    @asynccontextmanager
    async def _aerrors(self) -> AsyncIterator[None]:
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


def _drive(conn: psycopg.Connection[Any], operation: _Ops[_T]) -> _T:
    """Run an operation's statements on ``conn``, sending each result back in."""
    result: Any = None
    while True:
        try:
            sql = operation.send(result)
        except StopIteration as stop:
            value: _T = stop.value
            return value
        cursor = conn.execute(sql.query.encode(), sql.params or None)
        result = _Result(cursor.rowcount, cursor.fetchall() if cursor.description else [])


async def _adrive(conn: psycopg.AsyncConnection[Any], operation: _Ops[_T]) -> _T:
    result: Any = None
    while True:
        try:
            sql = operation.send(result)
        except StopIteration as stop:
            value: _T = stop.value
            return value
        cursor = await conn.execute(sql.query.encode(), sql.params or None)
        result = _Result(cursor.rowcount, await cursor.fetchall() if cursor.description else [])


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


_QUERIES = {
    "create_tables": _CREATE,
    "create": _CREATE_ROW,
    "update": _UPDATE_ROW,
    "sweep_one": "DELETE FROM {s}.conversations WHERE conversation_id = %(id)s AND expires_at <= now()",
    "version": "SELECT c.version, c.save_id FROM {s}.conversations c WHERE c.conversation_id = %(id)s AND "
    + _OWNER
    + " AND "
    + _ALIVE,
    "load": "SELECT c.record,"
    " ARRAY(SELECT t.record FROM {s}.turns t WHERE t.conversation_id = c.conversation_id ORDER BY t.idx),"
    " ARRAY(SELECT ARRAY[r.message_id, r.reply] FROM {s}.replies r WHERE r.conversation_id = c.conversation_id"
    " ORDER BY r.seq)"
    " FROM {s}.conversations c WHERE c.conversation_id = %(id)s AND " + _OWNER + " AND " + _ALIVE,
    "load_for_turn": "SELECT c.record, (SELECT r.reply FROM {s}.replies r WHERE r.conversation_id = c.conversation_id"
    " AND r.message_id = %(message_id)s) FROM {s}.conversations c WHERE c.conversation_id = %(id)s AND "
    + _OWNER
    + " AND "
    + _ALIVE,
    "transcript": "SELECT c.record,"
    " ARRAY(SELECT a.message FROM {s}.archive a WHERE a.conversation_id = c.conversation_id ORDER BY a.seq)"
    " FROM {s}.conversations c WHERE c.conversation_id = %(id)s AND " + _OWNER + " AND " + _ALIVE,
    "delete": "DELETE FROM {s}.conversations c WHERE c.conversation_id = %(id)s AND " + _OWNER + " RETURNING " + _ALIVE,
    "list_all": f"SELECT {_SUMMARY_COLUMNS} FROM {{s}}.conversations c WHERE {_ALIVE} ORDER BY updated_at DESC",
    "list": f"SELECT {_SUMMARY_COLUMNS} FROM {{s}}.conversations c"
    f" WHERE c.user_id %(user_test)s AND c.room_id %(room_test)s AND {_ALIVE} ORDER BY updated_at DESC",
    "expire": "DELETE FROM {s}.conversations WHERE updated_at < %(cutoff)s OR expires_at <= now()",
}


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


__all__ = ["DEFAULT_SCHEMA", "SCHEMA_VERSION", "PostgresStore"]
