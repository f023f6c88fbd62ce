"""The Redis store on the async API: native ``redis.asyncio`` twins against the thread-pool twins they replace.

Workload (``async_load.py``'s, on Redis): ``--conversations`` conversations (500) × ``--turns`` turns (5),
all in flight on one event loop, a fake async model that takes ``--latency`` seconds (50 ms) per call and
the Redis store (a ``redis-server`` started on a free loopback port, no persistence, unless
``--redis-url`` names one). A ticker task asks to wake every millisecond; how late it wakes is the
loop's lag.

Two modes of this tree, each measurement in a fresh interpreter, alternating A B B A:

- ``native``: ``RedisStore`` as it is: its async methods await a ``redis.asyncio`` client of the loop;
- ``threads``: the same store with the async methods of ``AsyncStoreMixin`` put back: each store call
  runs the sync method on the library's thread pool (what every async store call did before).

    python benchmarks/redis_async.py                   # 2 runs a mode
    python benchmarks/redis_async.py --quick --conversations 200
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

LOOP = {
    "name": "loop",
    "description": "one state that keeps talking",
    "initial_state": "talk",
    "states": {
        "talk": {
            "id": "talk",
            "description": "talk",
            "purpose": "answer",
            "transitions": [{"target_state": "talk", "description": "again"}],
        }
    },
}


def worker(url: str, conversations: int, turns: int, latency: float, mode: str) -> dict[str, float]:
    """One measurement, in this interpreter."""
    import asyncio
    import time

    from llm_fsm import FSMDefinition, FSMManager
    from llm_fsm.llm.fakes import FunctionLLM
    from llm_fsm.stores.base import AsyncStoreMixin
    from llm_fsm.stores.redis import RedisStore

    class ThreadedRedisStore(RedisStore):
        """The Redis store with the thread-pool async twins every store had before the native path."""

    for name in ("aload", "aload_for_turn", "asave", "adelete", "alist", "atranscript", "aexpire"):
        setattr(ThreadedRedisStore, name, getattr(AsyncStoreMixin, name))

    definition = FSMDefinition.model_validate(LOOP)
    reply = {"transition": {"target_state": "talk", "context_update": {}}, "message": "ok"}

    async def model(request: Any) -> dict[str, Any]:
        await asyncio.sleep(latency)
        return reply

    store = (ThreadedRedisStore if mode == "threads" else RedisStore)(url, prefix=f"bench{os.getpid()}")
    manager = FSMManager(fsm_loader=lambda _id: definition, llm_interface=FunctionLLM(model), store=store)

    async def main() -> dict[str, float]:
        ids = [
            cid for cid, _ in await asyncio.gather(*(manager.astart_conversation("loop") for _ in range(conversations)))
        ]
        lags: list[float] = []
        stop = asyncio.Event()

        async def ticker() -> None:
            while not stop.is_set():
                asked = time.perf_counter()
                await asyncio.sleep(0.001)
                lags.append(time.perf_counter() - asked - 0.001)

        async def converse(cid: str) -> None:
            for turn in range(turns):
                await manager.aprocess_message(cid, f"message {turn}", f"{cid}-{turn}")

        tick = asyncio.create_task(ticker())
        cpu0, wall0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(converse(cid) for cid in ids))
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        stop.set()
        await tick
        lags.sort()
        done = conversations * turns
        return {
            "turns_per_s": done / wall,
            "cpu_ms_per_turn": cpu / done * 1000,
            "threads": float(len(__import__("threading").enumerate())),
            "lag_p50_ms": lags[len(lags) // 2] * 1000,
            "lag_p99_ms": lags[min(len(lags) - 1, int(len(lags) * 0.99))] * 1000,
            "lag_max_ms": lags[-1] * 1000,
        }

    try:
        return asyncio.run(main())
    finally:
        store.close()


def measure(url: str, args: argparse.Namespace, mode: str) -> dict[str, float]:
    command = [sys.executable, __file__, "--worker", mode, "--redis-url", url]
    command += ["--conversations", str(args.conversations), "--turns", str(args.turns), "--latency", str(args.latency)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), LITELLM_LOCAL_MODEL_COST_MAP="True")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
    if done.returncode != 0:
        raise SystemExit(f"{mode}: the worker failed:\n{done.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--conversations", type=int, default=500)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per model call (default 0.05)")
    parser.add_argument("--runs", type=int, default=2, help="measurements per mode (default 2)")
    parser.add_argument("--quick", action="store_true", help="one run per mode")
    parser.add_argument("--redis-url", default=None, help="use this Redis instead of starting one")
    parser.add_argument("--timeout", type=float, default=600, help="seconds before a measurement is abandoned")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--worker", choices=["native", "threads"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        figures = worker(args.redis_url, args.conversations, args.turns, args.latency, args.worker)
        print(json.dumps(figures))
        return
    from stores import RedisServer  # benchmarks/stores.py: a throwaway redis-server

    server = None
    url = args.redis_url
    if url is None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("redis-server is not installed (apt-get install redis-server), or pass --redis-url")
        server = RedisServer(binary)
        url = server.url
    runs = 1 if args.quick else args.runs
    collected: dict[str, list[dict[str, float]]] = {"native": [], "threads": []}
    try:
        for index in range(runs):
            for mode in ("native", "threads") if index % 2 == 0 else ("threads", "native"):
                collected[mode].append(measure(url, args, mode))
    finally:
        if server is not None:
            server.stop()
    results = {mode: {k: statistics.median(r[k] for r in runs_) for k in runs_[0]} for mode, runs_ in collected.items()}
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(
        f"{args.conversations} conversations x {args.turns} turns on Redis, async model latency "
        f"{args.latency * 1000:.0f} ms; median of {runs} run(s) per mode (A B B A); {os.cpu_count()} cores"
    )
    print(f"{'mode':8} {'turns/s':>9} {'cpu ms/turn':>12} {'threads':>8} {'lag p50':>8} {'lag p99':>8} {'lag max':>8}")
    for mode, f in results.items():
        print(
            f"{mode:8} {f['turns_per_s']:9.0f} {f['cpu_ms_per_turn']:12.3f} {f['threads']:8.0f} "
            f"{f['lag_p50_ms']:7.1f}ms {f['lag_p99_ms']:7.1f}ms {f['lag_max_ms']:7.1f}ms"
        )
    native, threads = results["native"], results["threads"]
    print(
        f"SUMMARY native redis.asyncio: {native['turns_per_s'] / threads['turns_per_s']:.2f}x the turns/s of the "
        f"thread-pool twins, {native['cpu_ms_per_turn'] / threads['cpu_ms_per_turn']:.2f}x the CPU per turn; "
        f"lag p99 {native['lag_p99_ms']:.1f} ms vs {threads['lag_p99_ms']:.1f} ms"
    )


if __name__ == "__main__":
    main()
