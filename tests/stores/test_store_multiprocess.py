"""Four processes applying 100 turns each to 25 shared conversations lose and double nothing.

Each turn is load → append the user message and its reply → save with the
loaded version, retried from a fresh load on ConcurrentUpdateError. Afterwards
every conversation holds every turn sent to it exactly once, each reply right
after its message, and each worker's turns in the order it sent them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from llm_fsm.engine._messages import entry_role, entry_text
from llm_fsm.stores import open_store

from .factories import plain_instance

WORKERS = 4
TURNS = 100
CONVERSATIONS = 25
WORKER_SCRIPT = Path(__file__).with_name("turn_worker.py")


def _run_workers(url: str, cids: list[str]) -> list[dict[str, int]]:
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER_SCRIPT), url, str(w), str(TURNS), *cids],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(WORKERS)
    ]
    for proc in procs:  # everyone loaded and connected before anyone starts: maximal contention
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "redis", "files", "postgres"])
def test_concurrent_workers_apply_every_turn_exactly_once_in_order(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind in ("redis", "postgres"):
        url = str(request.getfixturevalue(f"{kind}_url"))
    elif kind == "sqlite":
        url = f"sqlite:///{tmp_path}/shared.db"
    else:
        url = f"file://{tmp_path}/shared"
    store = open_store(url)
    cids = []
    for _ in range(CONVERSATIONS):
        instance = plain_instance()
        store.save(instance, expected_version=None)
        cids.append(instance.conversation_id)

    _run_workers(url, cids)

    seen: dict[str, int] = {}
    for index, cid in enumerate(cids):
        instance = store.load(cid, user_id="alice", room_id="room-1")
        exchanges = [(entry_role(m), entry_text(m)) for m in instance.context.conversation.exchanges]
        assert all(role == "user" for role, _ in exchanges[0::2]), cid
        users = [{"user": text} for _, text in exchanges[0::2]]
        for message, reply in zip(users, exchanges[1::2], strict=False):
            assert reply == ("assistant", f"reply to {message['user']}"), cid
        last_turn = {w: -1 for w in range(WORKERS)}
        for message in users:
            worker, turn = map(int, re.fullmatch(r"w(\d+)-t(\d+)", message["user"]).groups())  # type: ignore[union-attr]
            assert turn % CONVERSATIONS == index and turn > last_turn[worker], (cid, message)
            last_turn[worker] = turn
            seen[message["user"]] = seen.get(message["user"], 0) + 1
        assert instance.turn_count == len(users) == instance.version - 1
    assert seen == {f"w{w}-t{t}": 1 for w in range(WORKERS) for t in range(TURNS)}
    store.close()
