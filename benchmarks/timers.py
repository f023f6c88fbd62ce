"""Timers at scale: claim-and-fire throughput, lateness and exactly-once firing on SQLite, PostgreSQL and Redis.

Per store, in one run:

- **arming**: ``--timers`` armed timers (100,000 by default) in ``--timers / 2`` conversations, each arming one timer
  due now (the backlog, due times spread over the last minute) and one parked a year ahead, so the index holds at
  least half of them in every phase; saved by 4 worker processes (the rate is printed, not judged);
- **baseline**: the same store's plain save throughput with 1 and 4 worker processes: ``load_for_turn`` + a
  compare-and-set ``save`` of conversations without timers, round robin. Every ratio printed is against it,
  measured in the same run on the same store;
- **claim and fire** with 1 and then 4 worker processes on the backlog: fires per second and the ratio to the
  baseline of the same number of workers (what a fire costs beyond a turn's save: the claim, the release and, on
  SQLite, their write transactions). For each number of workers the baseline and the firing take ``--seconds``
  each, in half windows in ABBA order (save, fire, fire, save), so a machine that gets busier weighs on both;
- **kill -9**: 4 workers drain the rest of the backlog with a short lease (``--lease``) while one of them, picked at
  random, is killed with SIGKILL every ``--kill-every`` seconds and replaced. Afterwards every conversation is
  loaded and the firings it *recorded* are counted per timer id: **fired twice** (a timer recorded more than once),
  **lost** (a due timer never recorded, or still armed), and the index must hold only the parked timers;
- **lateness under load**: 4 workers polling every ``--poll`` seconds while new timers fall due at half the 4-worker
  fire rate, for ``--lateness-seconds``; lateness = the time a firing recorded minus the timer's due time, p50 / p99
  / max. The phase runs on a shifted clock (the workers' ``now`` starts a month ahead), the injected-clock way, so
  arming its timers beforehand takes nothing from the window.

"Fire" is ``fire_due``: claim, load the conversation, check it still arms the timer and that it is due, save with
compare-and-set dropping it and recording the firing (a trace event), release; that is exactly what a firing
records. It is the one function to switch to ``FSMManager.run_due_timers`` once the engine fires timers.

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
FIRED = "timer_fired"
"""The trace event a firing records (``data``: the timer id and its due time)."""
PARKED_AHEAD = 365 * 86400.0
SHIFTED_AHEAD = 30 * 86400.0
"""The lateness phase's clock starts this far ahead: past every backlog timer, short of the parked ones."""
WORKERS = (1, 4)


# --- the firing ----------------------------------------------------------------------------


def fire_due(store: Any, *, now: float, limit: int, lease: float) -> tuple[int, int]:
    """Claim the timers due at ``now`` and fire each; returns (fired, stale).

    The one place the benchmark fires: switch its body to ``manager.run_due_timers(now=now, limit=limit,
    lease=lease)`` (counting the report's fired and stale) once the engine fires timers.
    """
    fired = stale = 0
    for timer in store.claim_due_timers(now=now, limit=limit, lease=lease):
        if _fire(store, timer, now):
            fired += 1
        else:
            stale += 1
        store.release_timer(timer)
    return fired, stale


def _fire(store: Any, timer: Any, now: float) -> bool:
    """Record the firing of one claimed timer, unless the conversation is gone or no longer arms it (due)."""
    from llm_fsm.engine._records import TraceEvent
    from llm_fsm.errors import ConcurrentUpdateError, ConversationNotFoundError

    while True:
        try:
            instance = store.load_for_turn(timer.conversation_id)
        except ConversationNotFoundError:
            return False
        if not any(t.id == timer.timer_id and t.due_at <= now for t in instance.timers):
            return False  # moved on, or another worker recorded it already
        instance.timers = [t for t in instance.timers if t.id != timer.timer_id]
        event = TraceEvent(event=FIRED, timestamp=now, data={"timer_id": timer.timer_id, "due_at": timer.due_at})
        instance.trace.append(event)
        try:
            store.save(instance, expected_version=instance.version)
            return True
        except ConcurrentUpdateError:
            continue  # a turn got in first: look again at what it left


# --- worker processes ------------------------------------------------------------------------


def conversation(cid: str, *timers: tuple[str, float]) -> Any:
    from llm_fsm.engine._instance import ArmedTimer, FSMInstance

    armed = [ArmedTimer(id=timer_id, due_at=due) for timer_id, due in timers]
    return FSMInstance(fsm_id="bench", current_state="waiting", conversation_id=cid, timers=armed)


def run_worker() -> int:
    """``timers.py worker``: prints ``ready``, then runs one JSON command a line from stdin, answering each with a
    JSON line (``done``, ``stale``, ``seconds``), until ``exit`` or the end of input.

    Commands (``mode``): ``arm`` saves conversations ``first`` .. ``first + count - 1`` (one timer due between
    ``due``'s two times, spread over ``total`` conversations, and one due at ``parked`` unless 0); ``save`` (the
    baseline) loads and saves 20 conversations of its own round robin for ``seconds``; ``fire`` runs ``fire_due`` for
    ``seconds`` or until it fired ``max``, sleeping ``poll`` when nothing was due, on a clock that reads ``clock``
    when the command arrives (None: the real one).
    """
    from llm_fsm.stores import open_store

    stores: dict[str, Any] = {}
    own: list[str] = []
    print("ready", flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command["mode"] == "exit":
            break
        store = stores.get(command["url"]) or stores.setdefault(command["url"], open_store(command["url"]))
        shift = 0.0 if command.get("clock") is None else command["clock"] - time.time()
        started = time.perf_counter()
        deadline = started + command.get("seconds", 0.0)
        done = stale = 0
        if command["mode"] == "arm":
            low, high = command["due"]
            for n in range(command["first"], command["first"] + command["count"]):
                timers = [(f"{command['prefix']}{n}-due", low + (high - low) * n / command["total"])]
                if command["parked"]:
                    timers.append((f"{command['prefix']}{n}-parked", command["parked"]))
                store.save(conversation(f"{command['prefix']}{n}", *timers), expected_version=None)
                done += 1
        elif command["mode"] == "save":
            while len(own) < 20:
                instance = conversation(f"base-{os.getpid()}-{len(own)}")
                store.save(instance, expected_version=None)
                own.append(instance.conversation_id)
            started = time.perf_counter()
            deadline = started + command["seconds"]
            while time.perf_counter() < deadline:
                instance = store.load_for_turn(own[done % len(own)])
                instance.updated_at = time.time()
                store.save(instance, expected_version=instance.version)
                done += 1
        else:
            most = command.get("max") or sys.maxsize
            while time.perf_counter() < deadline and done < most:
                limit = min(command["limit"], most - done)
                fired, skipped = fire_due(store, now=time.time() + shift, limit=limit, lease=command["lease"])
                done, stale = done + fired, stale + skipped
                if not fired and not skipped:
                    time.sleep(command["poll"])
        print(json.dumps({"done": done, "stale": stale, "seconds": time.perf_counter() - started}), flush=True)
    for store in stores.values():
        store.close()
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


def arm(pool: list[Worker], url: str, conversations: int, **how: Any) -> float:
    """Save ``conversations`` conversations with every worker; returns saves per second."""
    share = -(-conversations // len(pool))
    firsts = range(0, conversations, share)
    commands = [
        {"mode": "arm", "url": url, "first": f, "count": min(share, conversations - f), "total": conversations, **how}
        for f in firsts
    ]
    started = time.perf_counter()
    run(pool[: len(commands)], commands)
    return conversations / (time.perf_counter() - started)


def rates(pool: list[Worker], workers: int, commands: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Operations per second of ``workers`` workers in each mode of ``commands``, their windows taken in ABBA order
    (the first mode, the second twice, the first again), so a machine that gets busier or quieter during the
    phase weighs on both alike."""
    first, second = commands
    totals = {mode: [0.0, 0.0] for mode in commands}
    for mode in (first, second, second, first):
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
    store.close()
    for worker in pool:
        worker.kill()
    pool[:] = spawn(len(pool))
    return {"kills": kills, "drain_seconds": drained}


def recorded(url: str, cids: list[str]) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Every conversation's firings as recorded (trace events, with the time each recorded) and what it still arms."""
    from llm_fsm.stores import open_store

    store: Any = open_store(url)
    events: list[dict[str, Any]] = []
    armed: list[tuple[str, str]] = []
    for cid in cids:
        instance = store.load_for_turn(cid)
        events += [{**e.data, "fired_at": e.timestamp} for e in instance.trace if e.event == FIRED]
        armed += [(cid, t.id) for t in instance.timers]
    store.close()
    return events, armed


def exactly_once(url: str, conversations: int, prefix: str) -> dict[str, int]:
    """Fired twice and lost, counted per timer id from what the conversations recorded."""
    events, armed = recorded(url, [f"{prefix}{n}" for n in range(conversations)])
    counts: dict[str, int] = {}
    for data in events:
        counts[data["timer_id"]] = counts.get(data["timer_id"], 0) + 1
    still_armed = {timer_id for _, timer_id in armed}
    due = [f"{prefix}{n}-due" for n in range(conversations)]
    return {
        "fired": sum(counts.values()),
        "fired_twice": sum(1 for c in counts.values() if c > 1),
        "lost": sum(1 for t in due if counts.get(t, 0) == 0 or t in still_armed),
        "parked_fired": sum(1 for t in counts if t.endswith("-parked")),
    }


def lateness(pool: list[Worker], url: str, *, per_second: float, t0: float, args: argparse.Namespace) -> dict[str, Any]:
    """Timers falling due at ``per_second`` for ``--lateness-seconds`` while every worker polls: each firing's
    lateness, from what it recorded. On a clock a month ahead, so the arming beforehand takes nothing from it."""
    seconds = args.lateness_seconds
    count = max(10, int(per_second * seconds))
    start = t0 + SHIFTED_AHEAD
    arm(pool, url, count, prefix="late", due=(start + 0.5, start + 0.5 + seconds), parked=0.0)
    command = {"mode": "fire", "url": url, "seconds": seconds + 2.0, "limit": 20, "lease": 30.0, "poll": args.poll}
    run(pool, [{**command, "clock": start}] * len(pool))
    events, armed = recorded(url, [f"late{n}" for n in range(count)])
    late_ms = sorted((e["fired_at"] - e["due_at"]) * 1000.0 for e in events)
    return {
        "timers": count,
        "per_second": count / seconds,
        "fired": len(late_ms),
        "unfired": len(armed),
        "p50_ms": statistics.median(late_ms) if late_ms else None,
        "p99_ms": late_ms[min(len(late_ms) - 1, int(0.99 * len(late_ms)))] if late_ms else None,
        "max_ms": late_ms[-1] if late_ms else None,
    }


def bench_store(pool: list[Worker], name: str, url: str, setup_url: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every phase on one store; ``setup_url`` is the same store opened for arming (SQLite: synchronous=OFF)."""
    conversations = args.timers // 2
    t0 = time.time()
    out: dict[str, Any] = {"store": name, "timers": 2 * conversations}
    _progress(f"{name}: arming {2 * conversations:,} timers")
    out["arm_saves_per_second"] = arm(
        pool, setup_url, conversations, prefix="c", due=(t0 - 60, t0), parked=t0 + PARKED_AHEAD
    )
    out["baseline_saves_per_second"], out["fires_per_second"] = {}, {}
    for w in WORKERS:
        _progress(f"{name}: plain saves and claim and fire, {w} worker(s)")
        half = args.seconds / 2
        most = conversations // 6 // w  # each window leaves the kill -9 phase a backlog to drain
        fire = {"mode": "fire", "url": url, "seconds": half, "limit": 20, "lease": 30.0, "poll": args.poll, "max": most}
        measured = rates(pool, w, {"save": {"mode": "save", "url": url, "seconds": half}, "fire": fire})
        out["baseline_saves_per_second"][w], out["fires_per_second"][w] = measured["save"], measured["fire"]
    out["x_baseline"] = {w: out["fires_per_second"][w] / out["baseline_saves_per_second"][w] for w in WORKERS}
    _progress(f"{name}: draining the backlog, kill -9 every {args.kill_every} s")
    out["kill9"] = chaos(pool, url, parked=conversations, args=args)
    out["kill9"].update(exactly_once(url, conversations, "c"))
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
        "Timers: claim and fire (fires/s), against the same store's plain load + save (saves/s), same run",
        [("store", 10, "s"), ("timers", 8, ",d"), ("workers", 7, "d"), ("saves/s", 9, ",.0f"), ("fires/s", 9, ",.0f")]
        + [("x save", 7, ".2f")],
        [
            [
                r["store"],
                r["timers"],
                w,
                r["baseline_saves_per_second"][w],
                r["fires_per_second"][w],
                r["x_baseline"][w],
            ]
            for r in results
            for w in WORKERS
        ],
    )
    _table(
        "kill -9 of workers while draining the backlog (counted per timer id from what the conversations recorded)",
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
        print(f"{r['store']}: arming saved {r['arm_saves_per_second']:,.0f} conversations/s (4 processes)")
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
    parser.add_argument(
        "--lease", type=float, default=2.0, help="claim lease: how soon a killed worker's claims return"
    )
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
