"""The Redis store's listing indexes: bounded by the conversations alive, and built for a database of an earlier
version. Against a real redis-server; the client's clock is moved rather than waited for."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from llm_fsm.stores.redis import FallbackStore, RedisStore
from llm_fsm.stores.redis._keys import EXPIRY_GRACE_SECONDS

from .factories import plain_instance


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    opened = redis.Redis.from_url(redis_url)
    yield opened
    opened.close()


def _later(store: RedisStore, seconds: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on the store's clock reads ``seconds`` ahead of the real one."""
    monkeypatch.setattr(store, "_clock", lambda: time.time() + seconds)


def test_a_conversation_expired_by_ttl_leaves_every_index_at_the_next_save(
    redis_url: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RedisStore(redis_url, ttl_seconds=1)
    gone = plain_instance()
    store.save(gone, expected_version=None)
    time.sleep(1.2)  # Redis expires the record by its own clock
    _later(store, 1 + EXPIRY_GRACE_SECONDS, monkeypatch)  # ... and the index by the client's, with the grace
    store.save(plain_instance(user_id="bob", room_id=None), expected_version=None)
    member = f"alice:room-1:{gone.conversation_id}"
    assert client.zscore("llm_fsm:%all", member) is None
    assert client.zscore("llm_fsm:%expiry", member) is None
    assert client.zscore("llm_fsm:alice:%rooms", f"room-1:{gone.conversation_id}") is None
    assert client.zcard("llm_fsm:%all") == 1


def test_the_global_index_holds_only_conversations_alive_however_many_expired(
    redis_url: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RedisStore(redis_url, ttl_seconds=1)
    for _ in range(30):
        store.save(plain_instance(), expected_version=None)
    time.sleep(1.2)
    _later(store, 1 + EXPIRY_GRACE_SECONDS, monkeypatch)
    for _ in range(3):
        store.save(plain_instance(), expected_version=None)
    assert client.zcard("llm_fsm:%all") == 3 and client.zcard("llm_fsm:%expiry") == 3


def test_a_conversation_within_its_ttl_stays_indexed(
    redis_url: str, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RedisStore(redis_url, ttl_seconds=3600)
    kept = plain_instance()
    store.save(kept, expected_version=None)
    _later(store, 3000, monkeypatch)
    store.save(plain_instance(), expected_version=None)
    assert client.zscore("llm_fsm:%all", f"alice:room-1:{kept.conversation_id}") is not None


def test_a_store_without_ttl_keeps_no_expiry_index(redis_url: str, client: redis.Redis) -> None:
    store = RedisStore(redis_url, ttl_seconds=None)
    store.save(plain_instance(), expected_version=None)
    assert client.zcard("llm_fsm:%expiry") == 0 and client.zcard("llm_fsm:%all") == 1


def test_a_deleted_conversation_leaves_the_user_and_expiry_indexes(redis_url: str, client: redis.Redis) -> None:
    store = RedisStore(redis_url)
    instance = plain_instance()
    store.save(instance, expected_version=None)
    store.delete(instance.conversation_id, user_id="alice", room_id="room-1")
    assert client.zcard("llm_fsm:alice:%rooms") == 0 and client.zcard("llm_fsm:%expiry") == 0


def test_a_users_listing_finds_conversations_saved_before_user_indexes_existed(
    redis_url: str, client: redis.Redis
) -> None:
    store = RedisStore(redis_url)
    old = [plain_instance(updated_at=time.time() - n) for n in range(3)]
    for instance in old:
        store.save(instance, expected_version=None)
    client.delete("llm_fsm:alice:%rooms", "llm_fsm:%expiry")  # what an earlier version left: no user index
    page = RedisStore(redis_url).list_page(user_id="alice", all_rooms=True, limit=10)
    assert [s.conversation_id for s in page.items] == [i.conversation_id for i in old]
    assert client.zcard("llm_fsm:%expiry") == 3 and client.exists("llm_fsm:%rooms-indexed")


def test_a_user_page_reads_the_users_index_not_every_record(redis_url: str, client: redis.Redis) -> None:
    store = RedisStore(redis_url)
    for n in range(40):
        store.save(plain_instance(user_id=f"user-{n}", room_id=None), expected_version=None)
    mine = plain_instance(user_id="alice", room_id="r")
    store.save(mine, expected_version=None)
    store.list_page(user_id="alice", all_rooms=True, limit=5)  # builds nothing more: the marker is there
    before = client.info("commandstats").get("cmdstat_hmget", {}).get("calls", 0)
    page = store.list_page(user_id="alice", all_rooms=True, limit=5)
    after = client.info("commandstats").get("cmdstat_hmget", {}).get("calls", 0)
    assert [s.conversation_id for s in page.items] == [mine.conversation_id]
    assert after - before == 1


def test_the_fallback_store_pages_across_redis_and_memory(redis_url: str) -> None:
    store = FallbackStore(RedisStore(redis_url))
    now = time.time()
    saved = [plain_instance(updated_at=now - n) for n in range(5)]
    for instance in saved:
        store.save(instance, expected_version=None)
    first = store.list_page(user_id="alice", room_id="room-1", limit=3)
    rest = store.list_page(user_id="alice", room_id="room-1", limit=3, cursor=first.next_cursor)
    assert [s.conversation_id for s in first.items + rest.items] == [i.conversation_id for i in saved]
    assert rest.next_cursor is None
