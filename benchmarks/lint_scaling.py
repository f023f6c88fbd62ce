"""How fsm-lint scales, beside json.loads of the same bytes, and what hostile files cost it.

Part 1, scaling. Generated definitions of 300, 1,000, 10,000 and 50,000 states.
State i collects key ``k<i>`` and has four guarded transitions to the next
four states, each with one condition: ``requires_context_keys: [k<i>]`` and
the and-rule ``{"and": [{">=": [{"var": "k<i>"}, b]}, {"<": [{"var": "k<i>"}, 100]}]}``
(distinct priorities); the last state is terminal. Written with ``json.dumps(indent=1)``
(10,000 states: 23 MB). For each size, in this process and taking turns (so a
busier machine slows both alike), best of ``--repeat``:

- ``json.loads``: the bytes parsed as a program would, the garbage collector on;
- ``json.loads (GC paused)``: the same with the collector paused, the floor;
- ``lint``: ``lint_document(parse_text(...))``, what fsm-lint does per file,
  the collector on (lint pauses it itself while it builds; see ``paused_gc``);
- ratios of lint to each json.loads, and lint's seconds per 1,000 states
  against the first size (1.00 = linear);
- the ``fsm-lint`` command on the same file in a fresh process: wall seconds
  (interpreter start and imports included) and peak resident memory;
- the original LLM-FSM's validator (llm-fsm 0.1.1, ``validate_fsm_from_file``,
  what its ``llm-fsm-validate`` runs) on the same file, in its own virtualenv
  and process (``baseline/original_env.py``; never imported here), stopped
  after ``--original-timeout`` seconds.

Part 2, hostile files (``hostile()``: nested lists where the schema wants
strings and objects, deep, broad and wide) of about 1 MB and 4.6 MB, under the
5 MiB cap: ``fsm-lint`` in a fresh process, wall seconds and peak memory, beside
a fresh process that only runs ``json.loads`` on the same bytes.

    python benchmarks/lint_scaling.py                      # everything (a few minutes)
    python benchmarks/lint_scaling.py --max-states 10000   # quicker
    python benchmarks/lint_scaling.py --no-original --no-hostile --repeat 1
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(REPO_ROOT))  # our llm_fsm from this source tree
sys.path.insert(0, str(HERE / "baseline"))

from llm_fsm.definition._documents import parse_text  # noqa: E402
from llm_fsm.lint._linter import lint_document  # noqa: E402

SIZES = (300, 1_000, 10_000, 50_000)
HOSTILE_SIZES = (1_000_000, 4_660_000)


def generate(states: int, transitions: int = 4) -> dict[str, Any]:
    """A definition of ``states`` states, each with ``transitions`` conditioned transitions to the next ones."""
    out: dict[str, Any] = {}
    for i in range(states):
        ts = []
        for b in range(1, transitions + 1):
            target = i + b
            if target >= states:
                break
            ts.append(
                {
                    "target_state": f"s{target}",
                    "description": f"to s{target}",
                    "priority": b,
                    "conditions": [
                        {
                            "description": f"{b} <= k{i} < 100",
                            "requires_context_keys": [f"k{i}"],
                            "logic": {"and": [{">=": [{"var": f"k{i}"}, b]}, {"<": [{"var": f"k{i}"}, 100]}]},
                        }
                    ],
                }
            )
        out[f"s{i}"] = {
            "id": f"s{i}",
            "description": f"state {i}",
            "purpose": f"collect k{i}",
            "required_context_keys": [f"k{i}"],
            "transitions": ts,
        }
    return {
        "name": f"generated {states}x{transitions}",
        "description": "benchmark definition",
        "initial_state": "s0",
        "version": "3.0",
        "states": out,
    }


# --- hostile files ---------------------------------------------------------------------------------

#: shapes of hostile files: lists nested where the schema wants strings and objects
HOSTILE_SHAPES = ("deep", "broad", "wide", "objects")


def hostile(size: int, shape: str = "broad") -> str:
    """JSON text of about ``size`` bytes (at least) that breaks the schema everywhere with nested lists.

    - ``deep``: every state's id, transitions, keys and dialogue are lists nested 900 deep (close to what
      json.loads can parse), so every value sits 900 levels down;
    - ``broad``: the same fields hold lists four wide and four deep (256 leaves each), so every field is a
      wide tree of wrong values;
    - ``wide``: one state whose transitions are a single list of empty lists, one schema error per 3 bytes;
    - ``objects``: the same with objects that lack both required fields and carry an unknown one (one object
      per 14 bytes: few enough to pass the limit on objects and arrays, see ``loading.BYTES_PER_CONTAINER``).
    """
    if shape in ("wide", "objects"):
        item = "[]" if shape == "wide" else '{"target": 1}'
        count = max(1, (size - 120) // (len(item) + 1))
        return (
            '{"name": "hostile", "description": "' + shape + '", "initial_state": "s0", "states": {"s0": '
            '{"id": "s0", "description": "d", "purpose": "p", "transitions": [' + ",".join([item] * count) + "]}}}"
        )
    if shape == "deep":
        leaf = "[" * 900 + "]" * 900
    elif shape == "broad":
        leaf = "[]"
        for _ in range(4):
            leaf = "[" + ",".join([leaf] * 4) + "]"
    else:
        raise ValueError(f"unknown shape {shape!r}; one of {', '.join(HOSTILE_SHAPES)}")
    states = []
    total = 0
    while total < size:
        i = len(states)
        state = (
            f'"s{i}": {{"id": {leaf}, "description": "d", "purpose": "p", "transitions": [{leaf}, {leaf}], '
            f'"required_context_keys": [{leaf}, {leaf}], "example_dialogue": [{leaf}]}}'
        )
        states.append(state)
        total += len(state) + 2
    head = '{"name": "hostile", "description": "' + shape + '", "initial_state": "s0", "states": {'
    return head + ", ".join(states) + "}}"


# --- measuring ---------------------------------------------------------------------------------------


def best_of(repeat: int, *funcs: Callable[[], Any]) -> list[float]:
    """The fastest of ``repeat`` runs of each function, the functions taking turns within each round."""
    best = [float("inf")] * len(funcs)
    for _ in range(repeat):
        for i, func in enumerate(funcs):
            gc.collect()
            start = time.perf_counter()
            func()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def loads_paused(text: str) -> Any:
    gc.disable()
    try:
        return json.loads(text)
    finally:
        gc.enable()


#: run first in a measured process: at exit it reports its own peak (VmHWM). The rusage of a child is no
#: good here: subprocess starts it with vfork, and its ru_maxrss then counts this process's memory too.
PEAK = """
import atexit, sys
def _peak():
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    sys.stderr.write("PEAK " + line.split()[1] + "\\n")
    except OSError:
        pass
atexit.register(_peak)
"""


#: seconds before a measured process is stopped (see --timeout)
TIMEOUT = [600.0]


def in_fresh_process(code: str, *args: str) -> tuple[float, float, str]:
    """(wall seconds, peak resident MB, stdout) of ``python -c code args`` with our package on its path."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", PEAK + code, *args], capture_output=True, text=True, env=env, timeout=TIMEOUT[0]
        )
    except subprocess.TimeoutExpired:
        return float("inf"), float("nan"), f"stopped after {TIMEOUT[0]:.0f} s"
    seconds = time.perf_counter() - start
    peaks = [line.split()[1] for line in done.stderr.splitlines() if line.startswith("PEAK ")]
    return seconds, int(peaks[-1]) / 1024 if peaks else float("nan"), done.stdout


FSM_LINT = "from llm_fsm.cli import lint_main; lint_main()"
LOADS = (
    "import json, sys, time; t = open(sys.argv[1], 'rb').read(); "
    "s = time.perf_counter(); json.loads(t); print(time.perf_counter() - s)"
)


def run_cli(path: str, size: int) -> tuple[float, float, str]:
    seconds, peak, out = in_fresh_process(FSM_LINT, "--max-bytes", str(max(size * 2, 5 * 1024 * 1024)), path)
    return seconds, peak, out.strip().splitlines()[-1] if out.strip() else ""


# --- the original --------------------------------------------------------------------------------------


class Original:
    """The original's validator in its own venv and process, or why it cannot be measured."""

    def __init__(self, enabled: bool, timeout: float) -> None:
        self.timeout = timeout
        self.session: Any = None
        self.why = "not measured (--no-original)" if not enabled else ""
        if not enabled:
            return
        from original_env import BASELINES, BaselineUnavailable, DriverSession, is_ready

        baseline = BASELINES["original"]
        try:
            if not is_ready(baseline):
                print(f"building the baseline venv for {baseline.label} (first run only)...", file=sys.stderr)
            self.session = DriverSession(baseline, timeout=timeout + 120).__enter__()
            self.label = baseline.label
        except BaselineUnavailable as exc:
            self.why = "not measured: " + str(exc).splitlines()[0]

    def validate(self, path: str) -> str:
        if self.session is None:
            return self.why
        try:
            answer = self.session.request({"op": "validate", "path": path, "timeout": self.timeout})
        except Exception as exc:  # noqa: BLE001 - the original's process failed: say so, keep ours
            self.session = None
            self.why = f"not measured: its driver failed ({type(exc).__name__})"
            return self.why
        if answer["outcome"] == "timeout":
            return f"> {self.timeout:.0f} s (stopped; its cycle search walks every path)"
        errors = answer["errors"]
        if any("recursion" in e for e in errors):
            return f"{answer['seconds']:.2f} s: RecursionError, reported as '{errors[0][:60]}'"
        return f"{answer['seconds']:.2f} s ({answer['outcome']}, {len(errors)} errors, {answer['warnings']} warnings)"

    def close(self) -> None:
        if self.session is not None:
            self.session.__exit__(None, None, None)


# --- the report ---------------------------------------------------------------------------------------


def scaling(sizes: list[int], repeat: int, original: Original, folder: str) -> None:
    print(
        f"{'states':>7} {'MB':>6} {'json.loads':>10} {'(GC paused)':>11} {'lint':>7} {'÷loads':>7} {'÷paused':>8} "
        f"{'s/1000':>7} {'linear':>6} {'findings':>8} {'fsm-lint s':>10} {'peak MB':>8}"
    )
    # "linear" is judged from 1,000 states on when that size is measured: below, fixed costs weigh
    base_size = min((s for s in sizes if s >= 1_000), default=sizes[0] if sizes else 0)
    base: float | None = None
    lint_document(parse_text(json.dumps(generate(50)), file="warm-up.json"))  # first-use costs out of the figures
    originals: list[tuple[int, str]] = []
    for size in sizes:
        text = json.dumps(generate(size), indent=1)
        rounds = repeat if size < 20_000 else 1
        loads, paused, lint = best_of(
            rounds,
            lambda text=text: json.loads(text),
            lambda text=text: loads_paused(text),
            lambda text=text: lint_document(parse_text(text, file="generated.json")),
        )
        findings = len(lint_document(parse_text(text, file="generated.json")).diagnostics)
        gc.collect()
        path = os.path.join(folder, f"generated-{size}.json")
        Path(path).write_text(text, encoding="utf-8")
        cli_seconds, cli_peak, _ = run_cli(path, len(text))
        per = lint / size * 1000
        if size == base_size:
            base = per
        print(
            f"{size:>7} {len(text) / 1e6:>6.1f} {loads:>10.3f} {paused:>11.3f} {lint:>7.3f} {lint / loads:>7.2f} "
            f"{lint / paused:>8.2f} {per:>7.3f} {_ratio(per, base):>6} {findings:>8} "
            f"{cli_seconds:>10.2f} {cli_peak:>8.0f}",
            flush=True,
        )
        originals.append((size, original.validate(path)))
        os.unlink(path)
        del text
        gc.collect()
    print("json.loads: the same bytes, collector on (as a program calls it); (GC paused): collector off")
    print("lint: parse_text + lint_document, collector on; ÷: lint divided by each json.loads")
    print(f"linear: lint's seconds per 1,000 states relative to those at {base_size:,} states (1.00 = linear)")
    print("fsm-lint s, peak MB: the command on the same file in a fresh process (start-up and imports included)")
    label = getattr(original, "label", "llm-fsm 0.1.1 (original)")
    for size, verdict in originals:
        print(f"{label} validator, {size:,} states: {verdict}")


def _ratio(value: float, base: float | None) -> str:
    return f"{value / base:.2f}" if base else "-"


def hostile_files(sizes: list[int], folder: str) -> None:
    print()
    print(
        f"{'hostile file':<14} {'MB':>5} {'json.loads s':>12} {'peak MB':>8} {'fsm-lint s':>10} {'peak MB':>8} "
        f"{'÷ s':>6} {'÷ MB':>6}  result"
    )
    for shape in HOSTILE_SHAPES:
        for size in sizes:
            text = hostile(size, shape)
            path = os.path.join(folder, f"hostile-{shape}-{size}.json")
            Path(path).write_text(text, encoding="utf-8")
            loads_wall, loads_peak, loads_out = in_fresh_process(LOADS, path)
            loads_seconds = float(loads_out.strip() or "nan")
            seconds, peak, out = in_fresh_process(FSM_LINT, path)
            summary = out.strip().splitlines()[-1] if out.strip() else ""
            print(
                f"{shape + ' ' + format(size / 1e6, '.2f'):<14} {len(text) / 1e6:>5.2f} {loads_seconds:>12.3f} "
                f"{loads_peak:>8.0f} {seconds:>10.2f} {peak:>8.0f} {seconds / loads_wall:>6.1f} "
                f"{peak / loads_peak:>6.2f}  {summary}",
                flush=True,
            )
            os.unlink(path)
    print("json.loads s: json.loads alone; peak MB: of the process (start-up included) that only parses the file")
    print("fsm-lint s, peak MB: the command in a fresh process; ÷ s: its wall time over that of the json.loads process")
    print("targets (the hardening issue): any file under the 5 MiB cap in <= 2 s and <= 200 MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES), help="states per generated definition")
    parser.add_argument("--max-states", type=int, default=None, help="leave out sizes above this")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per size (sizes of 20,000 states and up: 1)")
    parser.add_argument("--no-original", action="store_true", help="do not measure the original's validator")
    parser.add_argument("--original-timeout", type=float, default=60.0, help="seconds before the original is stopped")
    parser.add_argument("--no-hostile", action="store_true", help="leave out the hostile files")
    parser.add_argument("--no-scaling", action="store_true", help="only the hostile files")
    parser.add_argument("--hostile-sizes", default=",".join(str(s) for s in HOSTILE_SIZES), help="bytes per file")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before a measured process is stopped")
    args = parser.parse_args()
    TIMEOUT[0] = args.timeout
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.max_states is not None:
        sizes = [s for s in sizes if s <= args.max_states]
    with tempfile.TemporaryDirectory(prefix="lint-scaling-") as folder:
        if not args.no_scaling:
            original = Original(not args.no_original, args.original_timeout)
            try:
                scaling(sizes, args.repeat, original, folder)
            finally:
                original.close()
        if not args.no_hostile:
            hostile_files([int(s) for s in args.hostile_sizes.split(",") if s], folder)


if __name__ == "__main__":
    main()
