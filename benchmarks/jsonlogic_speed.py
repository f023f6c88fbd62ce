"""Evaluations per second of llm_fsm.logic (compiled once) against json-logic-qubit, same run.

Usage: ``python benchmarks/jsonlogic_speed.py [--seconds 1.0]``

The rule is the seed's typical guard: three conditions joined by ``and``. Both
engines get the same rule and data; the "false path" variant makes the first
condition fail so ``and`` short-circuits. Prints both rates and the ratio
(target: ours at least 4x qubit's). A benchmark, not a test: timings vary by
machine, the ratio is what to compare.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from json_logic import jsonLogic

from llm_fsm.logic import compile_logic

RULE = {
    "and": [
        {"==": [{"var": "customer.tier"}, "premium"]},
        {">": [{"var": "customer.lifetime_value"}, 5000]},
        {"in": ["bill", {"var": "issue.description"}]},
    ]
}
TRUE_DATA = {"customer": {"tier": "premium", "lifetime_value": 7000}, "issue": {"description": "my bill is wrong"}}
FALSE_DATA = {"customer": {"tier": "basic", "lifetime_value": 7000}, "issue": {"description": "my bill is wrong"}}


def rate(fn: Callable[[], Any], seconds: float) -> float:
    """Calls per second of fn, measured over at least ``seconds`` (best of 5 rounds)."""
    n = 1000
    while True:  # find a batch size that takes about a fifth of the budget
        start = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed > seconds / 5:
            break
        n *= 2
    best = elapsed
    for _ in range(4):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - start)
    return n / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    args = parser.parse_args()

    compiled = compile_logic(RULE)
    for label, data in (("true path", TRUE_DATA), ("false path", FALSE_DATA)):
        expected = jsonLogic(RULE, data)
        assert compiled.evaluate(data) == expected, "engines disagree; the comparison would be meaningless"
        ours = rate(lambda: compiled.evaluate(data), args.seconds)
        guard = rate(lambda: compiled.evaluate_guard(data), args.seconds)
        qubit = rate(lambda: jsonLogic(RULE, data), args.seconds)
        print(f"{label}: result={expected!r}")
        print(f"  llm_fsm.logic evaluate        {ours:>12,.0f} evals/s")
        print(f"  llm_fsm.logic evaluate_guard  {guard:>12,.0f} evals/s")
        print(f"  json-logic-qubit jsonLogic    {qubit:>12,.0f} evals/s")
        print(f"  ratio evaluate / qubit        {ours / qubit:>12.1f}x   (target >= 4x)")
        print(f"  ratio evaluate_guard / qubit  {guard / qubit:>12.1f}x")


if __name__ == "__main__":
    main()
