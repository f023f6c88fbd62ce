"""Timers at scale: claim-and-fire throughput, lateness and exactly-once firing on SQLite, PostgreSQL and Redis.

Conversations run on a small definition (``DEFINITIONS["bench_timers"]``): its one state arms two ``after``
entries, a fixed-text nudge (``say``, so no model call) due ``NUDGE_SECONDS`` after the conversation starts, and one
parked a year ahead. Everything goes through ``FSMManager`` on the store under test, as users run it, with the
engine's clock injected (``EngineConfig.clock``) so due times are whatever the benchmark says.

Per store, in one run:

- **arming**: ``--timers`` armed timers (100,000 by default) in ``--timers / 2`` conversations, started with
  ``start_conversation`` by 4 worker processes, each on a clock set so that its nudge falls due in the last minute
  (the backlog) and its parked one a year on: the index holds at least half of them in every phase. The time it
  takes is printed, not judged;
- **baselines**: the same store's plain save throughput (``load_for_turn`` + a compare-and-set ``save`` of
  conversations without timers, round robin) and a plain user turn through the manager (``process_message`` with a
  zero-latency fake model, on the same definition less its timers, round robin over ``TURN_CONVERSATIONS`` of
  each worker's own), with 1 and 4 worker processes. Every ratio printed is against them, measured in the same
  run on the same store: a firing is a turn without a model call;
- **claim and fire** with 1 and then 4 worker processes on the backlog: fires per second, and the ratios to the
  baselines of the same number of workers. For each number of workers the three take ``--seconds`` each, in half
  windows in ABCCBA order, so a machine that gets busier weighs on all alike;
- **kill -9**: 4 workers drain the rest of the backlog with a short lease (``--lease``) while one of them, picked at
  random, is killed with SIGKILL every ``--kill-every`` seconds and replaced. Afterwards every conversation's turn
  log is read and its timer turns (intent ``timer``) are counted per timer id: **fired twice** (a timer recorded
  more than once), **lost** (a due nudge never recorded, or still armed), and the index must hold only the parked
  timers;
- **lateness under load**: 4 workers polling every ``--poll`` seconds while new timers fall due at half the 4-worker
  fire rate, for ``--lateness-seconds``; lateness = the engine's clock when the timer turn ran (its record's
  ``inputs.clock``) minus the timer's due time, p50 / p99 / max. The phase runs on a shifted clock (the workers'
  clock starts a month ahead), so arming its conversations beforehand takes nothing from the window.

"Fire" is ``fire_due``: ``manager.run_due_timers(now=..., limit=..., lease=...)`` in each worker process, counting
the report's fired, stale and failed.

A local redis-server and a throwaway PostgreSQL cluster (fsync off) are started as ``benchmarks/stores.py`` does,
unless ``--redis-url`` / ``--postgres-url`` name them; SQLite is a file in a temp dir with the default
``synchronous=FULL`` (``--sqlite-synchronous NORMAL`` for the other; arming always uses OFF, as setup).

Run from the repository root::

    python benchmarks/timers.py                     # 100,000 timers, 10 s windows (several minutes)
    python benchmarks/timers.py --quick             # 300 timers, 1 s windows (seconds; what the test runs)
    python benchmarks/timers.py --stores sqlite,redis --timers 20000 --json
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

HERE = Path(__file__).resolve().parent
SHIFTED_AHEAD = 30 * 86400.0
"""The lateness phase's clock starts this far ahead: past every backlog timer, short of the parked ones."""
WORKERS = (1, 4)


sys.path.insert(0, str(HERE))  # timers_firing, beside this file, whoever runs it

from timers_firing import (  # noqa: E402
    NUDGE,
    NUDGE_SECONDS,
    Bench,
    due_time,
    entry_index,
    exactly_once,
    fire_due,
    recorded,
)

# --- worker processes ------------------------------------------------------------------------


def run_worker() -> int:
    """``timers.py worker``: prints ``ready``, then runs one JSON command a line from stdin, answering each with a
    JSON line (``done``, ``stale``, ``failed``, ``seconds``, and for ``arm`` the ``cids``), until ``exit`` or the end
    of input.

    Commands (``mode``): ``arm`` starts conversations ``first`` .. ``first + count - 1`` of ``total`` (``Bench.arm``);
    ``save`` and ``turn`` run a baseline for ``seconds``; ``fire`` runs ``fire_due`` for ``seconds`` or until it fired
    ``max``, sleeping ``poll`` when nothing was due, on a clock that reads ``clock`` when the command arrives (None:
    the real one).
    """
    benches: dict[str, Bench] = {}
    print("ready", flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command["mode"] == "exit":
            break
        bench = benches.get(command["url"]) or benches.setdefault(command["url"], Bench(command["url"]))
        bench.clock.shift = 0.0 if command.get("clock") is None else command["clock"] - time.time()
        started = time.perf_counter()
        answer: dict[str, Any] = {"done": 0, "stale": 0, "failed": 0}
        if command["mode"] == "arm":
            answer["cids"] = bench.arm(command["first"], command["count"], command["total"], command["due"])
            answer["done"] = len(answer["cids"])
        elif command["mode"] == "save":
            answer["done"] = bench.saves(command["seconds"])
        elif command["mode"] == "turn":
            answer["done"] = bench.turns(command["seconds"])
        else:
            deadline = started + command["seconds"]
            most = command.get("max") or sys.maxsize
            while time.perf_counter() < deadline and answer["done"] < most:
                limit = min(command["limit"], most - answer["done"])
                ran = fire_due(bench.manager, now=bench.clock.epoch(), limit=limit, lease=command["lease"])
                for key, count in zip(("done", "stale", "failed"), ran, strict=True):
                    answer[key] += count
                if not any(ran):
                    time.sleep(command["poll"])
        answer["seconds"] = time.perf_counter() - started
        print(json.dumps(answer), flush=True)
    for bench in benches.values():
        bench.close()
    return 0


class Worker:
    """A worker process of this script, kept for every phase (a process start costs more than a short window)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ready(self) -> Worker:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if line != "ready":
            self.kill()
            raise RuntimeError(f"a worker did not start: {line!r}")
        return self

    def send(self, command: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def result(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"a worker exited with {self.process.wait()}")
        figures: dict[str, Any] = json.loads(line)
        return figures

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.communicate(timeout=60)

    def close(self) -> None:
        with contextlib.suppress(BrokenPipeError):
            self.send({"mode": "exit"})
        self.process.communicate(timeout=60)


def spawn(count: int) -> list[Worker]:
    """``count`` workers, started together."""
    return [worker.ready() for worker in [Worker() for _ in range(count)]]


def run(workers: list[Worker], commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One command per worker, all at once; their answers."""
    for worker, command in zip(workers, commands, strict=True):
        worker.send(command)
    return [worker.result() for worker in workers]


# --- the phases ----------------------------------------------------------------------------


def arm(pool: list[Worker], url: str, conversations: int, due: tuple[float, float]) -> tuple[float, list[str]]:
    """Start ``conversations`` conversations with every worker; returns the seconds it took and their ids, in the
    order of their due times."""
    share = -(-conversations // len(pool))
    firsts = range(0, conversations, share)
    commands = [
        {"mode": "arm", "url": url, "first": f, "count": min(share, conversations - f), "total": conversations}
        for f in firsts
    ]
    started = time.perf_counter()
    results = run(pool[: len(commands)], [{**command, "due": due} for command in commands])
    return time.perf_counter() - started, [cid for result in results for cid in result["cids"]]


def rates(pool: list[Worker], workers: int, commands: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Operations per second of ``workers`` workers in each mode of ``commands``, their windows taken forward and
    then backward (ABCCBA), so a machine that gets busier or quieter during the phase weighs on all alike."""
    totals = {mode: [0.0, 0.0] for mode in commands}
    for mode in [*commands, *reversed(commands)]:
        results = run(pool[:workers], [commands[mode]] * workers)
        totals[mode][0] += sum(r["done"] for r in results)
        totals[mode][1] += max(r["seconds"] for r in results)
    return {mode: done / seconds for mode, (done, seconds) in totals.items()}


def chaos(pool: list[Worker], url: str, *, parked: int, args: argparse.Namespace) -> dict[str, Any]:
    """Every worker drains the due timers while one is killed with SIGKILL every ``--kill-every`` seconds and
    replaced; then the pool is replaced too (its workers are busy until the end of their command)."""
    from llm_fsm.stores import open_store

    store: Any = open_store(url)
    command = {"mode": "fire", "url": url, "seconds": args.timeout, "limit": 10, "lease": args.lease, "poll": args.poll}
    for worker in pool:
        worker.send(command)
    kills = 0
    started = time.perf_counter()
    next_kill = started + 0.02  # the first one as soon as the workers hold claims: a short run gets its kill too
    while kills == 0 or store.timer_count() > parked:
        if time.perf_counter() - started > args.timeout:
            raise RuntimeError(f"the backlog was not drained in {args.timeout} s")
        if time.perf_counter() >= next_kill:
            victim = random.randrange(len(pool))
            pool[victim].kill()
            kills += 1
            pool[victim] = Worker().ready()
            pool[victim].send(command)
            next_kill = time.perf_counter() + args.kill_every
        time.sleep(0.02)
    drained = time.perf_counter() - started
    left = store.timer_count()
    store.close()
    for worker in pool:
        worker.kill()
    pool[:] = spawn(len(pool))
    return {"kills": kills, "drain_seconds": drained, "index_left": left}


def lateness(pool: list[Worker], url: str, *, per_second: float, t0: float, args: argparse.Namespace) -> dict[str, Any]:
    """Timers falling due at ``per_second`` for ``--lateness-seconds`` while every worker polls: each firing's
    lateness, from what its turn recorded. On a clock a month ahead, so the arming beforehand takes nothing from
    it."""
    seconds = args.lateness_seconds
    count = max(10, int(per_second * seconds))
    start = t0 + SHIFTED_AHEAD
    due = (start + 0.5, start + 0.5 + seconds)
    _, cids = arm(pool, url, count, due)
    command = {"mode": "fire", "url": url, "seconds": seconds + 2.0, "limit": 20, "lease": 30.0, "poll": args.poll}
    results = run(pool, [{**command, "clock": start}] * len(pool))
    late_ms, unfired = [], 0
    for n, (fired, _) in enumerate(recorded(url, cids)):
        nudges = [at for timer_id, at in fired if entry_index(timer_id) == NUDGE]
        late_ms += [(at - due_time(due, n, count)) * 1000.0 for at in nudges]
        unfired += not nudges
    late_ms.sort()
    return {
        "timers": count,
        "per_second": count / seconds,
        "fired": len(late_ms),
        "unfired": unfired,
        "failed": sum(r["failed"] for r in results),
        "p50_ms": statistics.median(late_ms) if late_ms else None,
        "p99_ms": late_ms[min(len(late_ms) - 1, int(0.99 * len(late_ms)))] if late_ms else None,
        "max_ms": late_ms[-1] if late_ms else None,
    }


def bench_store(pool: list[Worker], name: str, url: str, setup_url: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every phase on one store; ``setup_url`` is the same store opened for arming (SQLite: synchronous=OFF)."""
    conversations = args.timers // 2
    t0 = time.time()
    out: dict[str, Any] = {"store": name, "timers": 2 * conversations}
    _progress(f"{name}: arming {2 * conversations:,} timers (start_conversation)")
    out["arm_seconds"], cids = arm(pool, setup_url, conversations, (t0 - NUDGE_SECONDS, t0))
    out["arm_starts_per_second"] = conversations / out["arm_seconds"]
    for key in ("baseline_saves_per_second", "baseline_turns_per_second", "fires_per_second"):
        out[key] = {}
    for w in WORKERS:
        _progress(f"{name}: plain saves, user turns and claim and fire, {w} worker(s)")
        half = args.seconds / 2
        most = conversations // 6 // w  # each window leaves the kill -9 phase a backlog to drain
        measured = rates(
            pool,
            w,
            {
                "save": {"mode": "save", "url": url, "seconds": half},
                "turn": {"mode": "turn", "url": url, "seconds": half},
                "fire": {"mode": "fire", "url": url, "seconds": half, "limit": 20, "lease": 30.0}
                | {"poll": args.poll, "max": most},
            },
        )
        out["baseline_saves_per_second"][w] = measured["save"]
        out["baseline_turns_per_second"][w] = measured["turn"]
        out["fires_per_second"][w] = measured["fire"]
    out["x_baseline"] = {w: out["fires_per_second"][w] / out["baseline_saves_per_second"][w] for w in WORKERS}
    out["x_turn"] = {w: out["fires_per_second"][w] / out["baseline_turns_per_second"][w] for w in WORKERS}
    _progress(f"{name}: draining the backlog, kill -9 every {args.kill_every} s")
    out["kill9"] = chaos(pool, url, parked=conversations, args=args)
    out["kill9"].update(exactly_once(url, cids))
    _progress(f"{name}: lateness under load")
    per_second = max(5.0, 0.5 * out["fires_per_second"][4])
    out["lateness"] = lateness(pool, url, per_second=per_second, t0=t0, args=args)
    return out


def _progress(what: str) -> None:
    print(f"{what} ...", file=sys.stderr, flush=True)


@contextlib.contextmanager
def store_urls(names: list[str], args: argparse.Namespace, notes: list[str]) -> Iterator[dict[str, tuple[str, str]]]:
    """name → (the URL measured, the URL armed through), for the stores that can be run here."""
    helpers = _stores_benchmark()
    with contextlib.ExitStack() as stack:
        urls: dict[str, tuple[str, str]] = {}
        if "sqlite" in names:
            directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-timers-"))
            path = f"sqlite:///{directory}/timers.db"
            urls["sqlite"] = (f"{path}?synchronous={args.sqlite_synchronous}", f"{path}?synchronous=OFF")
        if "postgres" in names:
            found = stack.enter_context(helpers.postgres_url(args.postgres_url, notes))
            if found:
                urls["postgres"] = (found, found)
        if "redis" in names:
            found = stack.enter_context(helpers.redis_url(args.redis_url, notes))
            if found:
                urls["redis"] = (found, found)
        yield urls


def _stores_benchmark() -> Any:
    """``benchmarks/stores.py`` (its throwaway Redis and PostgreSQL), loaded by path: under pytest the name
    ``stores`` is the tests' package."""
    spec = importlib.util.spec_from_file_location("bench_stores", HERE / "stores.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def print_report(results: list[dict[str, Any]], notes: list[str]) -> None:
    _table(
        "Timers: run_due_timers (fires/s) against the same store's plain load + save (saves/s) and a user turn through "
        "the manager with a fake model (turns/s), same run",
        [("store", 10, "s"), ("timers", 8, ",d"), ("workers", 7, "d"), ("saves/s", 9, ",.0f"), ("turns/s", 9, ",.0f")]
        + [("fires/s", 9, ",.0f"), ("x save", 7, ".2f"), ("x turn", 7, ".2f")],
        [
            [r["store"], r["timers"], w]
            + [r[k][w] for k in ("baseline_saves_per_second", "baseline_turns_per_second", "fires_per_second")]
            + [r["x_baseline"][w], r["x_turn"][w]]
            for r in results
            for w in WORKERS
        ],
    )
    _table(
        "kill -9 of workers while draining the backlog (timer turns counted per timer id from the turn logs)",
        [("store", 10, "s"), ("kills", 5, "d"), ("fired", 8, ",d"), ("twice", 6, "d"), ("lost", 5, "d")]
        + [("drain s", 8, ".1f")],
        [
            [r["store"], *(r["kill9"][k] for k in ("kills", "fired", "fired_twice", "lost", "drain_seconds"))]
            for r in results
        ],
    )
    _table(
        "lateness under load (4 workers polling; timers falling due at half the 4-worker fire rate)",
        [("store", 10, "s"), ("due/s", 7, ".0f"), ("fired", 6, "d"), ("unfired", 7, "d"), ("p50 ms", 8, ".1f")]
        + [("p99 ms", 8, ".1f"), ("max ms", 8, ".1f")],
        [
            [r["store"], *(r["lateness"][k] for k in ("per_second", "fired", "unfired", "p50_ms", "p99_ms", "max_ms"))]
            for r in results
        ],
    )
    for r in results:
        print(
            f"{r['store']}: arming started {r['timers'] // 2:,} conversations in {r['arm_seconds']:.1f} s "
            f"({r['arm_starts_per_second']:,.0f}/s, start_conversation in 4 processes)"
        )
    for note in notes:
        print(f"note: {note}")


def _table(title: str, columns: list[tuple[str, int, str]], rows: list[list[Any]]) -> None:
    """A title, a header and the rows: the first column left-aligned, the others right; None as '-'."""
    print(title)
    print(" ".join(f"{name:<{width}}" if i == 0 else f"{name:>{width}}" for i, (name, width, _) in enumerate(columns)))
    for row in rows:
        cells = [
            f"{'-' if value is None else format(value, spec):{'<' if i == 0 else '>'}{width}}"
            for i, (value, (_, width, spec)) in enumerate(zip(row, columns, strict=True))
        ]
        print(" ".join(cells))
    print()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="sqlite,postgres,redis", help="comma-separated: sqlite, postgres, redis")
    parser.add_argument("--timers", type=int, default=100_000, help="armed timers (half due now, half parked)")
    parser.add_argument("--seconds", type=float, default=10.0, help="each throughput window")
    parser.add_argument("--lease", type=float, default=2.0, help="claim lease: a killed worker's claims return then")
    parser.add_argument("--kill-every", type=float, default=1.0)
    parser.add_argument("--lateness-seconds", type=float, default=10.0)
    parser.add_argument("--poll", type=float, default=0.05, help="a worker's sleep when nothing is due")
    parser.add_argument("--timeout", type=float, default=1800.0, help="the kill -9 drain gives up after this")
    parser.add_argument("--sqlite-synchronous", default="FULL")
    parser.add_argument("--redis-url")
    parser.add_argument("--postgres-url")
    parser.add_argument("--quick", action="store_true", help="300 timers, 1 s windows: seconds, for the test")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.timers, args.seconds, args.lateness_seconds, args.kill_every, args.lease = 300, 1.0, 1.0, 0.3, 1.0
    return args


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["worker"]:
        return run_worker()
    args = parse_args(argv)
    notes: list[str] = []
    results = []
    with store_urls([s.strip() for s in args.stores.split(",") if s.strip()], args, notes) as urls:
        pool = spawn(max(WORKERS))
        try:
            for name, (url, setup_url) in urls.items():
                results.append(bench_store(pool, name, url, setup_url, args))
        finally:
            for worker in pool:
                worker.close()
    if args.json:
        print(json.dumps({"results": results, "notes": notes}, indent=2))
    else:
        print_report(results, notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
