"""Every store keeps definition versions by content hash: one copy per version, whatever the number of
conversations, so a conversation can always be loaded with the definition it runs on (issue 23).

Run against memory, SQLite, a real Redis, files and a real PostgreSQL, like the rest of the conformance suite.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis

from llm_fsm.errors import DefinitionVersionNotFoundError, RecordTooLargeError, StoreError, StoreUnavailableError
from llm_fsm.stores import ConversationStore, open_store
from llm_fsm.stores.base import DefinitionVersionStore
from llm_fsm.stores.files import FileStore
from llm_fsm.stores.memory import MemoryStore
from llm_fsm.stores.postgres import PostgresStore
from llm_fsm.stores.redis import FallbackStore, RedisStore
from llm_fsm.stores.sqlite import SCHEMA_VERSION, SQLiteStore

from .conftest import StoreFactory
from .factories import plain_instance
from .postgres_server import free_port
from .test_postgres_store import sql


def document(name: str = "booking", **extra: Any) -> str:
    """A definition's canonical JSON text (sorted keys, no spaces), as ``FSMDefinition.content_hash`` reads it."""
    import json

    return json.dumps({"name": name, "initial_state": "start", **extra}, sort_keys=True, separators=(",", ":"))


def version_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


V1_TEXT = document()
V1 = version_of(V1_TEXT)
V2_TEXT = document("booking", description="édition 2 ✈")
V2 = version_of(V2_TEXT)


def versions(store: ConversationStore) -> Any:
    assert isinstance(store, DefinitionVersionStore)
    return store


# --- the contract, on every store --------------------------------------------------------------


def test_every_store_is_a_definition_version_store(store: ConversationStore) -> None:
    assert isinstance(store, DefinitionVersionStore)


def test_a_saved_version_loads_back_as_the_same_text(store: ConversationStore) -> None:
    versions(store).save_definition_version(V2, V2_TEXT)
    assert versions(store).load_definition_version(V2) == V2_TEXT


def test_saving_a_version_again_keeps_the_first_text(store: ConversationStore) -> None:
    versions(store).save_definition_version(V1, V1_TEXT)
    versions(store).save_definition_version(V1, "a different text under the same version")
    assert versions(store).load_definition_version(V1) == V1_TEXT


def test_an_unknown_version_is_not_found(store: ConversationStore) -> None:
    versions(store).save_definition_version(V1, V1_TEXT)
    with pytest.raises(DefinitionVersionNotFoundError) as caught:
        versions(store).load_definition_version(V2)
    assert V2 in str(caught.value)
    assert isinstance(caught.value, StoreError) and isinstance(caught.value, LookupError)


def test_the_listing_is_every_stored_version_sorted(store: ConversationStore) -> None:
    assert versions(store).definition_versions() == []
    for version, text in ((V2, V2_TEXT), (V1, V1_TEXT), (V2, V2_TEXT)):
        versions(store).save_definition_version(version, text)
    assert versions(store).definition_versions() == sorted([V1, V2])


@pytest.mark.parametrize("bad", ["", "abc", "ABCDEF0123456789", "0123456789abcdeg", "a" * 65, "../../etc/passwd1"])
def test_a_version_that_is_not_8_to_64_lowercase_hex_is_refused(store: ConversationStore, bad: str) -> None:
    with pytest.raises(ValueError):
        versions(store).save_definition_version(bad, V1_TEXT)
    with pytest.raises(ValueError):
        versions(store).load_definition_version(bad)
    assert versions(store).definition_versions() == []


@pytest.mark.parametrize("length", [8, 64])
def test_versions_of_8_and_64_hex_digits_are_taken(store: ConversationStore, length: int) -> None:
    version = hashlib.sha256(V1_TEXT.encode()).hexdigest()[:length]
    versions(store).save_definition_version(version, V1_TEXT)
    assert versions(store).load_definition_version(version) == V1_TEXT


def test_a_large_document_and_one_with_nul_round_trip(store: ConversationStore) -> None:
    large = document(states={f"s{n}": {"purpose": "ask ✈ " * 20} for n in range(2000)})  # ~300 KB
    odd = document(note="before \x00 after")
    for text in (large, odd):
        versions(store).save_definition_version(version_of(text), text)
        assert versions(store).load_definition_version(version_of(text)) == text


def test_a_document_over_the_record_cap_is_refused_and_nothing_is_written(make_store: StoreFactory) -> None:
    store = versions(make_store(max_record_bytes=1000))
    text = document(description="x" * 1000)
    with pytest.raises(RecordTooLargeError):
        store.save_definition_version(version_of(text), text)
    assert store.definition_versions() == []


def test_deleting_and_expiring_conversations_keeps_the_versions(store: ConversationStore) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)
    versions(store).save_definition_version(V1, V1_TEXT)
    store.delete(instance.conversation_id, user_id="alice", room_id="room-1")
    store.save(plain_instance(updated_at=1.0), expected_version=None)
    assert store.expire(older_than=60) == 1
    assert versions(store).load_definition_version(V1) == V1_TEXT


def test_the_async_twins_do_what_the_sync_methods_do(store: ConversationStore) -> None:
    async def scenario() -> None:
        live = versions(store)
        await live.asave_definition_version(V1, V1_TEXT)
        await live.asave_definition_version(V1, "not this")
        assert await live.aload_definition_version(V1) == V1_TEXT
        assert await live.adefinition_versions() == [V1]
        with pytest.raises(DefinitionVersionNotFoundError):
            await live.aload_definition_version(V2)
        with pytest.raises(ValueError):
            await live.asave_definition_version("nothex!!", V1_TEXT)

    asyncio.run(scenario())
    assert versions(store).load_definition_version(V1) == V1_TEXT


def test_a_version_is_stored_once_whatever_the_number_of_saves(
    store: ConversationStore, store_kind: str, tmp_path: Path
) -> None:
    for _ in range(5):
        versions(store).save_definition_version(V1, V1_TEXT)
    versions(store).save_definition_version(V2, V2_TEXT)
    assert copies(store, store_kind, tmp_path) == {V1: 1, V2: 1}


def test_workers_saving_one_version_at_once_store_it_once(
    store: ConversationStore, store_kind: str, tmp_path: Path
) -> None:
    texts = [V1_TEXT] * 8

    def save(text: str) -> None:
        versions(store).save_definition_version(V1, text)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(save, texts))
    assert copies(store, store_kind, tmp_path) == {V1: 1}
    assert versions(store).load_definition_version(V1) == V1_TEXT


def copies(store: ConversationStore, kind: str, tmp_path: Path) -> dict[str, int]:
    """How many stored copies each version has, counted in the backend itself (rows, keys, files)."""
    counted: dict[str, int] = {}
    if kind == "memory":
        assert isinstance(store, MemoryStore)
        return dict.fromkeys(store._definitions, 1)
    if kind == "sqlite":
        assert isinstance(store, SQLiteStore)
        with sqlite3.connect(store.path) as conn:
            rows = conn.execute("SELECT version, count(*) FROM definition_versions GROUP BY version").fetchall()
        return dict(rows)
    if kind == "postgres":
        assert isinstance(store, PostgresStore)
        return dict(sql(store, "SELECT version, count(*) FROM {s}.definition_versions GROUP BY version"))
    if kind == "files":
        assert isinstance(store, FileStore)
        for path in store.root.rglob("*"):
            if path.is_file() and path.name.endswith(".json") and path.stem in (V1, V2):
                counted[path.stem] = counted.get(path.stem, 0) + 1
        return counted
    assert isinstance(store, RedisStore)
    client = redis.Redis.from_url(store.url)
    for key in client.scan_iter(match="*"):
        text = key.decode()
        for version in (V1, V2):
            if text.endswith(version):
                assert client.type(key) == b"string", text
                counted[version] = counted.get(version, 0) + 1
    client.close()
    return counted


# --- where versions live -------------------------------------------------------------------------


def test_a_sqlite_file_of_the_previous_layout_gains_the_versions_table(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    store = SQLiteStore(db)
    store.save(plain_instance(), expected_version=None)
    store.close()
    with sqlite3.connect(db) as conn:
        conn.executescript("DROP TABLE definition_versions; PRAGMA user_version = 4;")
    reopened = SQLiteStore(db)
    reopened.save_definition_version(V1, V1_TEXT)
    assert reopened.load_definition_version(V1) == V1_TEXT
    assert len(reopened.list()) == 1
    reopened.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


def test_a_postgres_schema_of_the_previous_layout_gains_the_versions_table(postgres_url: str) -> None:
    store = open_store(postgres_url)
    assert isinstance(store, PostgresStore)
    store.save(plain_instance(), expected_version=None)
    sql(store, "DROP TABLE {s}.definition_versions; UPDATE {s}.schema_version SET version = 2")
    store.close()
    reopened = open_store(postgres_url)
    assert isinstance(reopened, PostgresStore)
    reopened.save_definition_version(V1, V1_TEXT)
    assert reopened.load_definition_version(V1) == V1_TEXT
    assert len(reopened.list()) == 1
    reopened.close()


def test_a_file_store_keeps_a_version_as_its_document_in_a_file_no_user_directory_can_be(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "c")
    store.save(plain_instance(user_id="versions"), expected_version=None)
    store.save_definition_version(V1, V1_TEXT)
    files = [p for p in (tmp_path / "c").rglob("*") if p.is_file() and V1 in p.name]
    assert [p.read_text(encoding="utf-8") for p in files] == [V1_TEXT]
    assert [s.user_id for s in store.list()] == ["versions"]  # the versions' folder is listed as no one's
    assert not list(files[0].parent.glob("*.tmp"))


def test_a_redis_version_key_never_expires(redis_url: str) -> None:
    store = open_store(redis_url, ttl_seconds=60)
    assert isinstance(store, RedisStore)
    store.save(plain_instance(), expected_version=None)
    store.save_definition_version(V1, V1_TEXT)
    client = redis.Redis.from_url(redis_url)
    keys = [k for k in client.scan_iter(match="*") if k.decode().endswith(V1)]
    assert [client.pttl(k) for k in keys] == [-1]
    client.close()
    store.close()


# --- unavailable backends -------------------------------------------------------------------------


def _unreachable(kind: str) -> RedisStore | PostgresStore:
    if kind == "redis":
        return RedisStore(f"redis://127.0.0.1:{free_port()}/0", connect_timeout=0.5)
    return PostgresStore(f"postgresql://nobody@127.0.0.1:{free_port()}/postgres", connect_timeout=1)


@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_an_unreachable_backend_raises_unavailable_for_every_version_operation(kind: str) -> None:
    store = _unreachable(kind)
    for call in (
        lambda: store.save_definition_version(V1, V1_TEXT),
        lambda: store.load_definition_version(V1),
        lambda: store.definition_versions(),
        lambda: asyncio.run(store.aload_definition_version(V1)),
    ):
        with pytest.raises(StoreUnavailableError):
            call()
    store.close()


def test_with_fallback_a_version_saved_while_redis_is_down_is_kept_in_memory() -> None:
    store = open_store(f"redis://127.0.0.1:{free_port()}/0?fallback_to_memory=true", connect_timeout=0.5)
    assert isinstance(store, FallbackStore)
    store.save_definition_version(V1, V1_TEXT)
    assert store.load_definition_version(V1) == V1_TEXT
    assert store.definition_versions() == [V1]
    assert asyncio.run(store.aload_definition_version(V1)) == V1_TEXT
    store.close()


def test_with_fallback_a_version_in_redis_is_found_there(redis_url: str) -> None:
    store = open_store(f"{redis_url}?fallback_to_memory=true")
    assert isinstance(store, FallbackStore)
    store.save_definition_version(V1, V1_TEXT)
    assert store.primary.load_definition_version(V1) == V1_TEXT
    assert store.fallback.definition_versions() == []
    with pytest.raises(DefinitionVersionNotFoundError):
        store.load_definition_version(V2)
    store.close()
