"""The store's operations as generators of the SQL statements they need: written once, without I/O, so a sync and
an asyncio connection drive the same code (``_drive`` and ``_adrive``)."""

from __future__ import annotations

import builtins
import logging
import time
import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import ConcurrentUpdateError, StoreError
from llm_fsm.stores._paging import ConversationPage, check_limit, cut, page_filter
from llm_fsm.stores._versions import version_not_found
from llm_fsm.stores.base import ConversationSummary, DueTimer, Retention
from llm_fsm.stores.codec import (
    SizeLimits,
    committed,
    decode,
    decode_message,
    decode_turn,
    encode,
    encode_message,
    escape_nul,
    for_turn,
    not_found,
    turns_after,
    unescape_nul,
    with_log,
)
from llm_fsm.stores.postgres._sql import SCHEMA_VERSION

if TYPE_CHECKING:
    import psycopg

_T = TypeVar("_T")

logger = logging.getLogger("llm_fsm.stores.postgres")


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


def _due(row: tuple[Any, ...]) -> tuple[float, str, str]:
    """A claimed row's place in the claim: earliest first (RETURNING keeps no order)."""
    return float(row[2]), str(row[0]), str(row[1])


def _unstorable(*ids: str | None) -> bool:
    """An id holding U+0000, which PostgreSQL's text cannot hold: no row has it, so the answer is known unasked
    (asked, the driver refuses the query: a caller's unknown id would be a store error instead of "not found")."""
    return any(value is not None and "\x00" in value for value in ids)


class _Operations:
    """What ``PostgresStore`` asks of the server, one generator per operation; ``PostgresStore`` runs them."""

    schema: str
    ttl: timedelta | None
    _limits: SizeLimits
    _q: dict[str, str]

    # --- operations -------------------------------------------------------------

    def _load(self, conversation_id: str, user_id: str | None, room_id: str | None) -> _Ops[FSMInstance]:
        if _unstorable(conversation_id, user_id, room_id):
            raise not_found(conversation_id)
        result = yield _Sql(self._q["load"], {"id": conversation_id, "user": user_id, "room": room_id})
        if not result.rows:
            raise not_found(conversation_id)
        record, turns, replies = result.rows[0]
        where = self._where(conversation_id)
        return with_log(
            decode(record, where=where),
            [decode_turn(t, where=f"{where} turns") for t in turns],
            [(unescape_nul(m), unescape_nul(r)) for m, r in (replies or [])],
        )

    def _load_for_turn(
        self, conversation_id: str, user_id: str | None, room_id: str | None, message_id: str | None
    ) -> _Ops[FSMInstance]:
        if _unstorable(conversation_id, user_id, room_id):
            raise not_found(conversation_id)
        stored_id = None if message_id is None else escape_nul(message_id)
        params = {"id": conversation_id, "user": user_id, "room": room_id, "message_id": stored_id}
        result = yield _Sql(self._q["load_for_turn"], params)
        if not result.rows:
            raise not_found(conversation_id)
        record, reply = result.rows[0]
        reply = None if reply is None else unescape_nul(reply)
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
            "message_ids": [escape_nul(message_id) for message_id, _ in encoded.replies],  # text holds no U+0000
            "replies": [escape_nul(reply) for _, reply in encoded.replies],
            "keep_ids": encoded.retention.message_ids - 1,
            "timer_ids": [timer.id for timer in instance.timers],
            "timer_due": [float(timer.due_at) for timer in instance.timers],
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
        if _unstorable(conversation_id, user_id, room_id):
            return False
        result = yield _Sql(self._q["delete"], {"id": conversation_id, "user": user_id, "room": room_id})
        return bool(result.rows) and bool(result.rows[0][0])  # an expired one is swept, but was not there

    def _list(self, user_id: str | None, room_id: str | None) -> _Ops[builtins.list[ConversationSummary]]:
        if _unstorable(user_id, room_id):
            return []
        if user_id is None and room_id is None:
            result = yield _Sql(self._q["list_all"])
        else:
            query = self._q["list"].replace("%(user_test)s", "IS NULL" if user_id is None else "= %(user)s")
            query = query.replace("%(room_test)s", "IS NULL" if room_id is None else "= %(room)s")
            result = yield _Sql(query, {"user": user_id, "room": room_id})
        return [ConversationSummary(*row) for row in result.rows]

    def _page(
        self, user_id: str | None, room_id: str | None, all_rooms: bool, limit: int | None, cursor: str | None
    ) -> _Ops[ConversationPage]:
        check_limit(limit)
        if _unstorable(user_id, room_id):
            return ConversationPage([], None)
        conditions, values = page_filter(user_id, room_id, all_rooms, cursor)
        params: dict[str, Any] = {f"p{n}": value for n, value in enumerate(values)}
        for n in range(len(values)):
            conditions = conditions.replace("?", f"%(p{n})s", 1)
        query = self._q["page"].replace("%(where)s", f" AND {conditions}" if conditions else "")
        if limit is not None:
            params["limit"] = limit + 1
        query = query.replace("%(limit)s", "" if limit is None else " LIMIT %(limit)s")
        result = yield _Sql(query, params)
        return cut([ConversationSummary(*row) for row in result.rows], limit)

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

    def _save_definition_version(self, version: str, document: str) -> _Ops[None]:
        """Checked by the caller (before any I/O); ON CONFLICT DO NOTHING keeps a stored version's text."""
        yield _Sql(self._q["save_version"], {"version": version, "document": escape_nul(document)})

    def _load_definition_version(self, version: str) -> _Ops[str]:
        result = yield _Sql(self._q["load_version"], {"version": version})
        if not result.rows:
            raise version_not_found(version)
        return unescape_nul(str(result.rows[0][0]))

    def _definition_versions(self) -> _Ops[builtins.list[str]]:
        result = yield _Sql(self._q["versions"])
        return sorted(str(version) for (version,) in result.rows)  # the server's collation may order otherwise

    def _claim_due_timers(self, now: float, limit: int, lease: float) -> _Ops[builtins.list[DueTimer]]:
        """One statement: the due entries no live claim holds, locked with ``FOR UPDATE SKIP LOCKED`` (a concurrent
        claimer skips them rather than waiting, and rechecks any it waited on), claimed until ``now + lease``."""
        if limit <= 0:
            return []
        token = uuid.uuid4().hex  # one per claim call: an entry is released by its key and this token together
        params = {"now": now, "until": now + lease, "limit": limit, "token": token}
        result = yield _Sql(self._q["claim_timers"], params)
        return [
            DueTimer(cid, timer_id, due_at, token, user_id, room_id)  # the owner: whom the firing worker loads it as
            for cid, timer_id, due_at, user_id, room_id in sorted(result.rows, key=_due)
        ]

    def _release_timer(self, timer: DueTimer) -> _Ops[None]:
        params = {"id": timer.conversation_id, "timer": timer.timer_id, "token": timer.token}
        yield _Sql(self._q["release_timer"], params)

    def _timer_count(self) -> _Ops[int]:
        result = yield _Sql(self._q["timer_count"])
        return int(result.rows[0][0])

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
        if version is not None and version < 4:  # records of an older layout may arm timers the table must index
            yield from self._backfill_timers()
        yield _Sql(
            f'CREATE TABLE IF NOT EXISTS "{self.schema}".schema_version (version integer NOT NULL,'
            " one boolean PRIMARY KEY DEFAULT true CHECK (one))"
        )
        yield _Sql(
            f'INSERT INTO "{self.schema}".schema_version (version) VALUES (%(v)s)'
            " ON CONFLICT (one) DO UPDATE SET version = excluded.version",
            {"v": SCHEMA_VERSION},
        )

    def _backfill_timers(self) -> _Ops[None]:
        arming = yield _Sql(self._q["arming"])
        for conversation_id, record in arming.rows:
            try:
                timers = decode(record, where=self._where(conversation_id)).timers
            except StoreError as exc:  # the conversation cannot be loaded either; its load will say so
                logger.warning("not indexing the timers of an undecodable record: %s", exc)
                continue
            params = {
                "id": conversation_id,
                "timer_ids": [timer.id for timer in timers],
                "timer_due": [float(timer.due_at) for timer in timers],
            }
            yield _Sql(self._q["backfill_timers"], params)

    def _where(self, conversation_id: str) -> str:
        return f"postgres {self.schema}.conversations[{conversation_id!r}]"
