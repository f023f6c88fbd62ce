"""The webhooks' outbox: a SQLite table of deliveries waiting, retrying or dead, and each conversation's cursor.

Why SQLite: a delivery is written here before any attempt, in the same transaction as the conversation's cursor
moves past its event, so a restart (or a crash) finds every event either delivered (its row deleted) or still
here; and processes of one host may share the file, since a delivery is claimed with a lease in an immediate
transaction before it is sent. A delivered row is deleted at once: the table holds only what is owed.

Every method is blocking; the dispatcher (``_webhooks``) calls them on the library's I/O pool.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from llm_fsm.errors import StoreError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL,
    url TEXT NOT NULL,
    tenant TEXT,
    conversation_id TEXT NOT NULL,
    body BLOB NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL,
    claimed_until REAL NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'pending',
    last_error TEXT,
    created_at REAL NOT NULL,
    failed_at REAL,
    UNIQUE (event_id, url)
);
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (status, next_at);
CREATE INDEX IF NOT EXISTS deliveries_heads ON deliveries (status, conversation_id, url, seq);
CREATE TABLE IF NOT EXISTS cursors (conversation_id TEXT PRIMARY KEY, cursor TEXT NOT NULL, version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_COLUMNS = "seq, event_id, url, tenant, conversation_id, body, attempts, created_at, last_error, failed_at"


@dataclass(frozen=True)
class Delivery:
    """One event owed to one URL."""

    seq: int
    event_id: str
    url: str
    tenant: str | None
    conversation_id: str
    body: bytes
    attempts: int
    created_at: float
    last_error: str | None
    failed_at: float | None


def _delivery(row: Sequence[object]) -> Delivery:
    seq, event_id, url, tenant, conversation_id, body, attempts, created_at, last_error, failed_at = row
    return Delivery(
        int(str(seq)),
        str(event_id),
        str(url),
        None if tenant is None else str(tenant),
        str(conversation_id),
        bytes(body) if isinstance(body, bytes | bytearray | memoryview) else str(body).encode(),
        int(str(attempts)),
        float(str(created_at)),
        None if last_error is None else str(last_error),
        None if failed_at is None else float(str(failed_at)),
    )


class Outbox:
    """The deliveries owed, in a SQLite file (``path``) or in memory (``None``: lost with the process)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._guard = threading.Lock()
        try:
            self._db = sqlite3.connect(path or ":memory:", isolation_level=None, check_same_thread=False, timeout=30)
            if path:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")  # WAL: a commit survives a process crash
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:  # a folder that is not there, a file that is no database: say which file
            raise StoreError(f"webhook outbox {path}: {exc}") from exc

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """An immediate transaction: other processes sharing the file wait, so a claim is never taken twice."""
        with self._guard:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._guard:
            self._db.close()

    # --- what the producer writes ---------------------------------------------------------------------------

    def cursor_of(self, conversation_id: str) -> str | None:
        with self._guard:
            row = self._db.execute(
                "SELECT cursor FROM cursors WHERE conversation_id = ?", (conversation_id,)
            ).fetchone()
        return None if row is None else str(row[0])

    def record(
        self,
        conversation_id: str,
        tenant: str | None,
        events: Iterable[tuple[str, bytes]],
        urls: Sequence[str],
        cursor: str,
        version: int,
    ) -> int:
        """Owe each ``(event_id, body)`` to every URL and move the conversation's cursor past them (read from its
        ``version``), atomically; an event already owed (the same id) is not owed twice, and a read older than the
        cursor's (a worker sharing the file recorded a newer one meanwhile) changes nothing. Returns the deliveries
        added."""
        now = time.time()
        added = 0
        with self._write() as db:
            stored = db.execute("SELECT version FROM cursors WHERE conversation_id = ?", (conversation_id,)).fetchone()
            if stored is not None and int(stored[0]) > version:
                return 0  # another worker read a newer version and owes these events already (or delivered them)
            for event_id, body in events:
                for url in urls:
                    cursor_row = db.execute(
                        "INSERT OR IGNORE INTO deliveries (event_id, url, tenant, conversation_id, body, next_at, "
                        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (event_id, url, tenant, conversation_id, body, now, now),
                    )
                    added += cursor_row.rowcount
            db.execute(
                "INSERT INTO cursors (conversation_id, cursor, version) VALUES (?, ?, ?) "
                "ON CONFLICT (conversation_id) DO UPDATE SET cursor = excluded.cursor, version = excluded.version",
                (conversation_id, cursor, version),
            )
        return added

    def versions(self, conversation_ids: Sequence[str]) -> dict[str, int]:
        """The version each conversation's cursor was read from (absent: never read), so a sweep reads again only
        the conversations saved since."""
        found: dict[str, int] = {}
        with self._guard:
            for start in range(0, len(conversation_ids), 500):
                chunk = list(conversation_ids[start : start + 500])
                marks = ", ".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT conversation_id, version FROM cursors WHERE conversation_id IN ({marks})", chunk
                ).fetchall()
                found.update({str(cid): int(version) for cid, version in rows})
        return found

    def forget(self, conversation_id: str) -> None:
        """Drop the cursor of a deleted conversation (what it still owes is delivered all the same)."""
        with self._write() as db:
            db.execute("DELETE FROM cursors WHERE conversation_id = ?", (conversation_id,))

    def meta(self, key: str) -> str | None:
        with self._guard:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # --- what the deliverer reads and writes ----------------------------------------------------------------

    def claim(self, limit: int, lease: float, now: float | None = None) -> list[Delivery]:
        """Up to ``limit`` deliveries due, oldest first, leased for ``lease`` seconds to the caller.

        Only the oldest pending delivery of each conversation and URL is ever due: a conversation's events reach a
        URL in order, and one whose delivery is retrying (or in flight) holds back its later events, not others'.
        """
        moment = time.time() if now is None else now
        with self._write() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM deliveries WHERE seq IN (SELECT MIN(seq) FROM deliveries "
                "WHERE status = 'pending' GROUP BY conversation_id, url) AND next_at <= ? AND claimed_until <= ? "
                "ORDER BY seq LIMIT ?",
                (moment, moment, limit),
            ).fetchall()
            db.executemany(
                "UPDATE deliveries SET claimed_until = ? WHERE seq = ?", [(moment + lease, row[0]) for row in rows]
            )
        return [_delivery(row) for row in rows]

    def delivered(self, seqs: Sequence[int]) -> None:
        """Forget deliveries their URL acknowledged (one transaction for a batch)."""
        with self._write() as db:
            db.executemany("DELETE FROM deliveries WHERE seq = ?", [(seq,) for seq in seqs])

    def failed(self, seq: int, attempts: int, error: str, retry_at: float | None) -> None:
        """Record a failed attempt: due again at ``retry_at``, or a dead letter when it is None."""
        now = time.time()
        with self._write() as db:
            db.execute(
                "UPDATE deliveries SET attempts = ?, last_error = ?, failed_at = ?, claimed_until = 0, "
                "next_at = ?, status = ? WHERE seq = ?",
                (attempts, error[:500], now, retry_at if retry_at is not None else now, _status(retry_at), seq),
            )

    def next_due(self) -> float | None:
        """When the earliest pending delivery is due (None: nothing is owed)."""
        with self._guard:
            row = self._db.execute(
                "SELECT MIN(MAX(next_at, claimed_until)) FROM deliveries WHERE status = 'pending'"
            ).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    # --- what operators read and do (every call scoped to a tenant) ------------------------------------------

    def dead_letters(self, tenant: str, limit: int, after: int = 0) -> list[Delivery]:
        with self._guard:
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM deliveries WHERE status = 'dead' AND tenant = ? AND seq > ? "
                "ORDER BY seq LIMIT ?",
                (tenant, after, limit),
            ).fetchall()
        return [_delivery(row) for row in rows]

    def redeliver(self, tenant: str, seq: int | None = None) -> int:
        """Make the tenant's dead letters (or the one ``seq``) due now, with a fresh count of attempts."""
        query = (
            "UPDATE deliveries SET status = 'pending', attempts = 0, next_at = ?, claimed_until = 0 "
            "WHERE status = 'dead' AND tenant = ?"
        )
        arguments: tuple[object, ...] = (time.time(), tenant)
        if seq is not None:
            query += " AND seq = ?"
            arguments = (*arguments, seq)
        with self._write() as db:
            return int(db.execute(query, arguments).rowcount)

    def counts(self, tenant: str | None = None) -> dict[str, int]:
        """Deliveries ``pending`` (waiting or retrying) and ``dead``, of one tenant or of all."""
        where, arguments = ("WHERE tenant = ?", (tenant,)) if tenant is not None else ("", ())
        with self._guard:
            rows = self._db.execute(
                f"SELECT status, COUNT(*) FROM deliveries {where} GROUP BY status", arguments
            ).fetchall()
        counted = {"pending": 0, "dead": 0}
        counted.update({str(status): int(count) for status, count in rows})
        return counted


def _status(retry_at: float | None) -> str:
    return "pending" if retry_at is not None else "dead"


__all__ = ["Delivery", "Outbox"]
