"""The TimerStore contract (``llm_fsm.stores.base``), run against memory, SQLite, a real Redis, files and a real
PostgreSQL: the index mirrors ``FSMInstance.timers`` on every save, a claim is a lease given to one claimer at a
time, and release, delete and expire drop entries."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from llm_fsm.engine._instance import ArmedTimer, FSMInstance
from llm_fsm.errors import ConcurrentUpdateError
from llm_fsm.stores import ConversationStore, DueTimer, TimerStore, open_store
from llm_fsm.stores.postgres import PostgresStore
from llm_fsm.stores.redis import FallbackStore, RedisStore
from llm_fsm.stores.redis._keys import EXPIRY_GRACE_SECONDS
from llm_fsm.stores.sqlite import SCHEMA_VERSION as SQLITE_SCHEMA_VERSION
from llm_fsm.stores.sqlite import SQLiteStore

from .factories import plain_instance
from .redis_server import RedisServer
from .test_postgres_store import sql

WORKER_SCRIPT = Path(__file__).with_name("timer_claim_worker.py")


def _armed(*timers: tuple[str, float], **fields: Any) -> FSMInstance:
    return plain_instance(timers=[ArmedTimer(id=timer_id, due_at=due_at) for timer_id, due_at in timers], **fields)


def _index(store: ConversationStore) -> TimerStore:
    assert isinstance(store, TimerStore), f"{store!r} does not index timers"
    return store


def _claimed(timers: list[DueTimer]) -> list[tuple[str, str, float]]:
    return [(t.conversation_id, t.timer_id, t.due_at) for t in timers]


# --- mirror on save ------------------------------------------------------------------


def test_every_store_is_a_timer_store(store: ConversationStore) -> None:
    assert isinstance(store, TimerStore)


def test_a_save_indexes_the_instance_s_armed_timers(store: ConversationStore) -> None:
    timers = _index(store)
    store.save(_armed(("a", 100.0), ("b", 200.0)), expected_version=None)
    store.save(plain_instance(), expected_version=None)
    assert timers.timer_count() == 2


def test_the_same_timer_id_in_two_conversations_is_two_entries(store: ConversationStore) -> None:
    timers = _index(store)
    first, second = _armed(("t", 100.0)), _armed(("t", 100.0), user_id="bob")
    store.save(first, expected_version=None)
    store.save(second, expected_version=None)
    claimed = timers.claim_due_timers(now=100.0, limit=10, lease=60.0)
    assert sorted(t.conversation_id for t in claimed) == sorted([first.conversation_id, second.conversation_id])


@pytest.mark.parametrize(("user_id", "room_id"), [("bob", "room:1"), ("bob", None), (None, None), ("_", "%")])
def test_a_claim_names_the_conversation_s_owner_so_the_firing_worker_can_load_it(
    store: ConversationStore, user_id: str | None, room_id: str | None
) -> None:
    timers = _index(store)
    instance = _armed(("t", 100.0), user_id=user_id, room_id=room_id)
    store.save(instance, expected_version=None)
    [claimed] = timers.claim_due_timers(now=100.0, limit=10, lease=60.0)
    assert (claimed.user_id, claimed.room_id) == (user_id, room_id)
    assert store.load(claimed.conversation_id, user_id=claimed.user_id, room_id=claimed.room_id).timers


def test_a_save_that_drops_a_timer_drops_its_entry(store: ConversationStore) -> None:
    timers = _index(store)
    instance = _armed(("a", 100.0), ("b", 200.0))
    store.save(instance, expected_version=None)
    instance.timers = [ArmedTimer(id="b", due_at=200.0)]
    store.save(instance, expected_version=1)
    assert timers.timer_count() == 1
    assert _claimed(timers.claim_due_timers(now=1000.0, limit=10, lease=60.0)) == [
        (instance.conversation_id, "b", 200.0)
    ]


def test_a_kept_timer_keeps_its_claim_across_a_save(store: ConversationStore) -> None:
    timers = _index(store)
    instance = _armed(("a", 100.0))
    store.save(instance, expected_version=None)
    (claim,) = timers.claim_due_timers(now=100.0, limit=10, lease=60.0)
    instance.current_state = "middle"
    store.save(instance, expected_version=1)
    assert timers.claim_due_timers(now=110.0, limit=10, lease=60.0) == []
    timers.release_timer(claim)
    assert timers.timer_count() == 0


def test_a_changed_due_time_is_a_new_unclaimed_entry(store: ConversationStore) -> None:
    timers = _index(store)
    instance = _armed(("a", 100.0))
    store.save(instance, expected_version=None)
    (old,) = timers.claim_due_timers(now=100.0, limit=10, lease=60.0)
    instance.timers = [ArmedTimer(id="a", due_at=130.0)]
    store.save(instance, expected_version=1)
    assert timers.claim_due_timers(now=120.0, limit=10, lease=60.0) == []  # not due at its new time yet
    timers.release_timer(old)  # the old claim names an entry that is gone
    assert timers.timer_count() == 1
    (new,) = timers.claim_due_timers(now=130.0, limit=10, lease=60.0)
    assert (new.timer_id, new.due_at) == ("a", 130.0) and new.token != old.token


def test_a_lost_compare_and_set_leaves_the_index_unchanged(store: ConversationStore) -> None:
    timers = _index(store)
    instance = _armed(("a", 100.0))
    store.save(instance, expected_version=None)
    stale = instance.model_copy(deep=True)
    stale.timers = [ArmedTimer(id="b", due_at=50.0)]
    with pytest.raises(ConcurrentUpdateError):
        store.save(stale, expected_version=7)
    duplicate = _armed(("c", 10.0), conversation_id=instance.conversation_id)
    with pytest.raises(ConcurrentUpdateError):
        store.save(duplicate, expected_version=None)
    assert _claimed(timers.claim_due_timers(now=1000.0, limit=10, lease=60.0)) == [
        (instance.conversation_id, "a", 100.0)
    ]
    assert timers.timer_count() == 1


# --- claims ---------------------------------------------------------------------------


def test_only_timers_due_at_now_are_claimed(store: ConversationStore) -> None:
    timers = _index(store)
    instance = _armed(("soon", 100.0), ("later", 200.0))
    store.save(instance, expected_version=None)
    assert timers.claim_due_timers(now=99.5, limit=10, lease=60.0) == []
    assert _claimed(timers.claim_due_timers(now=100.0, limit=10, lease=60.0)) == [
        (instance.conversation_id, "soon", 100.0)
    ]


def test_claims_come_earliest_first_across_conversations(store: ConversationStore) -> None:
    timers = _index(store)
    for due in (300.0, 100.0, 200.0):
        store.save(_armed((f"t{int(due)}", due)), expected_version=None)
    assert [t.due_at for t in timers.claim_due_timers(now=1000.0, limit=10, lease=60.0)] == [100.0, 200.0, 300.0]


def test_a_claim_takes_at_most_limit_and_the_next_one_the_rest(store: ConversationStore) -> None:
    timers = _index(store)
    store.save(_armed(*((f"t{n}", 100.0 + n) for n in range(5))), expected_version=None)
    first = timers.claim_due_timers(now=1000.0, limit=2, lease=60.0)
    second = timers.claim_due_timers(now=1000.0, limit=10, lease=60.0)
    assert [t.timer_id for t in first] == ["t0", "t1"]
    assert [t.timer_id for t in second] == ["t2", "t3", "t4"]
    assert timers.claim_due_timers(now=1000.0, limit=0, lease=60.0) == []


def test_a_claim_is_held_until_its_lease_runs_out(store: ConversationStore) -> None:
    timers = _index(store)
    store.save(_armed(("a", 100.0)), expected_version=None)
    (first,) = timers.claim_due_timers(now=100.0, limit=10, lease=10.0)
    assert timers.claim_due_timers(now=109.0, limit=10, lease=10.0) == []
    (again,) = timers.claim_due_timers(now=110.0, limit=10, lease=10.0)  # the first claimer died, say
    assert again.timer_id == "a" and again.token != first.token


def test_release_drops_the_entry_only_for_the_claim_that_holds_it(store: ConversationStore) -> None:
    timers = _index(store)
    store.save(_armed(("a", 100.0)), expected_version=None)
    (first,) = timers.claim_due_timers(now=100.0, limit=10, lease=10.0)
    (second,) = timers.claim_due_timers(now=120.0, limit=10, lease=10.0)
    timers.release_timer(first)  # its lease ran out and another worker holds the entry now
    timers.release_timer(DueTimer(first.conversation_id, first.timer_id, first.due_at, "not-a-claim"))
    assert timers.timer_count() == 1
    timers.release_timer(second)
    assert timers.timer_count() == 0
    assert timers.claim_due_timers(now=1000.0, limit=10, lease=10.0) == []


def test_a_released_timer_still_armed_is_indexed_again_by_the_next_save(store: ConversationStore) -> None:
    timers = _index(store)
    instance = _armed(("a", 100.0))
    store.save(instance, expected_version=None)
    (claim,) = timers.claim_due_timers(now=100.0, limit=10, lease=60.0)
    timers.release_timer(claim)  # a firing that failed after its claim, say
    store.save(instance, expected_version=1)
    assert [t.timer_id for t in timers.claim_due_timers(now=100.0, limit=10, lease=60.0)] == ["a"]


# --- delete and expire ----------------------------------------------------------------


def test_delete_drops_the_conversation_s_entries(store: ConversationStore) -> None:
    timers = _index(store)
    gone, kept = _armed(("a", 100.0), ("b", 110.0)), _armed(("a", 200.0))
    store.save(gone, expected_version=None)
    store.save(kept, expected_version=None)
    (claim,) = timers.claim_due_timers(now=100.0, limit=1, lease=60.0)
    assert store.delete(gone.conversation_id, user_id="alice", room_id="room-1")
    assert timers.timer_count() == 1
    timers.release_timer(claim)  # the worker that claimed it finds the conversation gone
    assert timers.timer_count() == 1
    assert _claimed(timers.claim_due_timers(now=200.0, limit=10, lease=60.0)) == [(kept.conversation_id, "a", 200.0)]


def test_expire_drops_the_entries_of_conversations_it_removes(store: ConversationStore) -> None:
    timers = _index(store)
    now = time.time()
    store.save(_armed(("a", 100.0), updated_at=now - 3600), expected_version=None)
    fresh = _armed(("a", 100.0), updated_at=now - 5)
    store.save(fresh, expected_version=None)
    assert store.expire(older_than=600) == 1
    assert timers.timer_count() == 1
    assert [t.conversation_id for t in timers.claim_due_timers(now=100.0, limit=10, lease=60.0)] == [
        fresh.conversation_id
    ]


def test_the_async_twins_claim_release_and_count(store: ConversationStore) -> None:
    timers = _index(store)
    store.save(_armed(("a", 100.0), ("b", 300.0)), expected_version=None)

    async def run() -> tuple[int, list[DueTimer], int]:
        counted = await timers.atimer_count()
        claimed = await timers.aclaim_due_timers(now=200.0, limit=10, lease=60.0)
        for claim in claimed:
            await timers.arelease_timer(claim)
        return counted, claimed, await timers.atimer_count()

    counted, claimed, left = asyncio.run(run())
    assert (counted, [t.timer_id for t in claimed], left) == (2, ["a"], 1)


# --- concurrent claimers --------------------------------------------------------------

TIMERS = 120


def _arm_many(store: ConversationStore) -> set[tuple[str, str]]:
    armed: set[tuple[str, str]] = set()
    for n in range(TIMERS // 3):
        instance = _armed(("x", 100.0 + n), ("y", 100.5 + n), ("z", 101.0 + n))
        store.save(instance, expected_version=None)
        armed |= {(instance.conversation_id, t.id) for t in instance.timers}
    return armed


def test_concurrent_threads_never_share_an_unexpired_claim(store: ConversationStore) -> None:
    timers = _index(store)
    armed = _arm_many(store)
    got: list[DueTimer] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def claimer() -> None:
        start.wait()
        while batch := timers.claim_due_timers(now=1000.0, limit=7, lease=3600.0):
            with lock:
                got.extend(batch)

    threads = [threading.Thread(target=claimer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    counts = Counter((t.conversation_id, t.timer_id) for t in got)
    assert set(counts) == armed
    assert max(counts.values()) == 1


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgres"])
def test_concurrent_processes_never_share_an_unexpired_claim(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = f"sqlite:///{tmp_path}/timers.db" if kind == "sqlite" else str(request.getfixturevalue(f"{kind}_url"))
    store = open_store(url)
    armed = _arm_many(store)
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER_SCRIPT), url, "1000", "5"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    got: list[tuple[str, str]] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out
        got += [(cid, timer_id) for cid, timer_id, _token in json.loads(out.strip().splitlines()[-1])]
    counts = Counter(got)
    assert set(counts) == armed
    assert max(counts.values()) == 1
    store.close()


# --- upgrades -------------------------------------------------------------------------


def test_a_sqlite_file_of_the_previous_schema_gains_the_table_and_indexes_what_its_records_arm(
    tmp_path: Path,
) -> None:
    db = tmp_path / "old.db"
    store = SQLiteStore(db)
    instance = _armed(("a", 100.0), ("b", 200.0))
    store.save(instance, expected_version=None)
    store.close()
    with sqlite3.connect(db) as conn:
        conn.executescript("DROP TABLE timers; PRAGMA user_version = 5;")
    reopened = SQLiteStore(db)
    assert reopened.timer_count() == 2
    assert _claimed(reopened.claim_due_timers(now=150.0, limit=10, lease=60.0)) == [
        (instance.conversation_id, "a", 100.0)
    ]
    reopened.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SQLITE_SCHEMA_VERSION,)


def test_a_postgres_schema_of_the_previous_layout_gains_the_table_and_indexes_what_its_records_arm(
    postgres_url: str,
) -> None:
    store = open_store(postgres_url)
    assert isinstance(store, PostgresStore)
    instance = _armed(("a", 100.0), ("b", 200.0))
    store.save(instance, expected_version=None)
    sql(store, "DROP TABLE {s}.timers; UPDATE {s}.schema_version SET version = 3")
    store.close()
    reopened = open_store(postgres_url)
    timers = _index(reopened)
    assert timers.timer_count() == 2
    assert _claimed(timers.claim_due_timers(now=150.0, limit=10, lease=60.0)) == [
        (instance.conversation_id, "a", 100.0)
    ]
    reopened.close()


# --- Redis: expiry and the fallback to memory --------------------------------------------


def test_a_redis_conversation_expired_by_ttl_leaves_the_timer_index_at_the_next_save(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RedisStore(redis_url, ttl_seconds=1)
    store.save(_armed(("a", 100.0), ("b", 200.0)), expected_version=None)
    time.sleep(1.2)  # Redis expires the record by its own clock, the store forgets its entries by the client's
    monkeypatch.setattr(store, "_clock", lambda: time.time() + 1 + EXPIRY_GRACE_SECONDS)
    alive = _armed(("a", 300.0), user_id="bob")
    store.save(alive, expected_version=None)
    assert store.timer_count() == 1
    assert _claimed(store.claim_due_timers(now=1000.0, limit=10, lease=60.0)) == [(alive.conversation_id, "a", 300.0)]
    store.close()


def test_the_fallback_claims_the_timers_of_conversations_held_in_memory_and_in_redis(own_redis: RedisServer) -> None:
    store = open_store(own_redis.url, fallback_to_memory=True, connect_timeout=0.5, socket_timeout=0.5)
    assert isinstance(store, FallbackStore)
    remote = _armed(("r", 100.0))
    store.save(remote, expected_version=None)
    own_redis.shutdown_saving()
    held = _armed(("m", 50.0))
    store.save(held, expected_version=None)  # Redis is down: this one lives in memory
    assert [t.conversation_id for t in store.claim_due_timers(now=1000.0, limit=10, lease=60.0)] == [
        held.conversation_id
    ]
    own_redis.start()
    claimed = store.claim_due_timers(now=1000.0, limit=10, lease=60.0)
    assert [t.conversation_id for t in claimed] == [remote.conversation_id]
    assert store.timer_count() == 2
    for timer in claimed:
        store.release_timer(timer)
    store.release_timer(DueTimer(held.conversation_id, "m", 50.0, "not-a-claim"))
    assert store.timer_count() == 1
    store.close()


# --- files: the token names the conversation's folder -------------------------------------------


def test_a_file_store_release_with_a_forged_token_touches_nothing_outside_its_folders(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/conversations")
    instance = _armed(("a", 100.0))
    store.save(instance, expected_version=None)
    timers = _index(store)
    (claim,) = timers.claim_due_timers(now=100.0, limit=10, lease=60.0)
    for forged in ("x@../..", "x@alice/../..", "x@..%2F/room-1", claim.token.split("@")[0]):
        timers.release_timer(DueTimer(claim.conversation_id, "a", 100.0, forged))
    assert timers.timer_count() == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conversations"]
