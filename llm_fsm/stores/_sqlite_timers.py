"""The SQLite store's timer index (``TimerStore``): a ``timers`` table ordered by due time, mirrored by every save.

Why a table beside the record: the armed timers are in the hot record (``FSMInstance.timers``), but finding the due
ones there would read every record; the table answers "which are due" from an index on ``due_at``. It is written in
the save's own transaction, so it never disagrees with a committed record, and a save that loses its compare-and-set
rolls back with it. A claim is an IMMEDIATE transaction (the database's write lock), so two claimers, threads or
processes, never pick the same entry; the look for due entries is made first without the lock, so workers polling a
store with nothing due never queue on it.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
import uuid
from contextlib import AbstractContextManager

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.stores.base import DueTimer

TIMERS_SCHEMA = """
CREATE TABLE IF NOT EXISTS timers (
    conversation_id TEXT NOT NULL,
    timer_id TEXT NOT NULL,
    due_at REAL NOT NULL,
    token TEXT,
    claimed_until REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (conversation_id, timer_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS timers_by_due ON timers (due_at, conversation_id, timer_id)
"""
"""``token`` and ``claimed_until``: the claim holding the entry, if any (past ``claimed_until`` it holds nothing)."""

BACKFILL = (
    "INSERT OR IGNORE INTO timers (conversation_id, timer_id, due_at)"
    " SELECT c.conversation_id, json_extract(t.value, '$.id'), json_extract(t.value, '$.due_at')"
    " FROM conversations c, json_each(c.record, '$.timers') t WHERE json_valid(c.record)"
)
"""Index the timers that records of a database older than the table arm (run once, by the upgrade)."""

_DUE = (
    "SELECT t.conversation_id, t.timer_id, t.due_at, c.user_id, c.room_id FROM timers t"
    " JOIN conversations c ON c.conversation_id = t.conversation_id"
    " WHERE t.due_at <= ? AND t.claimed_until <= ? ORDER BY t.due_at, t.conversation_id, t.timer_id LIMIT ?"
)
"""The due entries no live claim holds, with their conversation's owner (whom the firing worker loads it as)."""


_HELD = "SELECT 1 FROM timers WHERE conversation_id = ? AND timer_id = ? AND token = ?"


def index_timers(conn: sqlite3.Connection, instance: FSMInstance) -> None:
    """Make the conversation's entries exactly its armed timers; inside the save's transaction.

    An entry kept with the same due time is not written at all (so it keeps its claim); one whose due time changed
    is a new, unclaimed entry.
    """
    cid = instance.conversation_id
    if not instance.timers:
        conn.execute("DELETE FROM timers WHERE conversation_id = ?", (cid,))
        return
    conn.execute(
        "DELETE FROM timers WHERE conversation_id = ? AND timer_id NOT IN (SELECT value FROM json_each(?))",
        (cid, json.dumps([timer.id for timer in instance.timers])),
    )
    conn.executemany(
        "INSERT INTO timers (conversation_id, timer_id, due_at) VALUES (?, ?, ?)"
        " ON CONFLICT (conversation_id, timer_id) DO UPDATE SET due_at = excluded.due_at, token = NULL,"
        " claimed_until = 0 WHERE due_at <> excluded.due_at",
        [(cid, timer.id, timer.due_at) for timer in instance.timers],
    )


class _SQLiteTimers:
    """``TimerStore`` for ``SQLiteStore`` (which provides the transactions)."""

    def _read(self, *, snapshot: bool = False) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError  # pragma: no cover - SQLiteStore's

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError  # pragma: no cover - SQLiteStore's

    def claim_due_timers(self, *, now: float, limit: int, lease: float) -> builtins.list[DueTimer]:
        if limit <= 0:
            return []
        with self._read() as conn:
            if conn.execute(_DUE, (now, now, 1)).fetchone() is None:
                return []
        with self._write() as conn:
            due = conn.execute(_DUE, (now, now, limit)).fetchall()
            claimed = [
                DueTimer(cid, timer_id, due_at, uuid.uuid4().hex, user_id, room_id)
                for cid, timer_id, due_at, user_id, room_id in due
            ]
            conn.executemany(
                "UPDATE timers SET token = ?, claimed_until = ? WHERE conversation_id = ? AND timer_id = ?",
                [(t.token, now + lease, t.conversation_id, t.timer_id) for t in claimed],
            )
        return claimed

    def release_timer(self, timer: DueTimer) -> None:
        key = (timer.conversation_id, timer.timer_id, timer.token)
        with self._read() as conn:  # the save that recorded a firing dropped the entry: no write lock for nothing
            if conn.execute(_HELD, key).fetchone() is None:
                return
        with self._write() as conn:
            conn.execute("DELETE FROM timers WHERE conversation_id = ? AND timer_id = ? AND token = ?", key)

    def timer_count(self) -> int:
        with self._read() as conn:
            (count,) = conn.execute("SELECT COUNT(*) FROM timers").fetchone()
        return int(count)


__all__ = ["BACKFILL", "TIMERS_SCHEMA", "index_timers"]
