"""Run the JsonLogic compatibility suites against llm_fsm.logic and print pass counts.

Usage: ``python tests/data/jsonlogic/report.py [--failures | --differences]``

Each case of ``compat-suites/`` falls in one of two groups:

* it uses only operators we support: its result must equal the suite's
  ``result`` (or, when the suite expects an ``error``, evaluation must raise a
  LogicError), unless its id is listed in ``EXPECTED_DIFFERENCES`` with the
  reason we deliberately differ (also tabled in docs/jsonlogic.md);
* it uses an operator we do not implement (``val``, ``??``, ``throw``, ...):
  compiling it must raise LogicError, so such a rule can never be silently
  evaluated.

``tests/test_logic_conformance.py`` imports this module and turns every case
into one test.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SUITES = HERE / "compat-suites"
OFFICIAL = HERE / "tests.json"


@dataclass(frozen=True)
class CompatCase:
    id: str  # "<file>#<index>", index counting cases (not comment strings) from 0
    file: str
    description: str
    rule: Any
    data: Any
    expects_error: bool
    result: Any
    decimal: bool
    unsupported: tuple[str, ...]  # operators used by the rule that we do not implement


def operators_used(rule: Any) -> set[str]:
    """Operators of a rule as JsonLogic reads it: one-key objects outside literal objects."""
    found: set[str] = set()
    stack = [rule]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if len(v) == 1:
                op, args = next(iter(v.items()))
                found.add(op)
                stack.append(args)
        elif isinstance(v, list):
            stack.extend(v)
    return found


def official_cases() -> list[tuple[str, Any, Any, Any]]:
    """(id, rule, data, expected) for every case of tests.json."""
    out = []
    group = "start"
    n = 0
    for item in json.loads(OFFICIAL.read_text(encoding="utf-8")):
        if isinstance(item, str):
            group = item.strip("# ").strip()
            continue
        rule, data, expected = item
        out.append((f"{n:03d} {group[:40]}", rule, data, expected))
        n += 1
    return out


def compat_cases() -> list[CompatCase]:
    from llm_fsm.logic._spec import SUPPORTED_OPERATORS

    cases = []
    for name in json.loads((SUITES / "index.json").read_text(encoding="utf-8")):
        items = json.loads((SUITES / name).read_text(encoding="utf-8"))
        index = 0
        for item in items:
            if isinstance(item, str):
                continue
            unsupported = tuple(sorted(operators_used(item["rule"]) - SUPPORTED_OPERATORS))
            cases.append(
                CompatCase(
                    id=f"{name}#{index}",
                    file=name,
                    description=item.get("description", ""),
                    rule=item["rule"],
                    data=item.get("data"),
                    expects_error="error" in item,
                    result=item.get("result"),
                    decimal=bool(item.get("decimal")),
                    unsupported=unsupported,
                )
            )
            index += 1
    return cases


def same_json(got: Any, want: Any, decimal: bool = False) -> bool:
    """JSON equality: true is not 1, 1 is 1.0, and lists/objects compare deeply."""
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        if decimal:
            return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
        return got == want
    if isinstance(want, list):
        return (
            isinstance(got, (list, tuple))
            and len(got) == len(want)
            and all(same_json(g, w, decimal) for g, w in zip(got, want, strict=False))
        )
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and got.keys() == want.keys()
            and all(same_json(got[k], want[k], decimal) for k in want)
        )
    return type(got) is type(want) and got == want


def run(case: CompatCase) -> tuple[str, str]:
    """('pass' | 'fail', detail) for one case under the rules in the module docstring."""
    from llm_fsm.errors import LogicError
    from llm_fsm.logic._rules import compile_logic

    if case.unsupported:
        try:
            compile_logic(case.rule)
        except LogicError as exc:
            return "pass", f"rejected at compile time: {exc}"
        return "fail", f"rule with unsupported {case.unsupported} compiled"
    try:
        got = compile_logic(case.rule).evaluate(case.data)
    except LogicError as exc:
        if case.expects_error:
            return "pass", f"raised {type(exc).__name__}: {exc}"
        return "fail", f"raised {type(exc).__name__}: {exc}"
    if case.expects_error:
        return "fail", f"returned {got!r}, suite expects an error"
    if same_json(got, case.result, case.decimal):
        return "pass", repr(got)
    return "fail", f"returned {got!r}, suite expects {case.result!r}"


def expected_differences() -> dict[str, str]:
    """Case ids we deliberately fail, with the reason (kept in docs/jsonlogic.md too)."""
    from expected_differences import EXPECTED_DIFFERENCES  # type: ignore[import-not-found]

    return dict(EXPECTED_DIFFERENCES)


def report(show_failures: bool = False) -> str:
    sys.path.insert(0, str(HERE))
    expected = expected_differences()
    rows = []
    totals = [0, 0, 0, 0, 0, 0]
    by_file: dict[str, list[CompatCase]] = {}
    for case in compat_cases():
        by_file.setdefault(case.file, []).append(case)
    failures = []
    for name, cases in by_file.items():
        supported = [c for c in cases if not c.unsupported]
        unsupported = [c for c in cases if c.unsupported]
        passed = diff = unexpected = 0
        for c in supported:
            status, detail = run(c)
            if status == "pass":
                passed += 1
            elif c.id in expected:
                diff += 1
            else:
                unexpected += 1
                failures.append(f"{c.id} {c.description}: {detail}")
        rejected = sum(run(c)[0] == "pass" for c in unsupported)
        row = [len(cases), len(supported), passed, diff, unexpected, rejected]
        totals = [a + b for a, b in zip(totals, row, strict=False)]
        rows.append((name, row, len(unsupported)))
    lines = [
        "| file | cases | supported ops | pass | expected difference | unexpected failure "
        "| unsupported, rejected at compile |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, (n, s, p, d, u, r), nu in rows:
        lines.append(f"| {name} | {n} | {s} | {p} | {d} | {u} | {r}/{nu} |")
    n, s, p, d, u, r = totals
    lines.append(f"| **total** | {n} | {s} | {p} | {d} | {u} | {r}/{n - s} |")
    if show_failures and failures:
        lines.append("")
        lines.extend(failures)
    return "\n".join(lines)


def differences_table() -> str:
    """The expected differences as a Markdown table, one row per reason."""
    sys.path.insert(0, str(HERE))
    by_reason: dict[str, list[str]] = {}
    for case_id, reason in expected_differences().items():
        by_reason.setdefault(reason, []).append(case_id)
    lines = ["| reason | cases | ids |", "|---|---:|---|"]
    for reason, ids in by_reason.items():
        lines.append(f"| {reason} | {len(ids)} | {', '.join(f'`{i}`' for i in ids)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if "--differences" in sys.argv:
        print(differences_table())
    else:
        print(report(show_failures="--failures" in sys.argv))
