"""Four processes × 1,000 turns on 20 shared PostgreSQL conversations: nothing lost, doubled or crossed,
even when the server is killed and restarted in the middle.

Each turn is load → append the message and its reply, a turn record and the message id → compare-and-set
save (``outage_worker.py``). Afterwards every conversation holds each of its turns exactly once, each
worker's turns in the order it sent them and no other conversation's; the turn log and the message ids
match the transcript (a half-applied save would leave one without the other); and the only error a
worker saw during the outage was StoreUnavailableError.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from llm_fsm.engine._messages import entry_role, entry_text
from llm_fsm.stores import open_store

from .factories import plain_instance
from .postgres_server import PostgresServer

WORKERS = 4
TURNS = 1000
CONVERSATIONS = 20
WORKER_SCRIPT = Path(__file__).with_name("outage_worker.py")
OWNER = {"user_id": "alice", "room_id": "room-1"}


def _start_workers(url: str, cids: list[str]) -> list[subprocess.Popen[str]]:
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER_SCRIPT), url, str(w), str(TURNS), *cids],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(WORKERS)
    ]
    for proc in procs:  # everyone connected before anyone starts: maximal contention
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    return procs


def _reports(procs: list[subprocess.Popen[str]]) -> list[dict[str, object]]:
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def _conversations(url: str) -> list[str]:
    store = open_store(url)
    cids = []
    for _ in range(CONVERSATIONS):
        instance = plain_instance()
        store.save(instance, expected_version=None)
        cids.append(instance.conversation_id)
    store.close()
    return cids


def _check_every_turn_once_and_whole(url: str, cids: list[str]) -> None:
    store = open_store(url)
    seen: dict[str, int] = {}
    for index, cid in enumerate(cids):
        instance = store.load(cid, **OWNER)
        exchanges = instance.context.conversation.exchanges
        users = [m["user"] for m in exchanges[0::2]]
        replies = [(entry_role(m), entry_text(m)) for m in exchanges[1::2]]
        assert replies == [("assistant", f"reply to {u}") for u in users], cid
        last_turn = {w: -1 for w in range(WORKERS)}
        for message in users:
            worker, turn = map(int, re.fullmatch(r"w(\d+)-t(\d+)", message).groups())  # type: ignore[union-attr]
            assert turn % CONVERSATIONS == index and turn > last_turn[worker], (cid, message)  # not crossed, in order
            last_turn[worker] = turn
            seen[message] = seen.get(message, 0) + 1
        assert instance.turn_count == len(users) == instance.version - 1, cid
        # the log of every save is there with its record: the last 50 turn records, the last 100 message ids
        assert [t.user_message for t in instance.turns] == users[-50:], cid
        assert [t.index for t in instance.turns] == list(range(len(users) - len(instance.turns) + 1, len(users) + 1))
        assert list(instance.processed_messages) == users[-100:], cid
    assert seen == {f"w{w}-t{t}": 1 for w in range(WORKERS) for t in range(TURNS)}
    store.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_four_processes_a_thousand_turns_each_lose_double_and_cross_nothing(postgres_url: str) -> None:
    cids = _conversations(postgres_url)
    reports = _reports(_start_workers(postgres_url, cids))
    assert all(report["errors"] == {} for report in reports), reports
    _check_every_turn_once_and_whole(postgres_url, cids)


def _applied_turns(url: str, schema: str) -> int:
    try:
        with psycopg.connect(url.split("?")[0], autocommit=True, connect_timeout=2) as conn:
            row = conn.execute(
                f'SELECT coalesce(sum(version - 1), 0) FROM "{schema}".conversations'.encode()
            ).fetchone()
            return int(row[0]) if row else 0
    except psycopg.Error:
        return 0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_server_killed_and_restarted_mid_run_gives_only_unavailable_and_no_half_applied_turn(
    own_postgres: PostgresServer,
) -> None:
    url = own_postgres.url(schema="outage")
    cids = _conversations(url)
    procs = _start_workers(url, cids)
    total = WORKERS * TURNS
    while _applied_turns(url, "outage") < total // 3:
        assert all(p.poll() is None for p in procs), "a worker ended before the outage"
        time.sleep(0.05)
    own_postgres.kill()  # postmaster and backends at once, in the middle of the workers' saves
    time.sleep(1.0)
    own_postgres.start()  # crash recovery
    reports = _reports(procs)
    assert sum(int(r["errors"].get("StoreUnavailableError", 0)) for r in reports) > 0, reports  # type: ignore[attr-defined]
    assert all(set(r["errors"]) <= {"StoreUnavailableError"} for r in reports), reports  # type: ignore[arg-type]
    _check_every_turn_once_and_whole(url, cids)
