"""How fsm-lint scales: generated definitions of 300, 1,000 and 10,000 states, 16 branches each.

Each state i collects key ``k<i>`` and has 16 guarded transitions to the next
16 states (distinct priorities, a JsonLogic rule reading the collected key);
the last state is terminal. That is the shape of the reference figure: the
original LLM-FSM validator takes 12.8 s on a 300-state definition with 16
branches per state and hits Python's recursion limit at 1,000 states (figure
measured by the project's other benchmark, not here).

Prints, per size: states, transitions, seconds to lint the data (validation,
JsonLogic compilation and every check), seconds per 1,000 states and its ratio
against the first size measured in the same run (1.0 = linear); the same with
the cyclic garbage collector paused, which isolates the algorithm from the
interpreter's GC passes (they grow with the heap); and seconds to parse the
JSON text and lint it.

    python benchmarks/lint_scaling.py [--sizes 300,1000,10000] [--branches 16] [--repeat 1]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from typing import Any

from llm_fsm.definition._documents import parse_text
from llm_fsm.lint._linter import lint_data, lint_document


def generate(states: int, branches: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i in range(states):
        transitions = []
        for b in range(1, branches + 1):
            target = i + b
            if target >= states:
                break
            transitions.append(
                {
                    "target_state": f"s{target}",
                    "description": f"branch {b} from s{i}",
                    "priority": b,
                    "conditions": [
                        {
                            "description": f"k{i} is at least {b}",
                            "requires_context_keys": [f"k{i}"],
                            "logic": {">=": [{"var": f"k{i}"}, b]},
                        }
                    ],
                }
            )
        out[f"s{i}"] = {
            "id": f"s{i}",
            "description": f"state {i}",
            "purpose": f"collect k{i}",
            "required_context_keys": [f"k{i}"],
            "transitions": transitions,
        }
    return {
        "name": f"generated {states}x{branches}",
        "description": "benchmark definition",
        "initial_state": "s0",
        "version": "3.0",
        "states": out,
    }


# --- hostile files ---------------------------------------------------------------------------------

#: shapes of hostile files: lists nested where the schema wants strings and objects
HOSTILE_SHAPES = ("deep", "broad", "wide")


def hostile(size: int, shape: str = "broad") -> str:
    """JSON text of about ``size`` bytes (at least) that breaks the schema everywhere with nested lists.

    - ``deep``: every state's id, transitions, keys and dialogue are lists nested 900 deep (close to what
      json.loads can parse), so every value sits 900 levels down;
    - ``broad``: the same fields hold lists four wide and four deep (256 leaves each), so every field is a
      wide tree of wrong values;
    - ``wide``: one state whose transitions are a single list of empty lists, one schema error per 3 bytes.
    """
    if shape == "wide":
        count = max(1, (size - 120) // 3)
        return (
            '{"name": "hostile", "description": "wide", "initial_state": "s0", "states": {"s0": '
            '{"id": "s0", "description": "d", "purpose": "p", "transitions": [' + ",".join(["[]"] * count) + "]}}}"
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
    return (
        '{"name": "hostile", "description": "'
        + shape
        + '", "initial_state": "s0", "states": {'
        + ", ".join(states)
        + "}}"
    )


def best_of(repeat: int, func: Any, *, collect: bool = True) -> tuple[float, Any]:
    """Fastest of ``repeat`` runs; with ``collect=False`` the cyclic GC is off while timing."""
    best = float("inf")
    result = None
    for _ in range(repeat):
        gc.collect()
        if not collect:
            gc.disable()
        try:
            start = time.perf_counter()
            result = func()
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="300,1000,10000")
    parser.add_argument("--branches", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    print(
        f"{'states':>7} {'transitions':>11} {'lint s':>8} {'s/1000':>7} {'ratio':>6} "
        f"{'no-GC s':>8} {'s/1000':>7} {'ratio':>6} {'parse+lint s':>12} {'findings':>8}"
    )
    base: tuple[float, float] | None = None
    for size in sizes:
        data = generate(size, args.branches)
        transitions = sum(len(s["transitions"]) for s in data["states"].values())
        lint_seconds, result = best_of(args.repeat, lambda data=data: lint_data(data))
        nogc_seconds, _ = best_of(args.repeat, lambda data=data: lint_data(data), collect=False)
        text = json.dumps(data, indent=1)
        full_seconds, _ = best_of(args.repeat, lambda text=text: lint_document(parse_text(text, file="generated.json")))
        per = lint_seconds / size * 1000
        per_nogc = nogc_seconds / size * 1000
        base = base or (per, per_nogc)
        print(
            f"{size:>7} {transitions:>11} {lint_seconds:>8.3f} {per:>7.3f} {per / base[0]:>6.2f} "
            f"{nogc_seconds:>8.3f} {per_nogc:>7.3f} {per_nogc / base[1]:>6.2f} {full_seconds:>12.3f} "
            f"{len(result.diagnostics):>8}"
        )
    print("ratio: seconds per 1,000 states relative to the first size (1.00 = linear)")
    print("no-GC: the same lint with Python's cyclic garbage collector paused (isolates the algorithm)")
    print("reference: original LLM-FSM validator, 300 states x 16 branches: 12.8 s; 1,000 states: RecursionError")


if __name__ == "__main__":
    main()
