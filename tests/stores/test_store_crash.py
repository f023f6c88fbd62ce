"""A writer killed with SIGKILL at random moments never leaves a corrupt or rolled-back conversation.

A forked writer saves in a tight loop and reports each version through a pipe
once ``save`` has returned. After the kill, a freshly opened store must load a
record that decodes, whose version is the last one reported or the one after
it (a save that committed but was not reported yet), and whose archive holds
exactly one message per committed version: nothing lost, nothing doubled. The
same holds for the turn log: each save logs one turn record and one message id,
and the log holds exactly those of the committed versions, trimmed to its
retention (50 turn records, 100 ids).
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._records import TurnRecord, Verdict
from llm_fsm.stores import open_store

from .factories import plain_instance

KILLS = 100


def _next_turn(instance: FSMInstance) -> None:
    """What a turn changes, as the version the next save will write: data, transcript, archive, turn log."""
    following = instance.version + 1
    instance.context.data["n"] = following
    instance.context.conversation.exchanges = [{"user": f"live {following}"}]
    instance.archive_outbox = [{"user": f"v{following}"}]
    instance.turns = [
        TurnRecord(
            index=following,
            message_id=f"m{following}",
            user_message=f"u{following}",
            state_before="start",
            state_after="start",
            verdict=Verdict(kind="stay", target_state="start", reason="crash test"),
            reply=f"r{following}",
            started_at=0.0,
            finished_at=0.0,
        )
    ]
    instance.processed_messages = {f"m{following}": f"r{following}"}


def _writer(url: str, conversation_id: str, report: int) -> None:
    store = open_store(url)
    instance = store.load_for_turn(conversation_id, user_id="alice", room_id="room-1")  # type: ignore[attr-defined]
    os.write(report, b"ready\n")
    while True:
        _next_turn(instance)
        store.save(instance, expected_version=instance.version)
        os.write(report, f"{instance.version}\n".encode())


def _run_and_kill(url: str, conversation_id: str, saves: int, delay: float) -> int:
    """Fork a writer, let it report ``saves`` saves, wait ``delay`` more seconds, SIGKILL it.

    Returns the last version it reported. Waiting for reports first guarantees
    progress whatever the disk's speed; the extra delay lands the kill at a
    random point of the save in flight.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            _writer(url, conversation_id, write_end)
        finally:
            os._exit(1)
    os.close(write_end)
    received = b""
    while received.count(b"\n") < 1 + saves:
        chunk = os.read(read_end, 4096)
        if not chunk:
            break
        received += chunk
    time.sleep(delay)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    while chunk := os.read(read_end, 65536):
        received += chunk
    os.close(read_end)
    assert received.startswith(b"ready\n"), "the writer died before it started saving"
    reported = [int(line) for line in received[len(b"ready\n") :].split(b"\n")[:-1]]
    return reported[-1] if reported else -1


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "sqlite-normal", "files"])
def test_a_writer_killed_at_random_never_leaves_a_corrupt_or_lost_version(kind: str, tmp_path: Path) -> None:
    # synchronous=NORMAL leaves the last commits to the OS's page cache: a killed process loses none of them
    # (a power cut could), so it is held to the same promise here.
    url = {
        "sqlite": f"sqlite:///{tmp_path}/crash.db",
        "sqlite-normal": f"sqlite:///{tmp_path}/crash.db?synchronous=NORMAL",
        "files": f"file://{tmp_path}/crash",
    }[kind]
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    setup = open_store(url, archive_part_size=50) if kind == "files" else open_store(url)
    instance = plain_instance()
    _next_turn(instance)
    setup.save(instance, expected_version=None)
    started = time.perf_counter()
    for _ in range(5):  # how long one save takes on this disk, so kills land inside saves, not between them
        _next_turn(instance)
        setup.save(instance, expected_version=instance.version)
    save_seconds = (time.perf_counter() - started) / 5
    setup.close()
    cid = instance.conversation_id
    first = last_loaded = instance.version
    for kill in range(KILLS):
        reported = _run_and_kill(url, cid, rng.randint(0, 2), rng.uniform(0, 1.5) * save_seconds)
        store = open_store(url)
        loaded = store.load(cid, user_id="alice", room_id="room-1")
        floor = max(reported, last_loaded)
        context = f"seed={seed} kill={kill} reported={reported} loaded={loaded.version}"
        assert floor <= loaded.version <= floor + 1, context
        assert loaded.context.data["n"] == loaded.version, context
        transcript = store.transcript(cid, user_id="alice", room_id="room-1")
        assert transcript == [{"user": f"v{k}"} for k in range(1, loaded.version + 1)] + [
            {"user": f"live {loaded.version}"}
        ], context
        assert [t.index for t in loaded.turns] == list(range(max(1, loaded.version - 49), loaded.version + 1)), context
        assert loaded.processed_messages == {
            f"m{k}": f"r{k}" for k in range(max(1, loaded.version - 99), loaded.version + 1)
        }, context
        store.close()
        last_loaded = loaded.version
    assert last_loaded - first >= KILLS // 2, (
        f"seed={seed}: the writer hardly ever saved; the test did not exercise crashes"
    )
