"""Engine overhead per turn: this tree beside a git revision of it, measured in the same run.

``engine.py`` compares our engine with the original package; a change to our engine is judged against
our engine before it. Both sides run ``engine.py``'s own runner (same definition, script and
zero-latency fake model), each in its own interpreter that imports ``llm_fsm`` from its tree (the
revision's is extracted with ``git archive``); timing rounds alternate A B B A, so a machine that
gets busier slows both alike. Read the ratios: the milliseconds move with the machine's load.

    python benchmarks/engine_against.py --against main                 # 30 runs of the form turns, 6 rounds
    python benchmarks/engine_against.py --against ff73379 --timing-runs 60 --turns-long 300
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class Side:
    """One tree's engine in its own interpreter, answering ``engine.OursRunner`` requests line by line."""

    def __init__(self, tree: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        self.tree = tree
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--driver", str(tree)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )

    def request(self, job: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the driver for {self.tree} stopped (exit {self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)


def drive(tree: Path) -> None:
    """The driver: ``llm_fsm`` from ``tree`` (ahead of this repository, which ``engine`` puts first)."""
    sys.path.insert(0, str(HERE))
    import engine

    sys.path.insert(0, str(tree))
    runner = engine.OursRunner()
    for line in sys.stdin:
        answer = runner.request(json.loads(line))
        if "module_file" in answer and not answer["module_file"].startswith(str(tree)):
            raise SystemExit(f"llm_fsm was imported from {answer['module_file']}, not from {tree}")
        print(json.dumps(answer), flush=True)


def extract(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "llm_fsm"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", required=False, help="the git revision to measure beside this tree")
    parser.add_argument("--timing-runs", type=int, default=30, help="timed runs of the 10 form turns per side")
    parser.add_argument("--rounds", type=int, default=6, help="alternating rounds the runs are split into")
    parser.add_argument("--turns-long", type=int, default=200, help="user turns in the long run (default 200)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--driver", metavar="TREE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        drive(Path(args.driver))
        return 0
    if not args.against:
        parser.error("--against REV is required")
    sys.path.insert(0, str(HERE))
    import engine
    from scenario import build_scenario

    scenario = build_scenario(args.turns_long)
    rounds = max(1, min(args.rounds, args.timing_runs))
    with tempfile.TemporaryDirectory() as scratch:
        sides = {"this tree": Side(ROOT), args.against: Side(extract(args.against, Path(scratch)))}
        try:
            raw = engine.measure(
                sides, scenario, timing_runs=args.timing_runs, rounds=rounds, warmup=3, capture_at=[1, 10]
            )
        finally:
            for side in sides.values():
                side.close()
    figures = {name: engine.summarise(records, scenario)["overhead_ms"] for name, records in raw.items()}
    followed = {name: engine.summarise(records, scenario)["followed_script"] for name, records in raw.items()}
    if args.json:
        print(json.dumps({"overhead_ms": figures, "followed_script": followed}, indent=2))
        return 0
    now, before = figures["this tree"], figures[args.against]
    print(f"engine overhead per turn, ms ({scenario.short_length} form turns x {args.timing_runs} runs, A B B A)")
    print(f"{'':34}{'this tree':>12}{args.against:>12}{'ratio':>8}")
    for key, label in (
        ("form_turns_mean_of_medians", "form turns, median of runs"),
        ("form_turns_mean_of_minima", "form turns, best of runs"),
        ("long_run_mean", f"long run, turns 1..{args.turns_long}"),
        ("long_run_last_100_mean", "long run, last 100 turns"),
    ):
        print(f"{label:34}{now[key]:12.3f}{before[key]:12.3f}{now[key] / before[key]:8.2f}")
    print("followed the script: " + ", ".join(f"{name} {'yes' if ok else 'NO'}" for name, ok in followed.items()))
    return 0 if all(followed.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
