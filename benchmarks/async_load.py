"""Many conversations at once on the async API: turns per second and how late the event loop runs.

Workload (the hardening issue's): ``--conversations`` conversations (1,000) × ``--turns`` turns (5), all
in flight together on one event loop, the memory store, and a fake model that takes ``--latency``
seconds (50 ms) per call: awaited (a native async interface) or slept in a thread (an interface with
only ``send_request``). A ticker task asks to wake every millisecond; how late it wakes is the loop's
lag, the delay every other coroutine of the host application would see.

``--against REV`` measures a git revision of this repository in the same run, with the same workload
(its library is extracted with ``git archive`` into a temporary directory), and prints ours as a ratio
of it; the two alternate (A B B A) so a machine that gets busier slows both alike.

    python benchmarks/async_load.py --against 46096bc          # the issue's figures, before and after
    python benchmarks/async_load.py --conversations 200 --quick  # a smoke run

Each measurement runs in a fresh interpreter (``--worker``), so one revision's threads and caches
never touch the other's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

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


def worker(conversations: int, turns: int, latency: float, mode: str, slots: int | None) -> dict[str, float]:
    """One measurement, in this interpreter, with whatever llm_fsm is first on sys.path."""
    import asyncio
    import time

    from llm_fsm import FSMDefinition, FSMManager, LLMInterface, LLMResponse

    definition = FSMDefinition.model_validate(LOOP)
    reply = {"transition": {"target_state": "talk", "context_update": {}}, "message": "ok"}

    class SyncModel(LLMInterface):
        def send_request(self, request):  # type: ignore[no-untyped-def]
            time.sleep(latency)
            return LLMResponse.model_validate(reply)

    class AsyncModel(SyncModel):
        async def asend_request(self, request):  # type: ignore[no-untyped-def]
            await asyncio.sleep(latency)
            return LLMResponse.model_validate(reply)

    model = AsyncModel() if mode == "async" else SyncModel()
    extra = {"max_concurrent_turns": slots} if slots else {}  # revisions before the bound do not take it
    manager = FSMManager(fsm_loader=lambda _id: definition, llm_interface=model, **extra)

    async def main() -> dict[str, float]:
        ids = [(await manager.astart_conversation("loop"))[0] for _ in range(conversations)]
        lags: list[float] = []
        stop = asyncio.Event()

        async def ticker() -> None:
            while not stop.is_set():
                asked = time.perf_counter()
                await asyncio.sleep(0.001)
                lags.append(time.perf_counter() - asked - 0.001)

        async def converse(cid: str) -> None:
            for turn in range(turns):
                await manager.aprocess_message(cid, f"message {turn}")

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
            "wall_s": wall,
            "cpu_ms_per_turn": cpu / done * 1000,
            "lag_p50_ms": lags[len(lags) // 2] * 1000,
            "lag_p99_ms": lags[min(len(lags) - 1, int(len(lags) * 0.99))] * 1000,
            "lag_max_ms": lags[-1] * 1000,
        }

    return asyncio.run(main())


def measure(tree: Path, args: argparse.Namespace, mode: str) -> dict[str, float]:
    command = [
        sys.executable,
        __file__,
        "--worker",
        mode,
        "--conversations",
        str(args.conversations),
        "--turns",
        str(args.turns),
        "--latency",
        str(args.latency),
    ]
    if args.max_concurrent_turns and tree == ROOT:
        command += ["--max-concurrent-turns", str(args.max_concurrent_turns)]
    env = dict(os.environ, PYTHONPATH=str(tree), LITELLM_LOCAL_MODEL_COST_MAP="True")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
    if done.returncode != 0:
        return {"error": 1.0, "stderr": done.stderr[-500:]}  # type: ignore[dict-item]
    return json.loads(done.stdout.strip().splitlines()[-1])


def extract(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "llm_fsm"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = runs[0].keys()
    return {k: statistics.median(r[k] for r in runs) for k in keys}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per model call (default 0.05)")
    parser.add_argument("--against", metavar="REV", help="also measure this git revision, in the same run")
    parser.add_argument("--runs", type=int, default=2, help="measurements per side and mode (default 2)")
    parser.add_argument("--quick", action="store_true", help="one run per side and mode")
    parser.add_argument("--timeout", type=float, default=600, help="seconds before a measurement is abandoned")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--max-concurrent-turns", type=int, help="our FSMManager's bound on async turns in flight (default: its own)"
    )
    parser.add_argument("--worker", choices=["async", "sync"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.conversations, args.turns, args.latency, args.worker, args.max_concurrent_turns)))
        return
    runs = 1 if args.quick else args.runs
    with tempfile.TemporaryDirectory() as scratch:
        sides = {"ours": ROOT}
        if args.against:
            sides[args.against] = extract(args.against, Path(scratch))
        results: dict[str, dict[str, dict[str, float]]] = {}
        for mode in ("async", "sync"):
            collected: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
            order = list(sides)
            for index in range(runs * len(order)):
                side = order[index % len(order)] if (index // len(order)) % 2 == 0 else order[::-1][index % len(order)]
                figures = measure(sides[side], args, mode)
                if "error" in figures:
                    print(f"{side} {mode}: failed: {figures.get('stderr')}", file=sys.stderr)
                    continue
                collected[side].append(figures)
            results[mode] = {side: median_of(runs_) for side, runs_ in collected.items() if runs_}
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(
        f"{args.conversations} conversations x {args.turns} turns, model latency {args.latency * 1000:.0f} ms, "
        f"memory store; median of {runs} run(s) per side; {os.cpu_count()} cores"
    )
    header = f"{'model':6} {'side':10} {'turns/s':>9} {'cpu ms/turn':>12} {'lag p50':>8} {'lag p99':>8} {'lag max':>8}"
    print(header)
    for mode, sides_ in results.items():
        for side, f in sides_.items():
            print(
                f"{mode:6} {side:10} {f['turns_per_s']:9.0f} {f['cpu_ms_per_turn']:12.3f} "
                f"{f['lag_p50_ms']:7.1f}ms {f['lag_p99_ms']:7.1f}ms {f['lag_max_ms']:7.1f}ms"
            )
    if args.against:
        for mode, sides_ in results.items():
            if "ours" in sides_ and args.against in sides_:
                ours, before = sides_["ours"], sides_[args.against]
                ratio = ours["turns_per_s"] / before["turns_per_s"]
                print(
                    f"{mode} model: turns/s {ratio:.2f}x of {args.against}; "
                    f"lag p99 {ours['lag_p99_ms']:.1f} ms vs {before['lag_p99_ms']:.1f} ms"
                )
    async_ours = results.get("async", {}).get("ours")
    if async_ours:
        verdict = "met" if async_ours["lag_p99_ms"] <= 10 else "MISSED"
        print(f"target: lag p99 <= 10 ms with the async model: {async_ours['lag_p99_ms']:.1f} ms, {verdict}")


if __name__ == "__main__":
    main()
