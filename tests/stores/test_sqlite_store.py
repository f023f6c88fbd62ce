"""What the SQLite store promises beyond the shared contract: WAL, columns, locking, the default path."""

from __future__ import annotations

import os
import sqlite3
import threading
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
