"""The hot record and the turn log, on every store.

A turn reads and rewrites only the hot record; turn records and processed message ids (with their
replies) are appended to a log beside it and trimmed to the engine's retention. Seen through
``FSMManager`` nothing changes: explain shows the last 50 turns, a retried message id is answered
once for the last 100 ids, and a record stored before the split still loads and moves its turns
to the log on its next save.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._turn import EngineConfig
from llm_fsm.errors import StoreError, TurnNotFoundError
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.loading import load_fsm_definition
from llm_fsm.manager import FSMManager
from llm_fsm.stores import ConversationStore, open_store
from llm_fsm.stores.base import TurnLogStore
from llm_fsm.stores.files import FileStore, segment
from llm_fsm.stores.memory import MemoryStore
from llm_fsm.stores.postgres import PostgresStore
from llm_fsm.stores.redis import RedisStore, key_part
from llm_fsm.stores.sqlite import SQLiteStore

from .conftest import StoreFactory
from .factories import rich_instance

REPO = Path(__file__).resolve().parents[2]
GREETING = REPO / "definitions" / "simple_greeting.yaml"
BEFORE_THE_SPLIT = REPO / "tests" / "data" / "stores" / "record_before_the_split.json"
"""A conversation of 12 turns with message ids m1..m12 as llm_fsm 15a0e12 stored it: turns and ids inside."""

OWNER = {"user_id": "alice", "room_id": "room-1"}

FAST = {"sqlite": {"synchronous": "OFF"}, "files": {"fsync": False}}
"""Durability off where a test is about what is stored, not about surviving a power cut."""


def echo(request: Any) -> dict[str, Any]:
    return {"transition": {"target_state": "greeting", "context_update": {}}, "message": f"re: {request.user_message}"}


def manager(store: ConversationStore, config: EngineConfig | None = None) -> tuple[FSMManager, FunctionLLM]:
    llm = FunctionLLM(echo)
    loader = lambda fsm_id: load_fsm_definition(GREETING)  # noqa: E731 - the record names the definition by id
    return FSMManager(fsm_loader=loader, llm_interface=llm, store=store, config=config), llm


def talk(fsm: FSMManager, turns: range, conversation_id: str | None = None) -> str:
    """Start a conversation (unless given one) and send ``message i`` with id ``m<i>`` for each i of ``turns``."""
    if conversation_id is None:
        conversation_id, _ = fsm.start_conversation("simple_greeting", **OWNER)
    for i in turns:
        fsm.process_message(conversation_id, f"message {i}", f"m{i}", **OWNER)
    return conversation_id


def _fixed_times(record: str) -> str:
    """The record with every fraction written alike: times (a message's to the millisecond is 1 to 3 decimals
    long, 1795620753.6 vs .638; a trace event's or the record's own up to 17 digits) vary in length from one
    run to the next, which is no growth."""
    # (the SQLite store pads its record with spaces to a multiple of 512 bytes: padding is not content either)
    return re.sub(r"(?<=:)-?[0-9]+\.[0-9]+(?:[eE][-+]?[0-9]+)?", "0", record).rstrip()


def stored_record(store: ConversationStore, conversation_id: str) -> str:
    """The text the store keeps for the conversation's record, read behind its back."""
    if isinstance(store, SQLiteStore):
        with sqlite3.connect(store.path) as conn:
            (text,) = conn.execute(
                "SELECT record FROM conversations WHERE conversation_id = ?", (conversation_id,)
            ).fetchone()
        return str(text)
    if isinstance(store, RedisStore):
        return str(store._client.hget(_redis_key(store, conversation_id), "record").decode())
    if isinstance(store, FileStore):
        return _file(store, conversation_id).read_text(encoding="utf-8")
    if isinstance(store, PostgresStore):
        return str(
            _postgres(
                store,
                f'SELECT record FROM "{store.schema}".conversations WHERE conversation_id = %s',
                (conversation_id,),
            )[0][0]
        )
    assert isinstance(store, MemoryStore)
    return store._entries[conversation_id].record.model_dump_json()  # the object kept: every field shown


def _redis_key(store: RedisStore, conversation_id: str) -> str:
    return f"{store.prefix}:{key_part('alice')}:{key_part('room-1')}:{key_part(conversation_id)}"


def _postgres(store: PostgresStore, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run ``query`` on the store's database behind its back (autocommit); its rows, if it returns any."""
    import psycopg

    with psycopg.connect(store.url, autocommit=True) as conn:
        cursor = conn.execute(query.encode(), params)
        return cursor.fetchall() if cursor.description else []


def _file(store: FileStore, conversation_id: str, suffix: str = ".json") -> Path:
    return store.root / segment("alice") / segment("room-1") / f"{segment(conversation_id)}{suffix}"


@pytest.fixture
def fast_store(make_store: StoreFactory, store_kind: str) -> ConversationStore:
    return make_store(**FAST.get(store_kind, {}))


# --- the hot record ---------------------------------------------------------------------


def test_every_store_keeps_a_turn_log(store: ConversationStore) -> None:
    assert isinstance(store, TurnLogStore)


def test_the_hot_record_does_not_grow_with_the_conversation(fast_store: ConversationStore) -> None:
    fsm, _ = manager(fast_store)
    cid = talk(fsm, range(1, 151))
    at_150 = len(_fixed_times(stored_record(fast_store, cid)).encode())
    talk(fsm, range(151, 301), cid)
    at_300 = len(_fixed_times(stored_record(fast_store, cid)).encode())
    assert at_300 <= at_150 + 8  # the same number of digits in every counter and message: nothing per turn
    whole = fsm.get_instance(cid, **OWNER)
    assert (len(whole.turns), len(whole.processed_messages)) == (50, 100)
    assert len(whole.model_dump_json().encode()) > 5 * at_300  # what a turn no longer reads and rewrites


def test_the_hot_record_holds_no_turn_record_nor_reply_of_a_message_id(fast_store: ConversationStore) -> None:
    fsm, _ = manager(fast_store)
    cid = talk(fsm, range(1, 31))
    text = stored_record(fast_store, cid)
    data = json.loads(text)
    assert data.get("turns", []) == [] and data.get("processed_messages", {}) == {}
    # message ids live in the log; "message 3" (whose entry carried its id) left the transcript long ago
    assert '"m3"' not in text


# --- what FSMManager shows ------------------------------------------------------------------


def test_explain_shows_the_last_fifty_turns_and_no_older(fast_store: ConversationStore) -> None:
    fsm, _ = manager(fast_store)
    cid = talk(fsm, range(1, 61))
    assert fsm.explain(cid, **OWNER).index == 60
    assert fsm.explain(cid, 11, **OWNER).user_message == "message 11"
    assert fsm.explain(cid, -50, **OWNER).index == 11
    with pytest.raises(TurnNotFoundError):
        fsm.explain(cid, 10, **OWNER)
    with pytest.raises(TurnNotFoundError):
        fsm.explain(cid, -51, **OWNER)


def test_a_retried_message_id_is_answered_from_the_log_without_a_model_call(fast_store: ConversationStore) -> None:
    fsm, llm = manager(fast_store)
    cid = talk(fsm, range(1, 131))
    calls = len(llm.requests)
    assert fsm.process_message(cid, "anything", "m40", **OWNER) == "re: message 40"  # its turn record is long gone
    assert fsm.process_message(cid, "anything", "m130", **OWNER) == "re: message 130"
    assert len(llm.requests) == calls
    assert fsm.get_instance(cid, **OWNER).turn_count == 130


def test_a_message_id_older_than_the_last_hundred_is_a_new_message(fast_store: ConversationStore) -> None:
    fsm, llm = manager(fast_store)
    cid = talk(fsm, range(1, 131))
    calls = len(llm.requests)
    assert fsm.process_message(cid, "sent again", "m30", **OWNER) == "re: sent again"
    assert len(llm.requests) == calls + 1


def test_the_engines_retention_limits_hold_on_every_store(fast_store: ConversationStore) -> None:
    fsm, llm = manager(fast_store, EngineConfig(max_turn_records=5, max_processed_message_ids=7))
    cid = talk(fsm, range(1, 13))
    assert [fsm.explain(cid, i, **OWNER).index for i in (8, 12)] == [8, 12]
    with pytest.raises(TurnNotFoundError):
        fsm.explain(cid, 7, **OWNER)
    calls = len(llm.requests)
    assert fsm.process_message(cid, "again", "m6", **OWNER) == "re: message 6"
    assert len(llm.requests) == calls
    assert fsm.process_message(cid, "again", "m5", **OWNER) == "re: again"
    whole = fsm.get_instance(cid, **OWNER)
    assert (len(whole.turns), len(whole.processed_messages)) == (5, 7)


def test_the_async_api_reads_and_writes_the_same_log(fast_store: ConversationStore) -> None:
    fsm, llm = manager(fast_store, EngineConfig(max_turn_records=3))

    async def scenario() -> tuple[str, int]:
        cid, _ = await fsm.astart_conversation("simple_greeting", **OWNER)
        for i in range(1, 6):
            await fsm.aprocess_message(cid, f"message {i}", f"m{i}", **OWNER)
        calls = len(llm.requests)
        assert await fsm.aprocess_message(cid, "again", "m2", **OWNER) == "re: message 2"
        assert [(await fsm.aexplain(cid, i, **OWNER)).index for i in (3, 5)] == [3, 5]
        with pytest.raises(TurnNotFoundError):
            await fsm.aexplain(cid, 2, **OWNER)
        return cid, len(llm.requests) - calls

    cid, new_calls = asyncio.run(scenario())
    assert new_calls == 0
    assert [t.index for t in fsm.get_instance(cid, **OWNER).turns] == [3, 4, 5]


def test_load_for_turn_returns_the_hot_record_and_only_the_reply_asked_for(store: ConversationStore) -> None:
    instance = rich_instance()
    store.save(instance, expected_version=None)
    assert isinstance(store, TurnLogStore)
    hot = store.load_for_turn(instance.conversation_id, message_id="msg-3", **OWNER)
    assert hot.turns == [] and hot.processed_messages == {"msg-3": "reply 3: I found 6 options."}
    assert store.load_for_turn(instance.conversation_id, message_id="unknown", **OWNER).processed_messages == {}
    whole = store.load(instance.conversation_id, **OWNER)
    assert whole.model_dump(exclude={"turns", "processed_messages"}) == hot.model_dump(
        exclude={"turns", "processed_messages"}
    )


def test_a_conversation_recreated_after_delete_starts_with_an_empty_turn_log(store: ConversationStore) -> None:
    instance = rich_instance()
    store.save(instance, expected_version=None)
    store.delete(instance.conversation_id, **OWNER)
    reborn = FSMInstance(fsm_id="booking", current_state="start", conversation_id=instance.conversation_id, **OWNER)
    store.save(reborn, expected_version=None)
    whole = store.load(instance.conversation_id, **OWNER)
    assert whole.turns == [] and whole.processed_messages == {}


# --- a record stored before the split ----------------------------------------------------------------

V1_SCHEMA = """
CREATE TABLE conversations (
    conversation_id TEXT PRIMARY KEY, user_id TEXT, room_id TEXT, fsm_id TEXT NOT NULL, state TEXT NOT NULL,
    status TEXT NOT NULL, version INTEGER NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX conversations_by_owner ON conversations (user_id, room_id, updated_at);
CREATE INDEX conversations_by_age ON conversations (updated_at);
CREATE TABLE archive (
    conversation_id TEXT NOT NULL, seq INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;
PRAGMA user_version = 1;
"""
"""The SQLite schema of llm_fsm 15a0e12 (schema version 1)."""


def _plant_before_the_split(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> ConversationStore:
    """The old record written where and how 15a0e12's store of ``kind`` wrote it; the store opened on it."""
    text = BEFORE_THE_SPLIT.read_text(encoding="utf-8")
    old = FSMInstance.model_validate_json(text)
    if kind == "sqlite":
        path = tmp_path / "conversations.db"
        with sqlite3.connect(path) as conn:
            conn.executescript(V1_SCHEMA)
            conn.execute(
                "INSERT INTO conversations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (old.conversation_id, "alice", "room-1", old.fsm_id, old.current_state, old.status, old.version)
                + (old.created_at, old.updated_at, old.model_dump_json()),
            )
        return open_store(f"sqlite:///{path}")
    if kind == "redis":
        store = open_store(str(request.getfixturevalue("redis_url")))
        assert isinstance(store, RedisStore)
        key = _redis_key(store, old.conversation_id)
        store._client.hset(
            key,
            mapping={
                "version": str(old.version),
                "record": old.model_dump_json(),
                "updated_at": repr(old.updated_at),
                "fsm_id": old.fsm_id,
                "state": old.current_state,
                "status": old.status,
                "save_id": "0" * 32,
            },
        )
        store._client.zadd("llm_fsm:alice:room-1", {old.conversation_id: old.updated_at})
        store._client.zadd("llm_fsm:%all", {f"alice:room-1:{old.conversation_id}": old.updated_at})
        return store
    store = open_store(f"file://{tmp_path}/conversations")
    assert isinstance(store, FileStore)
    path = _file(store, old.conversation_id)
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    return store


PERSISTENT = ["sqlite", "redis", "files"]


@pytest.mark.parametrize("kind", PERSISTENT)
def test_a_record_stored_before_the_split_loads_whole(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = _plant_before_the_split(kind, tmp_path, request)
    old = FSMInstance.model_validate_json(BEFORE_THE_SPLIT.read_text(encoding="utf-8"))
    assert store.load(old.conversation_id, **OWNER).model_dump() == old.model_dump()
    fsm, llm = manager(store)
    assert fsm.explain(old.conversation_id, 3, **OWNER).user_message == "message 3"
    assert fsm.process_message(old.conversation_id, "again", "m5", **OWNER) == "re: message 5"
    assert llm.requests == []
    store.close()


@pytest.mark.parametrize("kind", PERSISTENT)
def test_a_record_stored_before_the_split_moves_its_turns_to_the_log_on_its_next_turn(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = _plant_before_the_split(kind, tmp_path, request)
    cid = FSMInstance.model_validate_json(BEFORE_THE_SPLIT.read_text(encoding="utf-8")).conversation_id
    fsm, llm = manager(store)
    talk(fsm, range(13, 14), cid)
    assert '"turns"' not in stored_record(store, cid)
    assert [t.index for t in fsm.get_instance(cid, **OWNER).turns] == list(range(1, 14))
    assert fsm.explain(cid, 1, **OWNER).user_message == "message 1"
    assert [fsm.process_message(cid, "again", f"m{i}", **OWNER) for i in (1, 13)] == ["re: message 1", "re: message 13"]
    assert len(llm.requests) == 1  # the one turn sent
    store.close()


# --- a save lands whole or not at all ---------------------------------------------------------------


class Boom(RuntimeError):
    """The failure injected into a save after its log entries were written."""


def _break_the_append(
    store: ConversationStore, conversation_id: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[type[Exception], Callable[[], object]]:
    """Make the store's next append to its turn log fail (after writing, where a store writes step by step).

    Returns the error the save then raises and what repairs the store.
    """
    if isinstance(store, SQLiteStore):
        real = SQLiteStore._log

        def log_then_fail(conn: Any, cid: str, encoded: Any) -> None:
            real(conn, cid, encoded)
            raise Boom("the disk is full")

        monkeypatch.setattr(SQLiteStore, "_log", staticmethod(log_then_fail))
        return Boom, monkeypatch.undo
    if isinstance(store, FileStore):
        real_log = FileStore._log

        def append_then_fail(self: FileStore, *args: Any) -> None:
            real_log(self, *args)
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(FileStore, "_log", append_then_fail)
        return StoreError, monkeypatch.undo
    if isinstance(store, RedisStore):  # a key of the wrong type (this short conversation has archived nothing yet):
        key = f"{_redis_key(store, conversation_id)}:archive"  # the script refuses before its first write
        assert not store._client.exists(key)
        store._client.set(key, "not a list")
        return StoreError, lambda: store._client.delete(key)
    if isinstance(store, PostgresStore):  # a trigger that fails the save's last write, after the others were made
        table = f'"{store.schema}".replies'
        _postgres(
            store,
            f'CREATE FUNCTION "{store.schema}".disk_full() RETURNS trigger LANGUAGE plpgsql AS'
            " $$ BEGIN RAISE EXCEPTION 'the disk is full'; END $$",
        )
        _postgres(
            store,
            f'CREATE TRIGGER disk_full BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION "{store.schema}".disk_full()',
        )
        return StoreError, lambda: _postgres(store, f"DROP TRIGGER disk_full ON {table}")
    assert isinstance(store, MemoryStore)

    def fail(*args: Any) -> None:
        raise Boom("out of memory")

    monkeypatch.setattr("llm_fsm.stores.memory.summary_of", fail)
    return Boom, monkeypatch.undo


def test_a_save_whose_log_append_fails_leaves_the_previous_turn_whole(
    fast_store: ConversationStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsm, _ = manager(fast_store)
    cid = talk(fsm, range(1, 4))
    before = fsm.get_instance(cid, **OWNER)
    error, repair = _break_the_append(fast_store, cid, monkeypatch)
    with pytest.raises(error):
        fsm.process_message(cid, "message 4", "m4", **OWNER)
    repair()
    after = fsm.get_instance(cid, **OWNER)
    assert after.model_dump() == before.model_dump()
    assert fsm.explain(cid, **OWNER).index == 3


def test_after_a_failed_save_the_next_one_logs_each_turn_once(
    fast_store: ConversationStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsm, _ = manager(fast_store)
    cid = talk(fsm, range(1, 4))
    error, repair = _break_the_append(fast_store, cid, monkeypatch)
    with pytest.raises(error):
        fsm.process_message(cid, "message 4", "m4", **OWNER)
    repair()
    talk(fsm, range(4, 6), cid)
    whole = fsm.get_instance(cid, **OWNER)
    assert [t.index for t in whole.turns] == [1, 2, 3, 4, 5]
    assert [t.user_message for t in whole.turns][-2:] == ["message 4", "message 5"]
    assert fsm.process_message(cid, "again", "m4", **OWNER) == "re: message 4"
