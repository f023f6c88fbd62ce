"""What the SQLite store promises beyond the shared contract: WAL, columns, locking, the default path."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from llm_fsm.errors import (
    ConcurrentUpdateError,
    StoreCorruptedError,
    StoreError,
    StoreUnavailableError,
)
from llm_fsm.stores import (
    SQLiteStore,
    default_sqlite_path,
    default_store_url,
    open_store,
)
from llm_fsm.stores.base import Retention
from llm_fsm.stores.sqlite import SCHEMA_VERSION

from .factories import plain_instance, rich_instance


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "conversations.db"


def test_the_database_runs_in_wal_mode_with_a_busy_timeout(db: Path) -> None:
    store = SQLiteStore(db, timeout=3)
    conn = store._connection()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 3000
    store.close()


def test_each_conversation_is_one_row_with_queryable_columns(db: Path) -> None:
    store = SQLiteStore(db)
    instance = rich_instance()
    store.save(instance, expected_version=None)
    store.save(instance, expected_version=1)
    store.close()
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT conversation_id, user_id, room_id, fsm_id, state, status, version, updated_at, record FROM conversations"
        ).fetchall()
    assert len(rows) == 1
    cid, user, room, fsm_id, state, status, version, updated_at, record = rows[0]
    assert (cid, user, room, fsm_id, state, status, version) == (
        instance.conversation_id,
        "alice",
        "room-1",
        "booking",
        "confirm",
        "active",
        2,
    )
    assert updated_at == pytest.approx(instance.updated_at)
    assert '"version":2' in record


def test_archived_messages_are_rows_of_the_archive_table_in_order(db: Path) -> None:
    store = SQLiteStore(db)
    instance = plain_instance()
    instance.archive_outbox = [{"user": "a"}, {"assistant": "b"}]
    store.save(instance, expected_version=None)
    instance.archive_outbox = [{"user": "c"}]
    store.save(instance, expected_version=1)
    store.close()
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT seq, message FROM archive ORDER BY seq").fetchall()
    assert rows == [(1, '{"user":"a"}'), (2, '{"assistant":"b"}'), (3, '{"user":"c"}')]


def test_two_store_objects_on_one_file_share_versions(db: Path) -> None:
    first, second = SQLiteStore(db), SQLiteStore(db)
    instance = plain_instance()
    first.save(instance, expected_version=None)
    seen = second.load(instance.conversation_id, user_id="alice", room_id="room-1")
    second.save(seen, expected_version=1)
    with pytest.raises(ConcurrentUpdateError):
        first.save(instance, expected_version=1)
    first.close()
    second.close()


def test_threads_sharing_one_store_never_both_win_a_version(db: Path) -> None:
    store = SQLiteStore(db)
    instance = plain_instance()
    store.save(instance, expected_version=None)
    outcomes: list[str] = []
    barrier = threading.Barrier(6)

    def worker() -> None:
        mine = instance.model_copy(deep=True)
        barrier.wait()
        try:
            store.save(mine, expected_version=1)
            outcomes.append("won")
        except ConcurrentUpdateError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["conflict"] * 5 + ["won"]
    store.close()


def test_a_writer_held_up_past_the_timeout_gets_unavailable_and_writes_nothing(db: Path) -> None:
    store = SQLiteStore(db, timeout=0.1)
    instance = plain_instance()
    store.save(instance, expected_version=None)
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        instance.current_state = "blocked"
        with pytest.raises(StoreUnavailableError):
            store.save(instance, expected_version=1)
        assert instance.version == 1
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert store.load(instance.conversation_id, user_id="alice", room_id="room-1").current_state == "start"
    store.close()


def test_an_undecodable_record_is_reported_as_corrupted(db: Path) -> None:
    store = SQLiteStore(db)
    instance = plain_instance()
    store.save(instance, expected_version=None)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE conversations SET record = '{broken'")
    with pytest.raises(StoreCorruptedError):
        store.load(instance.conversation_id, user_id="alice", room_id="room-1")
    store.close()


def test_a_file_that_is_not_a_database_is_reported_as_corrupted(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreCorruptedError):
        SQLiteStore(garbage)


def test_a_database_from_a_newer_llm_fsm_is_refused(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer"):
        SQLiteStore(db)


def test_an_unopenable_path_is_unavailable(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("x")
    with pytest.raises(StoreUnavailableError):
        SQLiteStore(blocked / "sub" / "conversations.db")


def test_a_closed_store_refuses_further_work(db: Path) -> None:
    store = SQLiteStore(db)
    store.close()
    with pytest.raises(StoreError):
        store.list()


def test_an_in_memory_database_works_through_open_store() -> None:
    store = open_store("sqlite:///:memory:")
    instance = plain_instance()
    store.save(instance, expected_version=None)
    assert store.load(instance.conversation_id, user_id="alice", room_id="room-1").version == 1
    store.close()


def test_a_forked_child_opens_its_own_connection(db: Path) -> None:
    store = SQLiteStore(db)
    instance = plain_instance()
    store.save(instance, expected_version=None)
    pid = os.fork()
    if pid == 0:  # child: use the inherited store object
        code = 0
        try:
            store.save(instance, expected_version=1)
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.load(instance.conversation_id, user_id="alice", room_id="room-1").version == 2
    store.close()


# --- the default location -------------------------------------------------------------


def test_the_default_path_follows_llm_fsm_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LLM_FSM_HOME", str(tmp_path / "home"))
    assert default_sqlite_path() == tmp_path / "home" / "conversations.db"


def test_the_default_path_is_under_the_xdg_data_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LLM_FSM_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_sqlite_path() == tmp_path / "data" / "llm_fsm" / "conversations.db"


def test_the_default_path_falls_back_to_local_share(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LLM_FSM_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_sqlite_path() == tmp_path / ".local" / "share" / "llm_fsm" / "conversations.db"


def test_open_store_without_a_url_opens_the_default_database(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LLM_FSM_HOME", str(tmp_path / "home"))
    store = open_store()
    assert isinstance(store, SQLiteStore)
    assert Path(store.path) == tmp_path / "home" / "conversations.db"
    assert open_store(default_store_url()).path == store.path  # type: ignore[attr-defined]
    store.close()


# --- pages written per turn ----------------------------------------------------------------------

V2_SCHEMA = """
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
CREATE TABLE turns (
    conversation_id TEXT NOT NULL, idx INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY (conversation_id, idx)
) WITHOUT ROWID;
CREATE TABLE replies (
    conversation_id TEXT NOT NULL, message_id TEXT NOT NULL, seq INTEGER NOT NULL, reply TEXT NOT NULL,
    PRIMARY KEY (conversation_id, message_id)
) WITHOUT ROWID;
CREATE INDEX replies_by_seq ON replies (conversation_id, seq);
PRAGMA user_version = 2;
"""
"""The SQLite schema of llm_fsm before the turn log became a rowid table (schema version 2)."""


def test_a_version_2_database_keeps_its_turn_log_when_opened(db: Path) -> None:
    instance = rich_instance(turns=6)
    with sqlite3.connect(db) as conn:
        conn.executescript(V2_SCHEMA)
        conn.execute(
            "INSERT INTO conversations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (instance.conversation_id, "alice", "room-1", instance.fsm_id, instance.current_state, "active", 1)
            + (instance.created_at, instance.updated_at, instance.model_dump_json(exclude={"turns"})),
        )
        conn.executemany(
            "INSERT INTO turns VALUES (?, ?, ?)",
            [(instance.conversation_id, turn.index, turn.model_dump_json()) for turn in instance.turns],
        )
    store = SQLiteStore(db)
    loaded = store.load(instance.conversation_id, user_id="alice", room_id="room-1")
    assert [t.model_dump() for t in loaded.turns] == [t.model_dump() for t in instance.turns]
    store.save(loaded, expected_version=1)
    store.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        (turns_sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'turns'").fetchone()
        owner = conn.execute("SELECT name FROM pragma_index_info('conversations_by_owner')").fetchall()
    assert "WITHOUT ROWID" not in turns_sql
    assert owner == [("user_id",), ("room_id",)]


def _wal_frames(store: SQLiteStore, turn: Callable[[], object], turns: int) -> float:
    """WAL frames (pages) written per call of ``turn``, checkpoints held off."""
    conn = store._connection()
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = Path(store.path + "-wal")
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    before = wal.stat().st_size
    for _ in range(turns):
        turn()
    return (wal.stat().st_size - before) / (page + 24) / turns


def test_a_turn_of_a_settled_conversation_writes_few_pages(db: Path) -> None:
    # The record is rewritten in place (its padded length does not change), the turn log's oldest row becomes its
    # newest, and user and room are not set, so their index is not rewritten.
    store = SQLiteStore(db, synchronous="OFF")
    instance = rich_instance(turns=60)
    instance.context.conversation.exchanges = instance.context.conversation.exchanges[-20:]
    store.save(instance, expected_version=None)

    def turn() -> None:
        current = store.load_for_turn(instance.conversation_id, user_id="alice", room_id="room-1")
        record = instance.turns[-1].model_copy(update={"index": current.turn_count + 100})
        current.turns = [record]
        current.turn_count += 1
        current.context.conversation.exchanges = current.context.conversation.exchanges[2:]
        current.context.conversation.add_user_message(f"message {current.turn_count:06d}")
        current.context.conversation.add_assistant_message(f"reply {current.turn_count:06d}")
        current.archive_outbox = [{"user": "old"}, {"assistant": "older"}]
        store.save(current, expected_version=current.version)

    for _ in range(60):  # past the 50 turn records kept: every save now replaces the oldest
        turn()
    assert _wal_frames(store, turn, 20) <= 7  # 5.4 here; 9.9 before
    assert len(store.load(instance.conversation_id, user_id="alice", room_id="room-1").turns) == 50
    store.close()


def test_a_lowered_retention_keeps_only_the_newest_turn_records(db: Path) -> None:
    store = SQLiteStore(db, synchronous="OFF")
    instance = rich_instance(turns=12)
    store.save(instance, expected_version=None, retention=Retention(turn_records=10))
    instance.turns = [instance.turns[-1].model_copy(update={"index": 12})]
    store.save(instance, expected_version=1, retention=Retention(turn_records=4))
    loaded = store.load(instance.conversation_id, user_id="alice", room_id="room-1")
    assert [t.index for t in loaded.turns] == [9, 10, 11, 12]
    store.close()
