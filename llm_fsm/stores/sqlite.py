"""SQLite store: the embedded default, durable and safe for several processes on one file.

Why SQLite: it needs no server, survives a killed process (the write-ahead log
is either committed or rolled back on the next open), and its file locks let
several worker processes share one database. One row per conversation holds the
hot record as JSON plus the columns needed to list and expire without
decoding it; ``version`` is the compare-and-set column
(``UPDATE ... WHERE conversation_id=? AND version=?`` and check the row count).
Archived transcript messages, turn records (``turns``, keyed by turn index) and
processed message ids with their replies (``replies``) live in their own tables
and are written in the same transaction as the record, so a save archives and
logs exactly once or not at all, and trims the logs to its ``Retention``.
Definition versions (``definition_versions``: content hash → canonical JSON) belong to no conversation. Armed
timers are indexed by due time in ``timers``, written by the save too (``_sqlite_timers``).

One connection per store object, shared by its threads under a lock
(``check_same_thread=False``); a child process that inherits the object opens
its own connection on first use instead of sharing the parent's.
"""

from __future__ import annotations

import builtins
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import (
    ConcurrentUpdateError,
    StoreCorruptedError,
    StoreError,
    StoreUnavailableError,
)
from llm_fsm.stores._paging import ConversationPage, check_limit, cut, page_filter
from llm_fsm.stores._sqlite_timers import BACKFILL, TIMERS_SCHEMA, _SQLiteTimers, index_timers
from llm_fsm.stores._versions import checked_document, checked_version, version_not_found
from llm_fsm.stores.base import AsyncStoreMixin, ConversationSummary, Retention
from llm_fsm.stores.codec import (
    DEFAULT_MAX_RECORD_BYTES,
    Encoded,
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

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 6
"""1: conversations and archive; 2: the turn log (turns, replies). Opening a version-1 file adds the tables; its
records, which hold their turns, move them to the log on their next save. 3: fewer pages written per turn: ``turns``
is a rowid table (a turn record of about 1 KB spilled to an overflow page in a WITHOUT ROWID table, whose rows are
kept under a quarter of a page, so appending and trimming one cost four pages, not two) and the owner index leaves
out ``updated_at`` (every save rewrote it). Opening a version-2 file copies its turn log into the new table. 4: pages
from an index: listings are ordered by ``(updated_at, conversation_id)``, served by ``conversations_by_recency``
(everyone's, and ``expire``; it replaces ``conversations_by_age``) and ``conversations_by_user`` (a user's, in every
room or one: a room's page walks its user's entries), so a page costs its own rows whatever the table holds. A save
rewrites two index entries (``updated_at`` changes) where it rewrote one. Opening an older file builds them. 5: the
``definition_versions`` table (a version's text, once); opening an older file adds it, empty. 6: the ``timers``
table (armed timers by due time, ``TimerStore``); opening an older file adds it and indexes the timers its records
arm."""

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS conversations (
    conversation_id TEXT PRIMARY KEY,
    user_id TEXT,
    room_id TEXT,
    fsm_id TEXT NOT NULL,
    state TEXT NOT NULL,
    status TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS conversations_by_owner ON conversations (user_id, room_id);
CREATE INDEX IF NOT EXISTS conversations_by_recency ON conversations (updated_at, conversation_id);
CREATE INDEX IF NOT EXISTS conversations_by_user ON conversations (user_id, updated_at, conversation_id);
CREATE TABLE IF NOT EXISTS archive (
    conversation_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turns (
    conversation_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (conversation_id, idx)
);
CREATE TABLE IF NOT EXISTS replies (
    conversation_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    reply TEXT NOT NULL,
    PRIMARY KEY (conversation_id, message_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS replies_by_seq ON replies (conversation_id, seq);
CREATE TABLE IF NOT EXISTS definition_versions (
    version TEXT PRIMARY KEY,
    document TEXT NOT NULL
);
"""
    + TIMERS_SCHEMA
)

_LOGS = ("archive", "turns", "replies", "timers")
"""Tables whose rows belong to one conversation and go with it."""

_SUMMARY_COLUMNS = "conversation_id, fsm_id, user_id, room_id, state, status, version, updated_at"


def default_sqlite_path() -> Path:
    """Where the CLI keeps conversations: ``$LLM_FSM_HOME/conversations.db``, else the XDG data dir."""
    home = os.environ.get("LLM_FSM_HOME")
    if home:
        return Path(home).expanduser() / "conversations.db"
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(data) / "llm_fsm" / "conversations.db"


def _same_file(path: str, other: Path) -> bool:
    return os.path.abspath(Path(path).expanduser()) == os.path.abspath(other)


class SQLiteStore(_SQLiteTimers, AsyncStoreMixin):
    """Conversations in one SQLite file (or ``":memory:"``)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        timeout: float = 10.0,
        synchronous: str = "FULL",
        max_record_bytes: int | None = DEFAULT_MAX_RECORD_BYTES,
        max_context_bytes: int | None = None,
    ) -> None:
        """``timeout``: seconds a writer waits for another process's lock before StoreUnavailableError.

        ``synchronous`` (``sqlite:///path.db?synchronous=NORMAL``) is what a committed turn survives:

        - ``FULL`` (default): a power cut or an OS crash too. Every commit waits for one ``fdatasync`` of the
          write-ahead log, which is most of what a turn costs this store on a fast disk and nearly all of it on a
          slow one.
        - ``NORMAL``: a killed or crashed process (``kill -9``; the crash tests hold it to that), not a power cut
          or an OS crash, which can roll back the last turns saved before it, never corrupt the file. The log is
          synced only when it is checkpointed into the database. ``benchmarks/stores.py`` shows both.
        - ``OFF`` and ``EXTRA`` as SQLite defines them (OFF: tests only).
        """
        self.path = str(default_sqlite_path() if path is None else path)
        self._creates_directory = path is None or _same_file(self.path, default_sqlite_path())
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise StoreError(f"sqlite synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self._timeout = float(timeout)
        self._synchronous = synchronous.upper()
        self._limits = SizeLimits(max_record_bytes=max_record_bytes, max_context_bytes=max_context_bytes)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._closed = False
        with self._lock:
            self._connection()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    # --- protocol ---------------------------------------------------------------

    def load(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> FSMInstance:
        where = f"{self.path}:{conversation_id}"
        with self._read(snapshot=True) as conn:
            row = self._record(conn, conversation_id, user_id, room_id)
            turns = conn.execute(
                "SELECT record FROM turns WHERE conversation_id = ? ORDER BY idx", (conversation_id,)
            ).fetchall()
            replies = conn.execute(
                "SELECT message_id, reply FROM replies WHERE conversation_id = ? ORDER BY seq", (conversation_id,)
            ).fetchall()
        return with_log(
            decode(row[0], where=where), [decode_turn(t, where=where) for (t,) in turns], [(m, r) for m, r in replies]
        )

    def load_for_turn(
        self,
        conversation_id: str,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
    ) -> FSMInstance:
        reply: str | None = None
        with self._read(snapshot=message_id is not None) as conn:
            row = self._record(conn, conversation_id, user_id, room_id)
            if message_id is not None:
                found = conn.execute(
                    "SELECT reply FROM replies WHERE conversation_id = ? AND message_id = ?",
                    (conversation_id, message_id),
                ).fetchone()
                reply = None if found is None else found[0]
        return for_turn(decode(row[0], where=f"{self.path}:{conversation_id}"), message_id, reply)

    def save(self, instance: FSMInstance, *, expected_version: int | None, retention: Retention | None = None) -> int:
        encoded = encode(
            instance, expected_version=expected_version, limits=self._limits, split=True, retention=retention
        )
        cid = instance.conversation_id
        columns = (
            instance.user_id,
            instance.room_id,
            instance.fsm_id,
            instance.current_state,
            instance.status,
            encoded.version,
            instance.created_at,
            instance.updated_at,
            _padded(encoded.record),
        )
        with self._write() as conn:
            if expected_version is None:
                try:
                    conn.execute(
                        "INSERT INTO conversations (user_id, room_id, fsm_id, state, status, version, created_at,"
                        " updated_at, record, conversation_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (*columns, cid),
                    )
                except sqlite3.IntegrityError as exc:
                    raise ConcurrentUpdateError(f"conversation {cid!r} already exists") from exc
                for table in _LOGS:  # leftovers of a conversation deleted by an older version must not join this one
                    conn.execute(f"DELETE FROM {table} WHERE conversation_id = ?", (cid,))
            else:  # user and room are the row's already (the WHERE says so): not set, so their index is not rewritten
                cursor = conn.execute(
                    "UPDATE conversations SET fsm_id = ?, state = ?, status = ?,"
                    " version = ?, created_at = ?, updated_at = ?, record = ?"
                    " WHERE conversation_id = ? AND version = ? AND user_id IS ? AND room_id IS ?",
                    (*columns[2:], cid, expected_version, instance.user_id, instance.room_id),
                )
                if cursor.rowcount != 1:
                    raise ConcurrentUpdateError(self._conflict(conn, instance, expected_version))
            if encoded.archive:
                (last,) = conn.execute(
                    "SELECT COALESCE(MAX(seq), 0) FROM archive WHERE conversation_id = ?", (cid,)
                ).fetchone()
                conn.executemany(
                    "INSERT INTO archive (conversation_id, seq, message) VALUES (?, ?, ?)",
                    [(cid, last + i, encode_message(m)) for i, m in enumerate(encoded.archive, start=1)],
                )
            self._log(conn, cid, encoded)
            index_timers(conn, instance)
        return committed(instance, encoded)

    @staticmethod
    def _log(conn: sqlite3.Connection, cid: str, encoded: Encoded) -> None:
        """Append the save's new turn records and message ids, and trim both logs; inside the save's transaction."""
        keep = encoded.retention
        if encoded.turns:
            count, last = conn.execute(
                "SELECT COUNT(*), MAX(idx) FROM turns WHERE conversation_id = ?", (cid,)
            ).fetchone()
            for index, text in turns_after(encoded.turns, last):
                if count >= keep.turn_records:
                    # A full log's oldest row becomes the newest, rewritten where it lies: an insert at one end and
                    # a delete at the other rewrote (and rebalanced) about twice as many pages.
                    conn.execute(
                        "UPDATE turns SET idx = ?, record = ? WHERE conversation_id = ?"
                        " AND idx = (SELECT MIN(idx) FROM turns WHERE conversation_id = ?)",
                        (index, text, cid, cid),
                    )
                else:
                    conn.execute(
                        "INSERT INTO turns (conversation_id, idx, record) VALUES (?, ?, ?)", (cid, index, text)
                    )
                    count += 1
            if count > keep.turn_records:  # a save of many turns, or a retention lowered since the last save
                conn.execute(
                    "DELETE FROM turns WHERE conversation_id = ? AND idx < (SELECT idx FROM turns"
                    " WHERE conversation_id = ? ORDER BY idx DESC LIMIT 1 OFFSET ?)",
                    (cid, cid, keep.turn_records - 1),
                )
        if encoded.replies:
            (seq,) = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM replies WHERE conversation_id = ?", (cid,)
            ).fetchone()
            cursor = conn.executemany(
                "INSERT OR IGNORE INTO replies (conversation_id, message_id, seq, reply) VALUES (?, ?, ?, ?)",
                [(cid, message_id, seq + i, reply) for i, (message_id, reply) in enumerate(encoded.replies, start=1)],
            )
            if cursor.rowcount:
                conn.execute(
                    "DELETE FROM replies WHERE conversation_id = ? AND seq < (SELECT seq FROM replies"
                    " WHERE conversation_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)",
                    (cid, cid, keep.message_ids - 1),
                )

    def _record(
        self, conn: sqlite3.Connection, conversation_id: str, user_id: str | None, room_id: str | None
    ) -> tuple[str]:
        row: tuple[str] | None = conn.execute(
            "SELECT record FROM conversations WHERE conversation_id = ? AND user_id IS ? AND room_id IS ?",
            (conversation_id, user_id, room_id),
        ).fetchone()
        if row is None:
            raise not_found(conversation_id)
        return row

    def delete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        with self._write() as conn:
            cursor = conn.execute(
                "DELETE FROM conversations WHERE conversation_id = ? AND user_id IS ? AND room_id IS ?",
                (conversation_id, user_id, room_id),
            )
            if cursor.rowcount == 0:
                return False
            for table in _LOGS:
                conn.execute(f"DELETE FROM {table} WHERE conversation_id = ?", (conversation_id,))
            return True

    def list(self, *, user_id: str | None = None, room_id: str | None = None) -> list[ConversationSummary]:
        with self._read() as conn:
            if user_id is None and room_id is None:
                rows = conn.execute(f"SELECT {_SUMMARY_COLUMNS} FROM conversations ORDER BY updated_at DESC").fetchall()
            else:
                rows = conn.execute(
                    f"SELECT {_SUMMARY_COLUMNS} FROM conversations WHERE user_id IS ? AND room_id IS ?"
                    " ORDER BY updated_at DESC",
                    (user_id, room_id),
                ).fetchall()
        return [ConversationSummary(*row) for row in rows]

    def list_page(
        self,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        all_rooms: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ConversationPage:
        check_limit(limit)
        conditions, params = page_filter(user_id, room_id, all_rooms, cursor)
        where = f" WHERE {conditions}" if conditions else ""
        sql = f"SELECT {_SUMMARY_COLUMNS} FROM conversations{where} ORDER BY updated_at DESC, conversation_id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit + 1)
        with self._read() as conn:
            rows = conn.execute(sql, params).fetchall()
        return cut([ConversationSummary(*row) for row in rows], limit)

    def expire(self, *, older_than: float) -> int:
        cutoff = time.time() - older_than
        with self._write() as conn:
            for table in _LOGS:
                conn.execute(
                    f"DELETE FROM {table} WHERE conversation_id IN"
                    " (SELECT conversation_id FROM conversations WHERE updated_at < ?)",
                    (cutoff,),
                )
            return conn.execute("DELETE FROM conversations WHERE updated_at < ?", (cutoff,)).rowcount

    def transcript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        where = f"{self.path}:{conversation_id}"
        with self._read(snapshot=True) as conn:
            row = self._record(conn, conversation_id, user_id, room_id)
            archived = conn.execute(
                "SELECT message FROM archive WHERE conversation_id = ? ORDER BY seq", (conversation_id,)
            ).fetchall()
        live = decode(row[0], where=where).context.conversation.exchanges
        return [decode_message(m, where=where) for (m,) in archived] + [dict(m) for m in live]

    def save_definition_version(self, version: str, document: str) -> None:
        checked_document(version, document, self._limits)
        with self._read() as conn:  # a version stored already takes no write lock
            if conn.execute("SELECT 1 FROM definition_versions WHERE version = ?", (version,)).fetchone():
                return
        with self._write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO definition_versions (version, document) VALUES (?, ?)", (version, document)
            )

    def load_definition_version(self, version: str) -> str:
        with self._read() as conn:
            row = conn.execute(
                "SELECT document FROM definition_versions WHERE version = ?", (checked_version(version),)
            ).fetchone()
        if row is None:
            raise version_not_found(version)
        return str(row[0])

    def definition_versions(self) -> builtins.list[str]:
        with self._read() as conn:
            return [v for (v,) in conn.execute("SELECT version FROM definition_versions ORDER BY version")]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    # --- plumbing ---------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """The live connection, opened on first use and again in a forked child."""
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        self._pid = os.getpid()
        self._conn = None  # a connection inherited through fork is never touched
        try:
            if self.path != ":memory:":
                self._check_directory()
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            if self.path != ":memory:":
                self._enable_wal(conn)
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            self._migrate(conn)
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc
        except OSError as exc:
            raise StoreUnavailableError(f"{self.path}: cannot open the conversation database: {exc}") from exc
        self._conn = conn
        return conn

    def _check_directory(self) -> None:
        """Create the default location's directory; refuse any other missing one.

        Why: a path that names a directory that is not there is most often a misread URL, and creating it
        quietly put ``/conversations.db``'s kin at the filesystem's root when run as root (issue 21). The
        default location is ours to make, so a first ``llm-fsm chat`` just works.
        """
        parent = Path(self.path).expanduser().parent
        if self._creates_directory:
            parent.mkdir(parents=True, exist_ok=True)
        elif not parent.is_dir():
            raise StoreUnavailableError(
                f"{self.path}: the directory {parent} does not exist; create it first, or name a file in a "
                "directory that exists (sqlite:///rel.db is relative to the working directory, "
                "sqlite:////abs/path.db absolute)"
            )

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        """WAL lets readers and one writer work at once; switching needs a moment alone with the file."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
                if str(mode).lower() != "wal":
                    logger.warning("%s: SQLite refused WAL mode (journal_mode=%s)", self.path, mode)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Create the tables once; an up-to-date database is opened without taking the write lock."""
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if version == SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: database schema version {version} is newer than this llm_fsm understands"
                    f" ({SCHEMA_VERSION}); upgrade llm_fsm"
                )
            if version == SCHEMA_VERSION:  # another process migrated it while this one waited for the lock
                conn.execute("COMMIT")
                return
            if version == 2:  # the WITHOUT ROWID turn log is copied into the rowid table below
                conn.execute("ALTER TABLE turns RENAME TO turns_v2")
            conn.execute("DROP INDEX IF EXISTS conversations_by_owner")  # versions 1 and 2 had updated_at in it
            conn.execute("DROP INDEX IF EXISTS conversations_by_age")  # versions 1 to 3; conversations_by_recency now
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            if version == 2:
                conn.execute(
                    "INSERT INTO turns (conversation_id, idx, record) SELECT conversation_id, idx, record FROM turns_v2"
                )
                conn.execute("DROP TABLE turns_v2")
            conn.execute(BACKFILL)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: the write lock is taken up front, so the CAS check and the write cannot
        interleave."""
        with self._lock:
            try:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _translate(exc, self.path) from exc
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                with suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise _translate(exc, self.path) from exc
                raise

    @contextmanager
    def _read(self, *, snapshot: bool = False) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                conn = self._connection()
                if snapshot:
                    conn.execute("BEGIN")
            except sqlite3.Error as exc:
                raise _translate(exc, self.path) from exc
            try:
                yield conn
            except sqlite3.Error as exc:
                raise _translate(exc, self.path) from exc
            finally:
                if snapshot:
                    with suppress(sqlite3.Error):
                        conn.execute("COMMIT")

    @staticmethod
    def _conflict(conn: sqlite3.Connection, instance: FSMInstance, expected_version: int) -> str:
        row = conn.execute(
            "SELECT version FROM conversations WHERE conversation_id = ? AND user_id IS ? AND room_id IS ?",
            (instance.conversation_id, instance.user_id, instance.room_id),
        ).fetchone()
        if row is None:
            return f"conversation {instance.conversation_id!r} expected at version {expected_version} but absent"
        return f"conversation {instance.conversation_id!r} is at version {row[0]}, not {expected_version}"


RECORD_PADDING = 512
"""The record column is padded with spaces to a multiple of this many bytes (JSON allows trailing whitespace).

SQLite rewrites a row whose new content is exactly as long as the old in place, overflow pages included; any
other length frees the row's overflow pages and takes new ones, which also rewrites the free-list page and the
database header. The hot record of a settled conversation changes by a few bytes a turn, so padded it keeps its
length for many turns: two fewer pages written per save, at the cost of 256 bytes per row on average."""


def _padded(record: str) -> str:
    size = len(record.encode("utf-8")) if not record.isascii() else len(record)
    return record + " " * (-size % RECORD_PADDING)


def _translate(exc: sqlite3.Error, path: str) -> StoreError:
    """SQLite's errors, sorted into what a caller can act on."""
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and (
        "locked" in text or "busy" in text or "unable to open" in text or "disk I/O" in text
    ):
        return StoreUnavailableError(f"{path}: {text}")
    if isinstance(exc, sqlite3.DatabaseError) and ("not a database" in text or "malformed" in text):
        return StoreCorruptedError(f"{path}: {text}")
    return StoreError(f"{path}: {type(exc).__name__}: {text}")


__all__ = ["SCHEMA_VERSION", "SQLiteStore", "default_sqlite_path"]
