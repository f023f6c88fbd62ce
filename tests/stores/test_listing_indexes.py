"""The SQL stores serve a page from an index, and a database made by an earlier version gets those indexes when a
store opens it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from llm_fsm.stores import SQLiteStore, open_store
from llm_fsm.stores._paging import page_filter
from llm_fsm.stores.postgres import PostgresStore

from .factories import plain_instance
from .test_postgres_store import sql

PAGE = "ORDER BY updated_at DESC, conversation_id DESC LIMIT 51"
CURSOR = "eyJ0IjoxLjUsImMiOiJ4In0"  # {"t": 1.5, "c": "x"}


def _as_version_3(db: Path) -> None:
    """What schema version 3 left: no listing index but the one on updated_at."""
    with sqlite3.connect(db) as conn:
        conn.executescript(
            "DROP INDEX conversations_by_recency; DROP INDEX conversations_by_user;"
            " CREATE INDEX conversations_by_age ON conversations (updated_at); PRAGMA user_version = 3;"
        )


def _sqlite_plan(db: Path, **scope: object) -> str:
    conditions, params = page_filter(**scope)  # type: ignore[arg-type]
    where = f" WHERE {conditions}" if conditions else ""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(f"EXPLAIN QUERY PLAN SELECT * FROM conversations{where} {PAGE}", params).fetchall()
    return " ".join(str(row[-1]) for row in rows)


def test_an_sqlite_file_of_version_3_gets_the_listing_indexes_on_open(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    SQLiteStore(db).close()
    _as_version_3(db)
    store = SQLiteStore(db)
    store.save(plain_instance(), expected_version=None)
    store.close()
    with sqlite3.connect(db) as conn:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"conversations_by_recency", "conversations_by_user"} <= names and "conversations_by_age" not in names


@pytest.mark.parametrize(
    ("scope", "index"),
    [
        ({"user_id": "alice", "room_id": None, "all_rooms": True}, "conversations_by_user"),
        ({"user_id": "alice", "room_id": "r", "all_rooms": False}, "conversations_by_user"),
        ({"user_id": None, "room_id": None, "all_rooms": False}, "conversations_by_recency"),
    ],
)
def test_an_sqlite_page_seeks_its_index_without_sorting(tmp_path: Path, scope: dict[str, object], index: str) -> None:
    db = tmp_path / "c.db"
    SQLiteStore(db).close()
    plan = _sqlite_plan(db, **scope, cursor=CURSOR)
    assert index in plan and "TEMP B-TREE" not in plan and "(updated_at,conversation_id)<" in plan


def test_a_postgres_schema_of_version_1_gets_the_listing_indexes_on_open(postgres_url: str) -> None:
    store = open_store(postgres_url)
    assert isinstance(store, PostgresStore)
    store.save(plain_instance(), expected_version=None)
    sql(
        store,
        "DROP INDEX {s}.conversations_by_recency; DROP INDEX {s}.conversations_by_user;"
        " DROP INDEX {s}.conversations_by_pair; UPDATE {s}.schema_version SET version = 1",
    )
    store.close()
    reopened = open_store(postgres_url)
    assert isinstance(reopened, PostgresStore)
    assert len(reopened.list_page(user_id="alice", all_rooms=True, limit=5)) == 1
    names = {row[0] for row in sql(reopened, "SELECT indexname FROM pg_indexes WHERE schemaname = %s", reopened.schema)}
    assert {"conversations_by_recency", "conversations_by_user", "conversations_by_pair"} <= names
    reopened.close()


def test_a_postgres_user_page_is_an_index_scan(postgres_url: str) -> None:
    store = open_store(postgres_url)
    assert isinstance(store, PostgresStore)
    store.save(plain_instance(), expected_version=None)
    with psycopg.connect(store.url, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        rows = conn.execute(
            f'EXPLAIN SELECT * FROM "{store.schema}".conversations WHERE user_id = %s'
            f" AND (updated_at, conversation_id) < (%s, %s) {PAGE}",
            ("alice", 1.5, "x"),
        ).fetchall()
    plan = " ".join(row[0] for row in rows)
    assert "conversations_by_user" in plan and "Sort" not in plan
    store.close()
