"""What the Redis store promises beyond the shared contract, against a real redis-server."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._records import LLMRequest, TurnRecord
from llm_fsm.errors import (
    ConcurrentUpdateError,
    ConversationNotFoundError,
    RecordTooLargeError,
    StoreError,
    StoreUnavailableError,
)
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.loading import load_fsm_definition
from llm_fsm.manager import FSMManager
from llm_fsm.stores import open_store
from llm_fsm.stores.redis import (
    DEFAULT_TTL_SECONDS,
    FallbackStore,
    RedisStore,
    key_part,
)

from .factories import plain_instance, rich_instance
from .redis_server import RedisServer, free_port

SIX_HOURS_MS = DEFAULT_TTL_SECONDS * 1000
GREETING = Path(__file__).resolve().parents[2] / "definitions" / "simple_greeting.yaml"


@pytest.fixture
def client(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url)


@pytest.fixture
def store(redis_url: str) -> RedisStore:
    opened = open_store(redis_url)
    assert isinstance(opened, RedisStore)
    return opened


def _load(store: object, instance: FSMInstance) -> FSMInstance:
    return store.load(instance.conversation_id, user_id=instance.user_id, room_id=instance.room_id)  # type: ignore[attr-defined]


def _record_key(instance: FSMInstance, prefix: str = "llm_fsm") -> str:
    return f"{prefix}:{key_part(instance.user_id)}:{key_part(instance.room_id)}:{key_part(instance.conversation_id)}"


# --- layout and TTL ---------------------------------------------------------------------


def test_a_conversation_is_a_hash_under_prefix_user_room_and_id(store: RedisStore, client: redis.Redis) -> None:
    instance = rich_instance()
    instance.archive_outbox = [{"user": "old"}]
    store.save(instance, expected_version=None)
    key = f"llm_fsm:alice:room-1:{instance.conversation_id}"
    fields = client.hgetall(key)
    assert fields[b"version"] == b"1" and fields[b"state"] == b"confirm" and fields[b"fsm_id"] == b"booking"
    hot = instance.model_dump(exclude={"turns", "processed_messages"})
    assert FSMInstance.model_validate_json(fields[b"record"]).model_dump(exclude={"turns", "processed_messages"}) == hot
    assert client.lrange(f"{key}:archive", 0, -1) == [b'{"user":"old"}']
    logged = [TurnRecord.model_validate_json(t) for t in client.lrange(f"{key}:turns", 0, -1)]
    assert logged == instance.turns and fields[b"last_turn"] == str(instance.turns[-1].index).encode()
    assert client.lrange(f"{key}:reply_ids", 0, -1) == [m.encode() for m in instance.processed_messages]
    assert client.hgetall(f"{key}:replies") == {m.encode(): r.encode() for m, r in instance.processed_messages.items()}
    assert client.zscore("llm_fsm:alice:room-1", instance.conversation_id) == pytest.approx(instance.updated_at)


def test_missing_user_and_room_are_written_as_underscore(store: RedisStore, client: redis.Redis) -> None:
    instance = plain_instance(user_id=None, room_id=None)
    store.save(instance, expected_version=None)
    assert client.exists(f"llm_fsm:_:_:{instance.conversation_id}")


def test_record_archive_and_index_expire_after_six_hours_by_default(store: RedisStore, client: redis.Redis) -> None:
    instance = plain_instance()
    instance.archive_outbox = [{"user": "old"}]
    store.save(instance, expected_version=None)
    key = _record_key(instance)
    for k in (key, f"{key}:archive", "llm_fsm:alice:room-1"):
        assert SIX_HOURS_MS - 60_000 < client.pttl(k) <= SIX_HOURS_MS


def test_every_save_refreshes_the_ttl(store: RedisStore, client: redis.Redis) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)
    client.pexpire(_record_key(instance), 5_000)
    store.save(instance, expected_version=1)
    assert client.pttl(_record_key(instance)) > SIX_HOURS_MS - 60_000
    assert store.ttl(instance.conversation_id, user_id="alice", room_id="room-1") > DEFAULT_TTL_SECONDS - 60  # type: ignore[operator]


def test_ttl_none_keeps_conversations_until_deleted(redis_url: str, client: redis.Redis) -> None:
    store = RedisStore(redis_url, ttl_seconds=None)
    instance = plain_instance()
    store.save(instance, expected_version=None)
    assert client.pttl(_record_key(instance)) == -1
    assert store.ttl(instance.conversation_id, user_id="alice", room_id="room-1") is None


def test_an_expired_conversation_is_not_found(store: RedisStore, client: redis.Redis) -> None:
    instance = plain_instance()
    instance.archive_outbox = [{"user": "old"}]
    store.save(instance, expected_version=None)
    key = _record_key(instance)
    client.pexpire(key, 1)
    client.pexpire(f"{key}:archive", 1)
    time.sleep(0.01)
    with pytest.raises(ConversationNotFoundError):
        _load(store, instance)
    with pytest.raises(ConversationNotFoundError):
        store.transcript(instance.conversation_id, user_id="alice", room_id="room-1")
    with pytest.raises(ConversationNotFoundError):
        store.ttl(instance.conversation_id, user_id="alice", room_id="room-1")


def test_an_expired_conversation_leaves_the_listings_and_their_indexes(store: RedisStore, client: redis.Redis) -> None:
    gone, kept = plain_instance(), plain_instance()
    store.save(gone, expected_version=None)
    store.save(kept, expected_version=None)
    client.delete(_record_key(gone))  # what the TTL does
    assert [s.conversation_id for s in store.list(user_id="alice", room_id="room-1")] == [kept.conversation_id]
    assert [s.conversation_id for s in store.list()] == [kept.conversation_id]
    assert client.zscore("llm_fsm:alice:room-1", gone.conversation_id) is None
    assert client.zcard("llm_fsm:%all") == 1


@pytest.mark.slow
def test_a_conversation_idle_past_its_ttl_is_gone(redis_url: str) -> None:
    store = RedisStore(redis_url, ttl_seconds=1)
    instance = plain_instance()
    store.save(instance, expected_version=None)
    assert _load(store, instance).version == 1
    time.sleep(1.3)
    with pytest.raises(ConversationNotFoundError):
        _load(store, instance)
    assert store.list(user_id="alice", room_id="room-1") == []


def test_stores_with_different_prefixes_do_not_see_each_other(redis_url: str) -> None:
    ours, theirs = RedisStore(redis_url, prefix="bot_a"), RedisStore(redis_url, prefix="bot_b")
    instance = plain_instance()
    ours.save(instance, expected_version=None)
    with pytest.raises(ConversationNotFoundError):
        _load(theirs, instance)
    assert theirs.list() == []


def test_url_query_options_configure_the_store(redis_url: str) -> None:
    store = open_store(f"{redis_url}?prefix=app&ttl_seconds=60&max_context_bytes=50")
    assert isinstance(store, RedisStore)
    assert (store.prefix, store.ttl_ms, store._limits.max_context_bytes) == ("app", 60_000, 50)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), st.text(max_size=12)), st.one_of(st.none(), st.text(max_size=12)))
def test_key_parts_are_distinct_for_distinct_ids_and_never_contain_a_colon(a: str | None, b: str | None) -> None:
    assert (key_part(a) == key_part(b)) == (a == b)
    for part in (key_part(a), key_part(b)):
        assert ":" not in part and part != "%all"


# --- size caps ---------------------------------------------------------------------------


def test_context_data_is_capped_at_ten_thousand_bytes_by_default(store: RedisStore) -> None:
    instance = plain_instance()
    instance.context.data["notes"] = "x" * 9_900
    store.save(instance, expected_version=None)
    instance.context.data["notes"] = "x" * 10_000
    with pytest.raises(RecordTooLargeError, match="10000"):
        store.save(instance, expected_version=1)
    assert len(_load(store, instance).context.data["notes"]) == 9_900


def test_the_whole_record_is_capped_at_a_megabyte_by_default(store: RedisStore) -> None:
    instance = plain_instance()
    instance.context.metadata["blob"] = "y" * 1_000_001
    with pytest.raises(RecordTooLargeError, match="1000000"):
        store.save(instance, expected_version=None)


# --- Redis unavailable ---------------------------------------------------------------------


def test_an_unreachable_redis_raises_unavailable_for_every_operation() -> None:
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", connect_timeout=0.5)
    instance = plain_instance()
    instance.archive_outbox = [{"user": "keep me"}]
    with pytest.raises(StoreUnavailableError):
        store.save(instance, expected_version=None)
    assert (instance.version, instance.archive_outbox) == (0, [{"user": "keep me"}])
    for call in (
        lambda: _load(store, instance),
        lambda: store.list(),
        lambda: store.delete(instance.conversation_id),
        lambda: store.transcript(instance.conversation_id),
        lambda: store.expire(older_than=1),
    ):
        with pytest.raises(StoreUnavailableError):
            call()
    assert store.ping() is False


def test_a_redis_stopped_mid_run_fails_saves_cleanly_and_work_resumes_after_restart(own_redis: RedisServer) -> None:
    store = RedisStore(own_redis.url, connect_timeout=0.5, socket_timeout=0.5)
    instance = plain_instance()
    store.save(instance, expected_version=None)
    own_redis.shutdown_saving()
    instance.current_state = "during outage"
    instance.archive_outbox = [{"user": "pruned during outage"}]
    with pytest.raises(StoreUnavailableError):
        store.save(instance, expected_version=1)
    assert (instance.version, instance.archive_outbox) == (1, [{"user": "pruned during outage"}])
    own_redis.start()
    assert _load(store, instance).version == 1  # nothing of the failed save reached the record
    store.save(instance, expected_version=1)
    assert _load(store, instance).current_state == "during outage"
    assert store.transcript(instance.conversation_id, user_id="alice", room_id="room-1") == [
        {"user": "pruned during outage"}
    ]


def test_after_a_redis_crash_and_restart_new_conversations_work(own_redis: RedisServer) -> None:
    store = RedisStore(own_redis.url, connect_timeout=0.5, socket_timeout=0.5)
    before = plain_instance()
    store.save(before, expected_version=None)
    own_redis.kill()
    with pytest.raises(StoreUnavailableError):
        store.list()
    own_redis.start()
    with pytest.raises(ConversationNotFoundError):  # no persistence configured: the crash lost it, and says so
        _load(store, before)
    after = plain_instance()
    store.save(after, expected_version=None)
    assert _load(store, after).version == 1


@pytest.mark.slow
def test_a_save_that_times_out_is_applied_entirely_or_not_at_all(own_redis: RedisServer) -> None:
    store = RedisStore(own_redis.url, connect_timeout=0.3, socket_timeout=0.3, retries=1)
    instance = plain_instance()
    store.save(instance, expected_version=None)
    instance.archive_outbox = [{"user": "a"}, {"assistant": "b"}]
    own_redis.pause()
    try:
        with pytest.raises(StoreUnavailableError):
            store.save(instance, expected_version=1)
    finally:
        own_redis.resume()
    time.sleep(0.1)
    stored = _load(store, instance)
    archived = store.transcript(instance.conversation_id, user_id="alice", room_id="room-1")
    assert (stored.version, archived) in [(1, []), (2, [{"user": "a"}, {"assistant": "b"}])]
    if stored.version == 1:
        store.save(instance, expected_version=1)
    else:
        with pytest.raises(ConcurrentUpdateError):  # a fresh attempt is a new save, not a replay
            store.save(instance, expected_version=1)
    assert store.transcript(instance.conversation_id, user_id="alice", room_id="room-1") == [
        {"user": "a"},
        {"assistant": "b"},
    ]


# --- fallback to memory ----------------------------------------------------------------------


def test_without_fallback_an_unreachable_redis_is_an_error() -> None:
    store = open_store(f"redis://127.0.0.1:{free_port()}/0", connect_timeout=0.5)
    with pytest.raises(StoreUnavailableError):
        store.save(plain_instance(), expected_version=None)


def test_with_fallback_new_conversations_live_in_memory_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    store = open_store(f"redis://127.0.0.1:{free_port()}/0?fallback_to_memory=true", connect_timeout=0.5)
    assert isinstance(store, FallbackStore)
    instance = plain_instance()
    with caplog.at_level(logging.WARNING, logger="llm_fsm.stores.redis"):
        store.save(instance, expected_version=None)
    assert "unavailable" in caplog.text and "memory" in caplog.text
    store.save(instance, expected_version=1)
    assert _load(store, instance).version == 2
    assert [s.conversation_id for s in store.list(user_id="alice", room_id="room-1")] == [instance.conversation_id]
    assert store.degraded


def test_with_fallback_a_turn_whose_save_finds_redis_gone_continues_in_memory(own_redis: RedisServer) -> None:
    store = FallbackStore(RedisStore(own_redis.url, connect_timeout=0.5, socket_timeout=0.5))
    instance = plain_instance()
    store.save(instance, expected_version=None)
    own_redis.kill()
    instance.current_state = "saved in memory"
    assert store.save(instance, expected_version=1) == 2
    loaded = _load(store, instance)
    assert (loaded.version, loaded.current_state) == (2, "saved in memory")


def test_with_fallback_a_redis_conversation_cannot_be_loaded_while_redis_is_down(own_redis: RedisServer) -> None:
    store = FallbackStore(RedisStore(own_redis.url, connect_timeout=0.5, socket_timeout=0.5))
    instance = plain_instance()
    store.save(instance, expected_version=None)
    own_redis.kill()
    with pytest.raises(StoreUnavailableError):  # not "not found": it exists, we just cannot reach it
        _load(store, instance)


# --- the async path ----------------------------------------------------------------------------


@pytest.fixture
def no_thread_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any store call sent to the library's thread pool fails the test."""

    async def refuse(function: object, *args: object, **kwargs: object) -> object:
        raise AssertionError(f"{function} was sent to the thread pool")

    monkeypatch.setattr("llm_fsm.stores.base.run_blocking", refuse)
    monkeypatch.setattr("llm_fsm.stores.redis._store.run_blocking", refuse)  # where RedisStore._arun finds it


def test_the_async_methods_talk_to_redis_without_a_thread(store: RedisStore, no_thread_pool: None) -> None:
    async def scenario() -> None:
        instance = rich_instance()
        instance.archive_outbox = [{"user": "early"}]
        assert await store.asave(instance, expected_version=None) == 1
        assert (await store.aload(instance.conversation_id, user_id="alice", room_id="room-1")).turns == instance.turns
        hot = await store.aload_for_turn(
            instance.conversation_id, user_id="alice", room_id="room-1", message_id="msg-2"
        )
        assert hot.processed_messages == {"msg-2": "reply 2: I found 5 options."}
        assert [s.conversation_id for s in await store.alist(user_id="alice", room_id="room-1")] == [
            instance.conversation_id
        ]
        transcript = await store.atranscript(instance.conversation_id, user_id="alice", room_id="room-1")
        assert transcript[0] == {"user": "early"}
        assert await store.aexpire(older_than=3600) == 0
        assert await store.adelete(instance.conversation_id, user_id="alice", room_id="room-1") is True
        with pytest.raises(ConversationNotFoundError):
            await store.aload(instance.conversation_id, user_id="alice", room_id="room-1")

    asyncio.run(scenario())


def test_an_async_turn_on_redis_makes_no_thread_hop(redis_url: str, no_thread_pool: None) -> None:
    async def echo(request: LLMRequest) -> dict[str, object]:
        return {"transition": {"target_state": "greeting", "context_update": {}}, "message": "hi"}

    definition = load_fsm_definition(GREETING)
    fsm = FSMManager(fsm_loader=lambda _id: definition, llm_interface=FunctionLLM(echo), store=redis_url)

    async def scenario() -> int:
        cid, _ = await fsm.astart_conversation("greeting")
        for i in range(3):
            await fsm.aprocess_message(cid, f"message {i}", f"m{i}")
        assert await fsm.aprocess_message(cid, "again", "m1") == "hi"
        return (await fsm.aexplain(cid)).index

    assert asyncio.run(scenario()) == 3


def test_each_event_loop_talks_to_redis_on_its_own_connection(store: RedisStore) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)

    async def load() -> int:
        return (await store.aload(instance.conversation_id, user_id="alice", room_id="room-1")).version

    assert [asyncio.run(load()) for _ in range(3)] == [1, 1, 1]  # a client of a closed loop would fail here


def test_asyncio_run_closes_the_connections_of_its_loop(store: RedisStore, client: redis.Redis) -> None:
    # only the connections this loop opened count: an earlier test's idle connection (CI saw one left by a
    # sync pool 38 s before) is not this loop's to close
    before = {c["id"] for c in client.client_list()}

    def opened() -> list[dict[str, str]]:
        return [c for c in client.client_list() if c["id"] not in before and c.get("cmd") != "client|list"]

    async def ping_and_count() -> int:
        await store.alist()
        return len(opened())

    open_during = asyncio.run(ping_and_count())
    time.sleep(0.05)
    assert open_during >= 1
    assert opened() == []


def test_an_unreachable_redis_is_unavailable_on_the_async_path_too() -> None:
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", connect_timeout=0.5)
    instance = plain_instance()

    async def scenario() -> None:
        with pytest.raises(StoreUnavailableError):
            await store.asave(instance, expected_version=None)
        with pytest.raises(StoreUnavailableError):
            await store.aload_for_turn(instance.conversation_id, user_id="alice", room_id="room-1")

    asyncio.run(scenario())
    assert instance.version == 0


def test_a_store_on_a_given_client_runs_its_async_methods_on_the_thread_pool(client: redis.Redis) -> None:
    store = RedisStore(client=client)
    instance = plain_instance()

    async def scenario() -> int:
        await store.asave(instance, expected_version=None)
        return (await store.aload(instance.conversation_id, user_id="alice", room_id="room-1")).version

    assert asyncio.run(scenario()) == 1


def test_with_fallback_an_async_save_that_finds_redis_gone_continues_in_memory(own_redis: RedisServer) -> None:
    store = FallbackStore(RedisStore(own_redis.url, connect_timeout=0.5, socket_timeout=0.5))
    instance = plain_instance()

    async def scenario() -> tuple[int, str]:
        await store.asave(instance, expected_version=None)
        own_redis.kill()
        instance.current_state = "saved in memory"
        assert await store.asave(instance, expected_version=1) == 2
        loaded = await store.aload(instance.conversation_id, user_id="alice", room_id="room-1")
        return loaded.version, loaded.current_state

    assert asyncio.run(scenario()) == (2, "saved in memory")
    assert store.degraded


# --- the client library is optional ------------------------------------------------------------


def test_importing_the_stores_does_not_import_redis() -> None:
    code = "import sys, llm_fsm.stores; open = llm_fsm.stores.open_store('memory://'); print('redis' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_without_redis_py_opening_a_redis_store_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(StoreError, match=r'pip install "llm_fsm\[redis\]"'):
        open_store("redis://127.0.0.1:6379/0")


def test_the_password_of_a_redis_url_never_appears_in_errors() -> None:
    store = RedisStore(f"redis://user:s3cret@127.0.0.1:{free_port()}/0", connect_timeout=0.5)
    with pytest.raises(StoreUnavailableError) as caught:
        store.list()
    assert "s3cret" not in str(caught.value) and "s3cret" not in repr(store)


def test_more_async_calls_than_connections_wait_for_one_instead_of_failing(redis_url: str) -> None:
    # Found by benchmarks/serve.py: redis-py's default asyncio pool refuses the call past max_connections
    # at once ("Too many connections"), which a burst of API turns met as 503 store_unavailable.
    store = RedisStore(redis_url, max_connections=3)
    instance = rich_instance()
    store.save(instance, expected_version=None)

    async def burst() -> list[object]:
        return await asyncio.gather(
            *(store.aload(instance.conversation_id, user_id="alice", room_id="room-1") for _ in range(40))
        )

    assert len(asyncio.run(burst())) == 40
