"""Timer claimers killed with SIGKILL mid-claim: every timer is still fired exactly once (SQLite).

Forked workers claim due timers with a short lease and fire each the way a worker must: load the conversation, go on
only if it still arms the timer, save with compare-and-set dropping it and recording the firing, release. One of
them, picked at random, is killed every few tens of milliseconds (often between its claim and its save, or inside a
transaction) and replaced. The claims a killed worker held come back when their lease runs out. Afterwards each
conversation must have recorded each of its timers once, arm none, and the index must be empty: none fired twice
(the compare-and-set refuses the second recording), none lost (the lease gives an abandoned claim to another).
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

from llm_fsm.engine._instance import ArmedTimer
from llm_fsm.engine._records import TraceEvent
from llm_fsm.errors import ConcurrentUpdateError
from llm_fsm.stores import DueTimer, open_store

from .factories import plain_instance

CONVERSATIONS = 60
WORKERS = 3
LEASE = 0.3
FIRED = "timer_fired"


def _fire(store: object, timer: DueTimer) -> None:
    while True:
        instance = store.load(timer.conversation_id, user_id="alice", room_id="room-1")  # type: ignore[attr-defined]
        if not any(t.id == timer.timer_id for t in instance.timers):
            return  # another worker recorded it: its claim's lease ran out while this one was at it
        instance.timers = [t for t in instance.timers if t.id != timer.timer_id]
        instance.trace.append(TraceEvent(event=FIRED, data={"timer_id": timer.timer_id}))
        try:
            store.save(instance, expected_version=instance.version)  # type: ignore[attr-defined]
            return
        except ConcurrentUpdateError:
            continue  # the other timer of the conversation was recorded first: look again


def _claimer(url: str) -> None:
    """A forked worker: claim, fire, release, until killed (or nothing is left for a while)."""
    store = open_store(url)
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < 5.0:
        claimed = store.claim_due_timers(now=time.time(), limit=2, lease=LEASE)  # type: ignore[attr-defined]
        if claimed:
            idle_since = time.monotonic()
        for timer in claimed:
            time.sleep(random.uniform(0, 0.01))  # holding the claim: where a kill hurts most
            _fire(store, timer)
            store.release_timer(timer)  # type: ignore[attr-defined]
        if not claimed:
            time.sleep(0.01)
    os._exit(0)


def _fork(url: str) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            _claimer(url)
        finally:
            os._exit(1)
    return pid


def test_claimers_killed_mid_claim_leave_every_timer_fired_exactly_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/timers.db"
    store = open_store(url)
    cids = []
    for _ in range(CONVERSATIONS):
        armed = [ArmedTimer(id="a", due_at=time.time() - 1), ArmedTimer(id="b", due_at=time.time() - 0.5)]
        instance = plain_instance(timers=armed)
        store.save(instance, expected_version=None)
        cids.append(instance.conversation_id)
    workers = [_fork(url) for _ in range(WORKERS)]
    kills = 0
    deadline = time.monotonic() + 120
    try:
        while store.timer_count() > 0:  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, f"{store.timer_count()} timers left"  # type: ignore[attr-defined]
            time.sleep(random.uniform(0.02, 0.08))
            victim = random.randrange(WORKERS)
            os.kill(workers[victim], signal.SIGKILL)
            os.waitpid(workers[victim], 0)
            kills += 1
            workers[victim] = _fork(url)
    finally:
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)

    fired: Counter[tuple[str, str]] = Counter()
    for cid in cids:
        instance = store.load(cid, user_id="alice", room_id="room-1")
        assert instance.timers == [], cid
        fired.update((cid, e.data["timer_id"]) for e in instance.trace if e.event == FIRED)
    assert fired == Counter({(cid, timer_id): 1 for cid in cids for timer_id in ("a", "b")})
    assert kills >= 5
    store.close()
