"""Store overhead per turn, and turns per second with several worker processes.

Printed:
- per-turn store overhead: load + change + compare-and-set save of a realistic
  instance (about ten turns of history with turn records and trace, one
  message pair archived per turn as the engine's pruning does), in µs, for
  every store, and its ratio to ``memory://`` measured in the same run;
- turns per second with 1 and 4 worker processes, each on its own
  conversations, on Redis (and SQLite for comparison).

A local ``redis-server`` is started on a free loopback port in a temp dir
(``--save "" --appendonly no``) unless ``--redis-url`` names one; without the
binary the Redis rows are skipped with a note.

Run from the repository root::

    python benchmarks/stores.py            # full run (a minute or so)
    python benchmarks/stores.py --quick    # fewer turns, shorter throughput windows
    python benchmarks/stores.py --json     # figures as JSON
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._records import (
    ContextChange,
    LLMCallRecord,
    TraceEvent,
    TransitionEvaluation,
    TurnRecord,
    Verdict,
)
from llm_fsm.stores import open_store

HISTORY_TURNS = 10


def realistic_instance() -> FSMInstance:
    """About ten turns in: context, transcript, turn records and trace filled in like the engine would."""
    instance = FSMInstance(
        fsm_id="personal_information_collection", current_state="collect", user_id="u42", room_id="web"
    )
    instance.context.data.update(
        {
            "name": "Ada Lovelace",
            "email": "ada@example.org",
            "age": 36,
            "city": "London",
            "interests": ["mathematics", "engines", "poetry"],
        }
    )
    start = time.time() - 600
    for i in range(HISTORY_TURNS):
        _add_turn(instance, i, start + i)
    instance.turn_count = HISTORY_TURNS
    return instance


def _add_turn(instance: FSMInstance, i: int, at: float) -> None:
    user = f"Turn {i}: my details are as follows, please note them down carefully ({i})."
    reply = f"Thank you. I have noted that (turn {i}). Could you tell me a little more about yourself?"
    instance.context.conversation.add_user_message(user)
    instance.context.conversation.add_assistant_message(reply)
    instance.turns.append(
        TurnRecord(
            index=i,
            message_id=f"m{i}",
            user_message=user,
            state_before="collect",
            state_after="collect",
            proposal="collect",
            context_changes=[ContextChange(key="city", value="London", applied=True, reason="set")],
            evaluations=[TransitionEvaluation(target_state="summary", priority=100, guarded=True, eligible=False)],
            verdict=Verdict(kind="stay", target_state="collect", reason="conditions for summary do not hold"),
            llm_calls=[LLMCallRecord(purpose="turn")],
            reply=reply,
            started_at=at,
            finished_at=at + 0.8,
        )
    )
    instance.processed_messages[f"m{i}"] = reply
    instance.trace.append(TraceEvent(event="turn", timestamp=at, data={"index": i, "state": "collect"}))


def one_turn(store: Any, cid: str, i: int) -> None:
    """What a store sees of one engine turn: load, grow, prune the oldest pair to the archive, save."""
    instance = store.load(cid, user_id="u42", room_id="web")
    _add_turn(instance, HISTORY_TURNS + i, time.time())
    conversation = instance.context.conversation
    instance.archive_outbox = conversation.exchanges[:2]
    conversation.exchanges = conversation.exchanges[2:]
    instance.turns = instance.turns[-HISTORY_TURNS:]
    instance.trace = instance.trace[-HISTORY_TURNS:]
    instance.turn_count += 1
    instance.updated_at = time.time()
    store.save(instance, expected_version=instance.version)


def per_turn_us(url: str, turns: int, repeats: int) -> float:
    """Median over ``repeats`` runs of the mean µs per turn."""
    results = []
    for _ in range(repeats):
        store = open_store(url)
        instance = realistic_instance()
        store.save(instance, expected_version=None)
        for i in range(5):  # warm caches, connections, scripts
            one_turn(store, instance.conversation_id, i)
        started = time.perf_counter()
        for i in range(turns):
            one_turn(store, instance.conversation_id, 5 + i)
        results.append((time.perf_counter() - started) / turns * 1e6)
        store.close()
    return statistics.median(results)


def _throughput_worker(url: str, seconds: float, start_at: float, out: Any) -> None:
    store = open_store(url)
    cids = []
    for _ in range(5):
        instance = realistic_instance()
        store.save(instance, expected_version=None)
        cids.append(instance.conversation_id)
    while time.time() < start_at:
        time.sleep(0.001)
    done = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        one_turn(store, cids[done % len(cids)], done)
        done += 1
    store.close()
    out.put(done)


def turns_per_second(url: str, workers: int, seconds: float) -> float:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    start_at = time.time() + 1.5 + 0.3 * workers  # all workers imported and connected before the clock starts
    procs = [ctx.Process(target=_throughput_worker, args=(url, seconds, start_at, queue)) for _ in range(workers)]
    for p in procs:
        p.start()
    total = sum(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join()
    return total / seconds


class _Redis:
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="bench-redis-")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        binary = shutil.which("redis-server")
        assert binary
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
            ],
            stdout=subprocess.DEVNULL,
        )
        for _ in range(500):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.01)
        raise RuntimeError("redis-server did not start")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--redis-url", default=None)
    args = parser.parse_args(argv)
    turns, repeats, window = (100, 3, 1.5) if args.quick else (300, 5, 3.0)

    tmp = Path(tempfile.mkdtemp(prefix="bench-stores-"))
    server = None
    redis_url = args.redis_url
    notes = []
    if redis_url is None:
        if shutil.which("redis-server"):
            server = _Redis()
            redis_url = server.url
        else:
            notes.append("redis-server not installed: Redis rows skipped")
    stores = {
        "memory://": "memory://",
        "sqlite (synchronous=FULL, default)": f"sqlite:///{tmp}/a.db",
        "sqlite (synchronous=NORMAL)": f"sqlite:///{tmp}/b.db?synchronous=NORMAL",
        "files (fsync, default)": f"file://{tmp}/files-a",
        "files (fsync=false)": f"file://{tmp}/files-b?fsync=false",
    }
    if redis_url:
        stores["redis (localhost)"] = redis_url
    try:
        overhead = {name: per_turn_us(url, turns, repeats) for name, url in stores.items()}
        throughput: dict[str, dict[int, float]] = {}
        targets = {"sqlite (FULL)": f"sqlite:///{tmp}/t.db"}
        if redis_url:
            targets = {"redis": redis_url, **targets}
        for name, url in targets.items():
            throughput[name] = {n: turns_per_second(url, n, window) for n in (1, 4)}
    finally:
        if server:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    base = overhead["memory://"]
    if args.json:
        print(
            json.dumps(
                {
                    "per_turn_us": overhead,
                    "ratio_to_memory": {k: v / base for k, v in overhead.items()},
                    "turns_per_second": throughput,
                    "notes": notes,
                },
                indent=2,
            )
        )
        return 0
    print(
        f"Store overhead per turn (load + save, ~{HISTORY_TURNS} turns of history, median of {repeats} x {turns} turns)"
    )
    print(f"{'store':<38}{'µs/turn':>12}{'x memory':>12}")
    for name, us in overhead.items():
        print(f"{name:<38}{us:>12.0f}{us / base:>12.1f}")
    print()
    print(f"Turns per second, workers on their own conversations ({window:g} s window, {mp.cpu_count()} CPUs)")
    print(f"{'store':<38}{'1 worker':>12}{'4 workers':>12}")
    for name, by_workers in throughput.items():
        print(f"{name:<38}{by_workers[1]:>12.0f}{by_workers[4]:>12.0f}")
    for note in notes:
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
