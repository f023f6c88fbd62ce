"""Static checks of a rule before it runs: unknown operators, wrong arities, bad ``var`` paths, size and depth.

Findings carry a JSON path and a hint a person can act on; lint and the loader share them.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from typing import Any

from llm_fsm.logic._spec import (
    _ARITY,
    _ITERATORS,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_NODES,
    HARD_MAX_DEPTH,
    SUPPORTED_OPERATORS,
    LogicIssue,
)

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------- static checks


_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@functools.lru_cache(maxsize=4096)  # rules repeat their shapes: "$.and[0].var" is spelled for thousands of them
def _fmt_key(path: str, key: str) -> str:
    if _IDENT_RE.fullmatch(key):
        return f"{path}.{key}"
    quoted = key.replace("\\", "\\\\").replace("'", "\\'")
    return f"{path}['{quoted}']"


def _arity_hint(op: str) -> str:
    lo, hi = _ARITY[op]
    if hi is None:
        want = f"at least {lo} argument{'s' if lo != 1 else ''}"
    elif lo == hi:
        want = f"exactly {lo} argument{'s' if lo != 1 else ''}"
    else:
        want = f"{lo} to {hi} arguments"
    return f"'{op}' takes {want}"


def _too_large(path: str, max_nodes: int) -> LogicIssue:
    return LogicIssue(
        "too-large",
        path,
        f"rule has more than {max_nodes} nodes",
        "split it into several conditions, or move constant lists into the context",
    )


def _scan(rule: Any, max_depth: int, max_nodes: int, first_only: bool) -> list[LogicIssue]:
    """Every structural problem of a rule, found without recursion.

    Runs before compiling so compiling (which recurses) only ever sees rules of
    bounded depth and size.
    """
    issues: list[LogicIssue] = []
    stack: list[tuple[Any, str, int, bool]] = [(rule, "$", 1, False)]
    nodes = 0
    too_deep_reported = False
    while stack:
        value, path, depth, literal = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            issues.append(_too_large(path, max_nodes))
            break
        t = type(value)
        if value is None or t is bool or t is str or t is int:
            continue
        if t is float:
            if not math.isfinite(value):
                issues.append(LogicIssue("not-json", path, f"{value!r} is not a JSON number", "use a finite number"))
                if first_only:
                    break
            continue
        if t is not list and t is not tuple and t is not dict:
            issues.append(
                LogicIssue(
                    "not-json",
                    path,
                    f"a {t.__name__} is not a JSON value",
                    "rules may only contain objects, arrays, strings, numbers, booleans and null",
                )
            )
            if first_only:
                break
            continue
        if depth > max_depth:
            if not too_deep_reported:
                issues.append(
                    LogicIssue(
                        "too-deep",
                        path,
                        f"rule is nested deeper than {max_depth} levels",
                        "flatten it: 'and'/'or'/'if' take any number of arguments",
                    )
                )
                too_deep_reported = True
            if first_only:
                break
            continue
        if nodes + len(value) > max_nodes:  # say so before listing a million children
            issues.append(_too_large(path, max_nodes))
            break
        children: list[tuple[Any, str, int, bool]] = []
        if t is dict:
            bad_keys = [k for k in value if type(k) is not str]
            if bad_keys:
                issues.append(
                    LogicIssue(
                        "not-json",
                        path,
                        f"object key {bad_keys[0]!r} is not a string",
                        "JSON object keys are strings",
                    )
                )
                if first_only:
                    break
                continue
            if literal or len(value) != 1:
                # Not an operation: the reference returns such objects as they are.
                children = [(v, _fmt_key(path, k), depth + 1, True) for k, v in value.items()]
            else:
                op, args = next(iter(value.items()))
                op_path = _fmt_key(path, op)
                if op not in _ARITY:
                    issues.append(
                        LogicIssue(
                            "unknown-operator",
                            op_path,
                            f"unknown operator {op!r}",
                            _unknown_hint(op),
                        )
                    )
                    if first_only:
                        break
                else:
                    n = len(args) if type(args) in (list, tuple) else 1
                    lo, hi = _ARITY[op]
                    if n < lo or (hi is not None and n > hi):
                        issues.append(
                            LogicIssue(
                                "arity",
                                op_path,
                                f"{_arity_hint(op)}, got {n}",
                                f"write {_example(op)}",
                            )
                        )
                        if first_only:
                            break
                if type(args) in (list, tuple):
                    children = [(a, f"{op_path}[{i}]", depth + 1, False) for i, a in enumerate(args)]
                else:
                    children = [(args, op_path, depth + 1, False)]
        else:
            children = [(v, f"{path}[{i}]", depth + 1, literal) for i, v in enumerate(value)]
        stack.extend(reversed(children))
    return issues


def _passes(rule: Any, max_depth: int, max_nodes: int) -> bool:
    """Whether ``_scan`` would find nothing: the same walk, in the same order (the size check looks ahead from
    the count so far), without spelling a path for every node.

    Most rules are fine, and building the paths was most of the cost of checking one; ``_scan`` runs only to
    say what is wrong. ``tests/test_logic.py`` checks that the two agree.
    """
    stack: list[tuple[Any, int, bool]] = [(rule, 1, False)]
    nodes = 0
    while stack:
        value, depth, literal = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            return False
        t = type(value)
        if value is None or t is bool or t is str or t is int:
            continue
        if t is float:
            if not math.isfinite(value):
                return False
            continue
        if (t is not list and t is not tuple and t is not dict) or depth > max_depth or nodes + len(value) > max_nodes:
            return False
        if t is dict:
            for key in value:
                if type(key) is not str:
                    return False
            if literal or len(value) != 1:
                stack.extend((v, depth + 1, True) for v in reversed(value.values()))
                continue
            op, args = next(iter(value.items()))
            arity = _ARITY.get(op)
            if arity is None:
                return False
            many = type(args) in (list, tuple)
            n = len(args) if many else 1
            if n < arity[0] or (arity[1] is not None and n > arity[1]):
                return False
            if many:
                stack.extend((a, depth + 1, False) for a in reversed(args))
            else:
                stack.append((args, depth + 1, False))
        else:
            stack.extend((v, depth + 1, literal) for v in reversed(value))
    return True


_EXAMPLES = {
    "var": '{"var": "path.to.key"} or {"var": ["path.to.key", default]}',
    "missing_some": '{"missing_some": [1, ["a", "b"]]}',
    "substr": '{"substr": [text, start]} or {"substr": [text, start, length]}',
    "reduce": '{"reduce": [array, body, initial]}',
    "-": '{"-": [a, b]} or {"-": [a]}',
    "<": '{"<": [a, b]} or {"<": [low, x, high]}',
    "<=": '{"<=": [a, b]} or {"<=": [low, x, high]}',
}


def _example(op: str) -> str:
    if op in _EXAMPLES:
        return _EXAMPLES[op]
    lo, hi = _ARITY[op]
    if op in _ITERATORS:
        return f'{{"{op}": [array, body]}}'
    if hi == 1:
        return f'{{"{op}": [value]}}'
    if hi == 2:
        return f'{{"{op}": [a, b]}}'
    return f'{{"{op}": [a, b, ...]}}'


_KNOWN_ELSEWHERE = {
    "log": "'log' is not supported (conditions do no I/O)",
    "method": "'method' is not supported: rules cannot call Python methods",
    "??": 'use {"if": [{"!=": [x, null]}, x, fallback]} or {"var": [key, default]}',
    "val": 'use {"var": "a.b"}',
    "exists": 'use {"missing": [key]} (an empty result means it exists)',
}


def _unknown_hint(op: str) -> str:
    if op in _KNOWN_ELSEWHERE:
        return _KNOWN_ELSEWHERE[op]
    import difflib

    close = difflib.get_close_matches(op, sorted(SUPPORTED_OPERATORS), n=1)
    if close:
        return f"did you mean {close[0]!r}?"
    return "supported operators: " + ", ".join(sorted(SUPPORTED_OPERATORS))


def check_logic(
    rule: Any, *, max_depth: int = DEFAULT_MAX_DEPTH, max_nodes: int = DEFAULT_MAX_NODES
) -> list[LogicIssue]:
    """Every problem of a rule, with paths relative to the rule; never raises (for fsm-lint)."""
    try:
        return _scan(rule, min(max_depth, HARD_MAX_DEPTH), max_nodes, first_only=False)
    except Exception as exc:  # pragma: no cover - _scan handles every JSON shape
        logger.debug("check_logic failed", exc_info=True)
        return [LogicIssue("internal", "$", f"rule could not be checked: {exc}", "")]
