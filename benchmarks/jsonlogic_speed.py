"""Evaluations per second of llm_fsm.logic (compiled once) against json-logic-qubit, same run.

Usage: ``python benchmarks/jsonlogic_speed.py [--seconds 2.0]``

The rule is the seed's typical guard: three conditions joined by ``and``. Both
engines get the same rule and data; the "false path" variant makes the first
condition fail so ``and`` short-circuits. Prints both rates and the ratio
(target: ours at least 4x qubit's). A benchmark, not a test: timings vary by
machine, the ratio is what to compare.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

from json_logic import jsonLogic

from llm_fsm.logic._rules import compile_logic

RULE = {
    "and": [
        {"==": [{"var": "customer.tier"}, "premium"]},
        {">": [{"var": "customer.lifetime_value"}, 5000]},
        {"in": ["bill", {"var": "issue.description"}]},
    ]
}
TRUE_DATA = {"customer": {"tier": "premium", "lifetime_value": 7000}, "issue": {"description": "my bill is wrong"}}
FALSE_DATA = {"customer": {"tier": "basic", "lifetime_value": 7000}, "issue": {"description": "my bill is wrong"}}


def rates(fns: dict[str, Callable[[], Any]], seconds: float, rounds: int = 7) -> dict[str, float]:
    """Calls per second of each fn: best of ``rounds``, the engines taking turns each round.

    Taking turns means a busy machine slows every engine alike, so the ratio
    stays meaningful even when the absolute rates are noisy.
    """
    sizes = {}
    for name, fn in fns.items():  # a batch size that takes about seconds / rounds
        n = 1000
        while True:
            start = time.perf_counter()
            for _ in range(n):
                fn()
            if time.perf_counter() - start > seconds / rounds:
                break
            n *= 2
        sizes[name] = n
    best = {name: math.inf for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            n = sizes[name]
            start = time.perf_counter()
            for _ in range(n):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / n)
    return {name: 1 / t for name, t in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per engine and path")
    args = parser.parse_args()

    compiled = compile_logic(RULE)
    for label, data in (("true path", TRUE_DATA), ("false path", FALSE_DATA)):
        expected = jsonLogic(RULE, data)
        assert compiled.evaluate(data) == expected, "engines disagree; the comparison would be meaningless"
        measured = rates(
            {
                "ours": lambda data=data: compiled.evaluate(data),
                "guard": lambda data=data: compiled.evaluate_guard(data),
                "qubit": lambda data=data: jsonLogic(RULE, data),
            },
            args.seconds,
        )
        ours, guard, qubit = measured["ours"], measured["guard"], measured["qubit"]
        print(f"{label}: result={expected!r}")
        print(f"  llm_fsm.logic evaluate        {ours:>12,.0f} evals/s")
        print(f"  llm_fsm.logic evaluate_guard  {guard:>12,.0f} evals/s")
        print(f"  json-logic-qubit jsonLogic    {qubit:>12,.0f} evals/s")
        print(f"  ratio evaluate / qubit        {ours / qubit:>12.1f}x   (target >= 4x)")
        print(f"  ratio evaluate_guard / qubit  {guard / qubit:>12.1f}x")


if __name__ == "__main__":
    main()
