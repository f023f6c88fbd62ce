"""FSM013: keys read without a default where reference JsonLogic would say true on a missing value."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

# --- FSM013: keys read without a default where reference JsonLogic would say true --------


_NUMBER = (int, float)


def _var_without_default(value: Any) -> str | None:
    """``{"var": "age"}`` / ``{"var": ["age"]}`` → ``age``; None when it has a default or is not a var."""
    if not isinstance(value, Mapping) or len(value) != 1 or "var" not in value:
        return None
    arg = value["var"]
    if isinstance(arg, list):
        if len(arg) != 1:
            return None
        arg = arg[0]
    if isinstance(arg, bool) or not isinstance(arg, (str, int)) or arg == "":
        return None
    return str(arg)


def _as_js_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, _NUMBER):
        return float(value)
    if value is None:
        return 0.0
    if isinstance(value, str):
        try:
            return float(value) if value.strip() else 0.0
        except ValueError:
            return None
    return None


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}

_RISKY_OPERATORS = frozenset(("!", "!=", "!==", "==", "===", "<", "<=", ">", ">="))

_SCALARS = frozenset((str, int, float, bool, type(None)))


def _compare_chain(op: str, numbers: list[float]) -> bool:
    compare = _COMPARE[op]
    return all(compare(a, b) for a, b in zip(numbers, numbers[1:], strict=False))


def risky_missing_reads(rule: Any, ignore: Callable[[str], bool] | None = None) -> Iterator[tuple[str, str]]:
    """(key, why) for each var without default whose missing value makes its operator true
    under reference JsonLogic (missing → null): ``!``, ``!=``/``!==`` against a non-null,
    ``==``/``===`` against null, and numeric comparisons true with null read as 0
    (``<``/``<=`` against non-literal operands are flagged too). Iterative walk.

    Keys for which ``ignore(key)`` is true are not judged (the caller would drop them)."""
    stack = [rule]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is list:
            stack.extend(node)
            continue
        if kind in _SCALARS:
            continue  # most of a rule
        if isinstance(node, list):
            stack.extend(node)
            continue
        if kind is not dict and not isinstance(node, Mapping):
            continue
        if len(node) != 1:
            continue
        ((op, args),) = node.items()
        args = args if isinstance(args, list) else [args]
        stack.extend(args)
        if op in _RISKY_OPERATORS:
            for position, arg in enumerate(args):
                if type(arg) in _SCALARS:
                    continue  # a literal operand
                key = _var_without_default(arg)
                if key is None or (ignore is not None and ignore(key)):
                    continue
                others = args[:position] + args[position + 1 :]
                why = _risk(op, position, args, others)
                if why:
                    yield key, why


def _risk(op: str, position: int, args: list[Any], others: list[Any]) -> str | None:
    if op == "!":
        return "`!` of a missing (null) value is true"
    if op in ("!=", "!=="):
        if others and all(o is not None for o in others):
            return f"`{op}` of a missing (null) value and a non-null value is true"
        return None
    if op in ("==", "==="):
        if any(o is None for o in others):
            return f"`{op}` of a missing value and null is true"
        return None
    # numeric comparison: reference JsonLogic reads null as 0
    literal = [a for a in others if not isinstance(a, (Mapping, list))]
    if len(literal) == len(others):
        numbers = []
        for index, arg in enumerate(args):
            number = 0.0 if index == position else _as_js_number(arg)
            if number is None:
                return None
            numbers.append(number)
        if _compare_chain(op, numbers):
            return f"`{op}` with a missing value read as 0 is true"
        return None
    if op in ("<", "<="):
        return f"`{op}` with a missing value read as 0 may be true"
    return None
