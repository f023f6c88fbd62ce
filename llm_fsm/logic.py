"""JsonLogic for transition conditions: compile once, evaluate many times.

A rule is checked and compiled when a definition loads, so a typo in an
operator fails there and not in the middle of a conversation. Compiling turns
the rule into a tree of Python closures, one per node, specialised for the
shape of the node (its arity, which arguments are constants, whether a ``var``
path has one or two segments). Evaluation then does no operator lookup and no
path splitting; that is what makes it several times faster than walking the
JSON with a dispatch table on every call.

Semantics follow the reference JavaScript implementation published at
jsonlogic.com (loose ``==`` like JavaScript, ``+`` through ``parseFloat``,
``[]`` falsy, ``"0"`` truthy, ...). Where we deliberately differ, it is for
safety, and ``docs/jsonlogic.md`` lists every difference.

Safety properties, all enforced here rather than trusted to rule authors:

* unknown operators, wrong arities, non-JSON values, rules nested deeper than
  ``max_depth`` or larger than ``max_nodes`` are rejected at compile time with
  a :class:`~llm_fsm.errors.LogicError` that carries a JSON path;
* the checks that run before compiling are iterative, so even a rule nested
  100,000 levels deep is rejected without touching Python's recursion limit;
* every evaluation has a work budget (iterations of ``map``/``filter``/...
  times the size of their body, and the sizes of values built by ``merge``,
  ``cat`` and friends); exceeding it raises
  :class:`~llm_fsm.errors.LogicBudgetError`;
* data is only ever read by indexing dicts, lists and strings; no operator can
  reach a Python attribute or call a method (json-logic-qubit's ``method`` and
  dotted custom operators do not exist here).

For guards, :meth:`CompiledRule.evaluate_guard` adds one rule the reference
lacks: a condition that reads a variable the context does not have (and gives
no default) does not hold, whatever the arithmetic of ``null`` would say.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from .errors import LogicBudgetError, LogicError

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_NODES",
    "SUPPORTED_OPERATORS",
    "CompiledRule",
    "GuardResult",
    "LogicIssue",
    "check_logic",
    "compile_logic",
    "evaluate_logic",
    "truthy",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_DEPTH = 64
DEFAULT_MAX_NODES = 10_000
DEFAULT_BUDGET = 100_000
#: compile is recursive (bounded by max_depth); this keeps it far from the interpreter's limit
HARD_MAX_DEPTH = 200

#: (minimum, maximum or None) number of arguments per operator
_ARITY: dict[str, tuple[int, int | None]] = {
    "==": (2, 2),
    "===": (2, 2),
    "!=": (2, 2),
    "!==": (2, 2),
    ">": (2, 2),
    ">=": (2, 2),
    "<": (2, 3),
    "<=": (2, 3),
    "!": (1, 1),
    "!!": (1, 1),
    "and": (1, None),
    "or": (1, None),
    "if": (0, None),
    "?:": (0, None),
    "var": (0, 2),
    "missing": (0, None),
    "missing_some": (2, 2),
    "in": (2, 2),
    "contains": (2, 2),
    "+": (0, None),
    "-": (1, 2),
    "*": (1, None),
    "/": (2, 2),
    "%": (2, 2),
    "min": (1, None),
    "max": (1, None),
    "cat": (0, None),
    "substr": (2, 3),
    "merge": (0, None),
    "map": (2, 2),
    "filter": (2, 2),
    "reduce": (2, 3),
    "all": (2, 2),
    "some": (2, 2),
    "none": (2, 2),
}

SUPPORTED_OPERATORS: frozenset[str] = frozenset(_ARITY)

_ITERATORS = frozenset({"map", "filter", "reduce", "all", "some", "none"})


# --------------------------------------------------------------------------- results


class GuardResult(NamedTuple):
    """What a guard evaluated to, and why it holds or not.

    ``missing_vars`` lists the top-level variables the evaluation read without
    a default and found absent or null; any of them makes ``holds`` false.
    (A named tuple because guards are evaluated on every turn; it is cheap to build.)
    """

    value: Any
    holds: bool
    missing_vars: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LogicIssue:
    """One problem found in a rule by :func:`check_logic` (for fsm-lint)."""

    code: str
    path: str
    message: str
    hint: str = ""


# --------------------------------------------------------------------------- JS value model

_MISSING: Any = object()  # "undefined" of a failed data lookup; never escapes this module

_NULL, _BOOL, _NUM, _STR, _ARR, _OBJ = range(6)
_MAX_SAFE = 2**53


def _kind(v: Any) -> int:
    if v is None or v is _MISSING:
        return _NULL
    if isinstance(v, bool):
        return _BOOL
    if isinstance(v, (int, float)):
        return _NUM
    if isinstance(v, str):
        return _STR
    if isinstance(v, (list, tuple)):
        return _ARR
    return _OBJ  # dicts, other mappings, and any opaque Python object


def truthy(value: Any) -> bool:
    """JsonLogic truthiness: JavaScript's, except that an empty array is false.

    ``0``, ``NaN``, ``""``, ``null``, ``false`` and ``[]`` are false; ``"0"``,
    ``{}`` and every other value are true (unlike Python, ``{}`` is true).
    """
    if value is True:
        return True
    if value is False or value is None:
        return False
    t = type(value)
    if t is str:
        return len(value) > 0
    if t is int:
        return value != 0
    if t is float:
        return value != 0.0 and value == value
    if t is list or t is tuple:
        return len(value) > 0
    if t is dict:
        return True
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value) != 0
    if isinstance(value, float):
        f = float(value)
        return f != 0.0 and f == f
    if isinstance(value, str):
        return len(value) > 0
    if isinstance(value, (list, tuple)):
        return len(value) > 0
    return value is not _MISSING


# Per-evaluation state, passed to every closure: [steps left, missing reads, budget].
# A plain list because building it is on the hot path of every evaluation (a class
# with __init__ costs twice as much); _LEFT/_MISSING_READS/_BUDGET name the slots.
_Run = list
_LEFT, _MISSING_READS, _BUDGET = 0, 1, 2


def _over_budget(st: _Run, path: str) -> LogicBudgetError:
    return LogicBudgetError(
        f"evaluation exceeded its work budget of {st[_BUDGET]} steps", path=path
    )


def _charge(st: _Run | None, n: int, path: str = "$") -> None:
    if st is not None:
        st[_LEFT] -= n
        if st[_LEFT] < 0:
            raise _over_budget(st, path)


# JavaScript's StrWhiteSpaceChar (used by Number() and parseFloat())
_JS_WS = (
    " \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
# Unambiguous on purpose (no two parts can both take the same digits), so a hostile
# 100,000-digit string fails to match in linear time instead of backtracking for hours.
_DECIMAL_RE = re.compile(r"[+-]?(?:Infinity|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)")
_INT_RE = re.compile(r"[+-]?\d{1,15}")
_RADIX_RE = re.compile(r"0(?:[xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)")
_INDEX_RE = re.compile(r"0|[1-9]\d{0,15}")


def _int_out(r: int) -> int | float:
    """Integers beyond 2**53 become floats, as every number is in JavaScript."""
    if -_MAX_SAFE <= r <= _MAX_SAFE:
        return r
    try:
        return float(r)
    except OverflowError:
        return math.inf if r > 0 else -math.inf


def _float_out(r: float) -> int | float:
    """Integral results come back as ints (JavaScript has one number type)."""
    if r.is_integer() and -_MAX_SAFE <= r <= _MAX_SAFE:
        return int(r)
    return r


def _as_float(v: int | float) -> float:
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _decimal_literal(s: str) -> int | float:
    if s.endswith("Infinity"):
        return -math.inf if s[0] == "-" else math.inf
    if _INT_RE.fullmatch(s):
        return int(s)
    return _float_out(float(s))


def _str_to_num(s: str) -> int | float:
    """JavaScript ``Number(string)``: whole string or NaN; blank is 0."""
    s = s.strip(_JS_WS)
    if not s:
        return 0
    if _DECIMAL_RE.fullmatch(s):
        return _decimal_literal(s)
    if _RADIX_RE.fullmatch(s):
        return _int_out(int(s, 0))
    return math.nan


def _to_num(v: Any, st: _Run | None = None) -> int | float:
    """JavaScript ``ToNumber`` (arrays and objects via their string form)."""
    t = type(v)
    if t is int or t is float:
        return v
    if v is None:
        return 0
    if t is bool:
        return 1 if v else 0
    if t is str:
        return _str_to_num(v)
    k = _kind(v)
    if k == _NULL:
        return math.nan  # undefined
    if k == _BOOL:
        return 1 if v else 0
    if k == _NUM:
        return float(v) if isinstance(v, float) else int(v)
    if k == _STR:
        return _str_to_num(str.__str__(v))
    return _str_to_num(_to_prim(v, st))


def _parse_float(v: Any, st: _Run | None = None) -> int | float:
    """JavaScript ``parseFloat(String(v))``: the longest numeric prefix, else NaN."""
    t = type(v)
    if t is int or t is float:
        return v
    s = v if t is str else _to_str(v, st)
    s = s.lstrip(_JS_WS)
    m = _DECIMAL_RE.match(s)
    if m is None:
        return math.nan
    return _decimal_literal(m.group())


def _num_to_str(x: int | float) -> str:
    """JavaScript ``Number.prototype.toString()`` for any int or float."""
    if type(x) is not float:
        x = int(x)
        if -(10**21) < x < 10**21:
            return str(x)
        x = _as_float(x)
    if x != x:
        return "NaN"
    if x in (math.inf, -math.inf):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    r = repr(abs(x))  # shortest round-trip digits, as JavaScript uses
    mant, _, exp = r.partition("e")
    whole, _, frac = mant.partition(".")
    digits = whole + frac
    n = len(whole) + (int(exp) if exp else 0)
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    digits = stripped.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    es = ("+" if e >= 0 else "-") + str(abs(e))
    if k == 1:
        return sign + digits + "e" + es
    return sign + digits[0] + "." + digits[1:] + "e" + es


def _to_str(v: Any, st: _Run | None = None) -> str:
    """JavaScript ``String(v)``; arrays join with commas, null items as ''."""
    t = type(v)
    if t is str:
        return v
    if t is int or t is float:
        return _num_to_str(v)
    if v is None:
        return "null"
    if t is bool:
        return "true" if v else "false"
    k = _kind(v)
    if k == _ARR:
        s = ",".join("" if (x is None or x is _MISSING) else _to_str(x, st) for x in v)
        _charge(st, len(s))
        return s
    if k == _STR:
        return str.__str__(v)
    if k == _NUM:
        return _num_to_str(v)
    if k == _BOOL:
        return "true" if v else "false"
    if k == _NULL:
        return "undefined"
    return "[object Object]"


def _to_prim(v: Any, st: _Run | None) -> Any:
    k = _kind(v)
    if k == _ARR:
        return _to_str(v, st)
    if k == _OBJ:
        return "[object Object]"
    return v


def _loose_eq(a: Any, b: Any, st: _Run | None = None) -> bool:
    """JavaScript ``a == b`` (arrays and objects compare by identity)."""
    ka, kb = _kind(a), _kind(b)
    if ka == _NULL or kb == _NULL:
        return ka == kb
    if ka == kb:
        if ka >= _ARR:
            return a is b
        return bool(a == b)
    if ka == _BOOL:
        return _loose_eq(1 if a else 0, b, st)
    if kb == _BOOL:
        return _loose_eq(a, 1 if b else 0, st)
    if ka == _NUM and kb == _STR:
        return bool(a == _str_to_num(b))
    if ka == _STR and kb == _NUM:
        return bool(_str_to_num(a) == b)
    if ka >= _ARR and kb in (_NUM, _STR):
        return _loose_eq(_to_prim(a, st), b, st)
    if kb >= _ARR and ka in (_NUM, _STR):
        return _loose_eq(a, _to_prim(b, st), st)
    return False


def _strict_eq(a: Any, b: Any) -> bool:
    """JavaScript ``a === b``: same kind and value; arrays/objects by identity."""
    ka = _kind(a)
    if ka != _kind(b):
        return False
    if ka >= _ARR:
        return a is b
    if ka == _NULL:
        return True
    return bool(a == b)


def _lt(a: Any, b: Any, st: _Run | None = None) -> bool:
    """JavaScript ``a < b``: strings compare as strings, all else as numbers."""
    pa, pb = _to_prim(a, st), _to_prim(b, st)
    if type(pa) is str and type(pb) is str:
        return pa < pb
    return bool(_to_num(pa, st) < _to_num(pb, st))


def _le(a: Any, b: Any, st: _Run | None = None) -> bool:
    pa, pb = _to_prim(a, st), _to_prim(b, st)
    if type(pa) is str and type(pb) is str:
        return pa <= pb
    return bool(_to_num(pa, st) <= _to_num(pb, st))


def _in(a: Any, b: Any, st: _Run | None, path: str = "$") -> bool:
    """The reference ``in``: substring of a string, or ``===`` element of an array."""
    kb = _kind(b)
    if kb == _STR:
        if not b:
            return False
        return _to_str(a, st) in b
    if kb == _ARR:
        _charge(st, len(b), path)
        return any(_strict_eq(a, x) for x in b)
    return False


def _contains(c: Any, v: Any, st: _Run | None, path: str = "$") -> bool:
    """Our extension: string contains substring, array element, object key."""
    kc = _kind(c)
    if kc == _OBJ:
        if not isinstance(c, Mapping) or _kind(v) not in (_STR, _NUM):
            return False
        return _to_str(v) in c
    return _in(v, c, st, path)


def _to_int(v: Any, st: _Run | None) -> float:
    """JavaScript ``ToIntegerOrInfinity``."""
    n = _to_num(v, st)
    if n != n:
        return 0
    if n in (math.inf, -math.inf):
        return n
    return int(n)


def _substr(source: Any, start: Any, length: Any = _MISSING, st: _Run | None = None) -> str:
    s = _to_str(source, st)
    if length is not _MISSING and _lt(length, 0, st):
        tmp = _js_substr(s, _to_int(start, st), len(s))
        if type(length) is str:  # JavaScript: ``temp.length + end`` concatenates
            cut = _to_int(str(len(tmp)) + length, st)
        else:
            cut = _to_int(len(tmp) + _to_num(length, st), st)
        return _js_substr(tmp, 0, cut)
    if length is _MISSING:
        return _js_substr(s, _to_int(start, st), len(s))
    return _js_substr(s, _to_int(start, st), _to_int(length, st))


def _js_substr(s: str, start: float, length: float) -> str:
    size = len(s)
    if start == -math.inf:
        start = 0
    elif start < 0:
        start = max(size + start, 0)
    else:
        start = min(start, size)
    length = min(max(length, 0), size)
    end = min(start + length, size)
    return s[int(start) : int(end)] if end > start else ""


def _js_min_max(values: list[Any], st: _Run, want_max: bool) -> Any:
    nums = []
    for v in values:
        n = v if (type(v) is int or type(v) is float) else _to_num(v, st)
        if n != n:
            return math.nan
        nums.append(n)
    return max(nums) if want_max else min(nums)


# --------------------------------------------------------------------------- data lookup


def _key_step(d: Any, key: str, index: int | None) -> Any:
    """One step of a ``var`` path: dict key, list index, string character. Nothing else."""
    if type(d) is dict:
        return d.get(key, _MISSING)
    if d is None or d is _MISSING:
        return _MISSING
    if isinstance(d, (list, tuple)):
        if index is not None and index < len(d):
            return d[index]
        return _MISSING
    if isinstance(d, str):
        if index is not None and index < len(d):
            return d[index]
        return _MISSING
    if isinstance(d, Mapping):
        try:
            return d[key] if key in d else _MISSING
        except Exception:  # a caller's exotic mapping; a failed read is just "missing"
            return _MISSING
    return _MISSING


def _split_path(name: str) -> tuple[tuple[str, int | None], ...]:
    return tuple(
        (part, int(part) if _INDEX_RE.fullmatch(part) else None) for part in name.split(".")
    )


def _lookup(d: Any, keys: tuple[tuple[str, int | None], ...]) -> Any:
    for key, index in keys:
        if type(d) is dict:
            d = d.get(key, _MISSING)
        else:
            d = _key_step(d, key, index)
        if d is _MISSING:
            return _MISSING
    return d


def _var_value(d: Any, name: Any) -> Any:
    """The reference ``var`` with a runtime name; _MISSING when absent."""
    if name is None or (type(name) is str and name == ""):
        return d
    return _lookup(d, _split_path(_to_str(name)))


# --------------------------------------------------------------------------- static checks


_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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
                issues.append(
                    LogicIssue("not-json", path, f"{value!r} is not a JSON number", "use a finite number")
                )
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
    "??": "use {\"if\": [{\"!=\": [x, null]}, x, fallback]} or {\"var\": [key, default]}",
    "val": "use {\"var\": \"a.b\"}",
    "exists": "use {\"missing\": [key]} (an empty result means it exists)",
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


# --------------------------------------------------------------------------- compiling

Fn = Callable[[Any, _Run], Any]


class _NoConst:
    __slots__ = ()


_NC: Any = _NoConst()


def _const_fn(value: Any) -> Fn:
    def const(d: Any, st: _Run) -> Any:
        return value

    return const


class _Compiler:
    """Turns a checked rule into closures; records the top-level variables it reads."""

    def __init__(self) -> None:
        self.reads: set[str] = set()
        self.reads_without_default: set[str] = set()

    # Each compile step returns (closure, constant value or _NC) so that parents can
    # specialise on constant arguments (e.g. ``{"==": [{"var": "x"}, "premium"]}``).

    def node(self, rule: Any, path: str, scoped: bool) -> tuple[Fn, Any]:
        t = type(rule)
        if t is list or t is tuple:
            return self.array(rule, path, scoped)
        if t is dict:
            if len(rule) == 1:
                op, args = next(iter(rule.items()))
                op_path = _fmt_key(path, op)
                if type(args) in (list, tuple):
                    arg_list = list(args)
                    arg_paths = [f"{op_path}[{i}]" for i in range(len(arg_list))]
                else:
                    arg_list = [args]
                    arg_paths = [op_path]
                builder = _BUILDERS[op]
                return builder(self, arg_list, arg_paths, op_path, scoped), _NC
            return self.literal_object(rule), _NC
        return _const_fn(rule), rule

    def array(self, rule: Any, path: str, scoped: bool) -> tuple[Fn, Any]:
        parts = [self.node(v, f"{path}[{i}]", scoped) for i, v in enumerate(rule)]
        fns = [f for f, _ in parts]
        if all(c is not _NC and type(c) is not tuple for _, c in parts):  # scalars only
            value = [c for _, c in parts]

            def const_array(d: Any, st: _Run) -> Any:
                return list(value)  # a fresh list: callers may mutate results

            return const_array, tuple(value)

        def array(d: Any, st: _Run) -> Any:
            return [f(d, st) for f in fns]

        return array, _NC

    @staticmethod
    def literal_object(rule: dict[str, Any]) -> Fn:
        frozen = json.dumps(rule)

        def literal(d: Any, st: _Run) -> Any:
            return json.loads(frozen)  # a fresh copy each time, like the reference's object literal

        return literal

    def args(self, args: list[Any], paths: list[str], scoped: bool) -> list[tuple[Fn, Any]]:
        return [self.node(a, p, scoped) for a, p in zip(args, paths)]


def _fns(parts: list[tuple[Fn, Any]]) -> list[Fn]:
    return [f for f, _ in parts]


# ---- var / missing


def _build_var(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    if not args:
        return _whole_data
    name_fn, name = c.node(args[0], paths[0], scoped)
    has_default = len(args) > 1
    default_fn, default = c.node(args[1], paths[1], scoped) if has_default else (None, None)
    track = not scoped and not has_default

    if name is _NC:
        return _dynamic_var(name_fn, default_fn, default, track)

    if name is None or (type(name) is str and name == ""):
        return _whole_data
    key = _to_str(list(name) if type(name) is tuple else name)
    if not scoped:
        c.reads.add(key)
        if not has_default:
            c.reads_without_default.add(key)
    keys = _split_path(key)
    return _static_var(keys, key, default_fn, default, track)


def _whole_data(d: Any, st: _Run) -> Any:
    return d


def _static_var(
    keys: tuple[tuple[str, int | None], ...],
    key: str,
    default_fn: Fn | None,
    default: Any,
    track: bool,
) -> Fn:
    const_default = default is not _NC and type(default) is not tuple
    if default_fn is None:
        const_default, default = True, None

    # The common guard read, a top-level var without default of one or two segments,
    # gets the lookup inlined: it is most of the time a guard takes.
    if track and len(keys) == 1:
        (t0, j0), = keys

        def var_tracked1(d: Any, st: _Run) -> Any:
            v = d.get(t0, _MISSING) if type(d) is dict else _key_step(d, t0, j0)
            if v is _MISSING:
                st[_MISSING_READS].append(key)
                return None
            if v is None:
                st[_MISSING_READS].append(key)
            return v

        return var_tracked1

    if track and len(keys) == 2:
        (t0, j0), (t1, j1) = keys

        def var_tracked2(d: Any, st: _Run) -> Any:
            v = d.get(t0, _MISSING) if type(d) is dict else _key_step(d, t0, j0)
            v = v.get(t1, _MISSING) if type(v) is dict else _key_step(v, t1, j1)
            if v is _MISSING:
                st[_MISSING_READS].append(key)
                return None
            if v is None:
                st[_MISSING_READS].append(key)
            return v

        return var_tracked2

    if len(keys) == 1:
        (k0, i0), = keys

        def get(d: Any) -> Any:
            if type(d) is dict:
                return d.get(k0, _MISSING)
            return _key_step(d, k0, i0)

    elif len(keys) == 2:
        (k0, i0), (k1, i1) = keys

        def get(d: Any) -> Any:
            if type(d) is dict:
                d = d.get(k0, _MISSING)
            else:
                d = _key_step(d, k0, i0)
            if type(d) is dict:
                return d.get(k1, _MISSING)
            return _key_step(d, k1, i1)

    else:

        def get(d: Any) -> Any:
            return _lookup(d, keys)

    if track:

        def var_tracked(d: Any, st: _Run) -> Any:
            v = get(d)
            if v is _MISSING:
                st[_MISSING_READS].append(key)
                return None
            if v is None:
                st[_MISSING_READS].append(key)
            return v

        return var_tracked

    if const_default:

        def var_const_default(d: Any, st: _Run) -> Any:
            v = get(d)
            return default if v is _MISSING else v

        return var_const_default

    assert default_fn is not None
    dfn = default_fn

    def var_default(d: Any, st: _Run) -> Any:
        v = get(d)
        return dfn(d, st) if v is _MISSING else v

    return var_default


def _dynamic_var(name_fn: Fn, default_fn: Fn | None, default: Any, track: bool) -> Fn:
    def var_dynamic(d: Any, st: _Run) -> Any:
        name = name_fn(d, st)
        if name is None or (type(name) is str and name == ""):
            return d
        key = _to_str(name, st)
        v = _lookup(d, _split_path(key))
        if v is _MISSING:
            if track:
                st[_MISSING_READS].append(key)
            if default_fn is None:
                return None
            return default_fn(d, st)
        if v is None and track:
            st[_MISSING_READS].append(key)
        return v

    return var_dynamic


def _static_keys(c: _Compiler, parts: list[tuple[Fn, Any]], scoped: bool) -> None:
    if scoped:
        return
    for _, const in parts:
        values = const if type(const) is tuple else (const,)
        for v in values:
            if v is not _NC and v is not None and not (type(v) is str and v == ""):
                if type(v) in (str, int, float):
                    c.reads.add(_to_str(v))


def _missing_keys(d: Any, vals: list[Any], st: _Run, path: str) -> list[Any]:
    keys = vals[0] if vals and type(vals[0]) in (list, tuple) else vals
    _charge(st, len(keys), path)
    out = []
    for key in keys:
        v = _var_value(d, key)
        if v is _MISSING or v is None or (type(v) is str and v == ""):
            out.append(key)
    return out


def _build_missing(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    parts = c.args(args, paths, scoped)
    _static_keys(c, parts, scoped)
    fns = _fns(parts)

    def missing(d: Any, st: _Run) -> Any:
        return _missing_keys(d, [f(d, st) for f in fns], st, op_path)

    return missing


def _build_missing_some(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    parts = c.args(args, paths, scoped)
    _static_keys(c, parts[1:], scoped)
    need_fn, options_fn = _fns(parts)

    def missing_some(d: Any, st: _Run) -> Any:
        need = need_fn(d, st)
        options = options_fn(d, st)
        are_missing = _missing_keys(d, [options], st, op_path)
        if type(options) in (list, tuple) or isinstance(options, str):
            present = len(options) - len(are_missing)
            if _le(need, present, st):
                return []
        return are_missing

    return missing_some


# ---- logic


def _build_and(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    fns = _fns(c.args(args, paths, scoped))
    if len(fns) == 1:
        return fns[0]
    if len(fns) == 2:
        f0, f1 = fns

        def and2(d: Any, st: _Run) -> Any:
            v = f0(d, st)
            if v is False or (v is not True and not truthy(v)):
                return v
            return f1(d, st)

        return and2
    if len(fns) == 3:
        f0, f1, f2 = fns

        def and3(d: Any, st: _Run) -> Any:
            v = f0(d, st)
            if v is False or (v is not True and not truthy(v)):
                return v
            v = f1(d, st)
            if v is False or (v is not True and not truthy(v)):
                return v
            return f2(d, st)

        return and3
    head, last = fns[:-1], fns[-1]

    def and_n(d: Any, st: _Run) -> Any:
        for f in head:
            v = f(d, st)
            if v is False or (v is not True and not truthy(v)):
                return v
        return last(d, st)

    return and_n


def _build_or(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    fns = _fns(c.args(args, paths, scoped))
    if len(fns) == 1:
        return fns[0]
    if len(fns) == 2:
        f0, f1 = fns

        def or2(d: Any, st: _Run) -> Any:
            v = f0(d, st)
            if v is True or (v is not False and truthy(v)):
                return v
            return f1(d, st)

        return or2
    head, last = fns[:-1], fns[-1]

    def or_n(d: Any, st: _Run) -> Any:
        for f in head:
            v = f(d, st)
            if v is True or (v is not False and truthy(v)):
                return v
        return last(d, st)

    return or_n


def _build_if(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    fns = _fns(c.args(args, paths, scoped))
    if not fns:
        return _const_fn(None)
    if len(fns) == 1:
        return fns[0]
    if len(fns) == 2:
        f0, f1 = fns

        def if2(d: Any, st: _Run) -> Any:
            v = f0(d, st)
            if v is True or (v is not False and truthy(v)):
                return f1(d, st)
            return None

        return if2
    if len(fns) == 3:
        f0, f1, f2 = fns

        def if3(d: Any, st: _Run) -> Any:
            v = f0(d, st)
            if v is True or (v is not False and truthy(v)):
                return f1(d, st)
            return f2(d, st)

        return if3
    pairs = [(fns[i], fns[i + 1]) for i in range(0, len(fns) - 1, 2)]
    otherwise = fns[-1] if len(fns) % 2 else None

    def if_n(d: Any, st: _Run) -> Any:
        for cond, then in pairs:
            v = cond(d, st)
            if v is True or (v is not False and truthy(v)):
                return then(d, st)
        return otherwise(d, st) if otherwise is not None else None

    return if_n


def _build_not(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    (f,) = _fns(c.args(args, paths, scoped))

    def not_(d: Any, st: _Run) -> Any:
        v = f(d, st)
        if v is True:
            return False
        if v is False:
            return True
        return not truthy(v)

    return not_


def _build_notnot(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    (f,) = _fns(c.args(args, paths, scoped))

    def notnot(d: Any, st: _Run) -> Any:
        return truthy(f(d, st))

    return notnot


# ---- comparison


def _build_eq(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    (fa, ca), (fb, cb) = c.args(args, paths, scoped)
    if cb is not _NC and type(cb) is str:
        if ca is _NC:

            def eq_str(d: Any, st: _Run) -> Any:
                a = fa(d, st)
                if type(a) is str:
                    return a == cb
                return _loose_eq(a, cb, st)

            return eq_str
    if cb is not _NC and (type(cb) is int or type(cb) is float) and ca is _NC:

        def eq_num(d: Any, st: _Run) -> Any:
            a = fa(d, st)
            if type(a) is int or type(a) is float:
                return a == cb
            return _loose_eq(a, cb, st)

        return eq_num

    def eq(d: Any, st: _Run) -> Any:
        a = fa(d, st)
        b = fb(d, st)
        t = type(a)
        if t is type(b) and (t is str or t is int or t is float or t is bool):
            return a == b
        return _loose_eq(a, b, st)

    return eq


def _build_ne(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    eq = _build_eq(c, args, paths, op_path, scoped)

    def ne(d: Any, st: _Run) -> Any:
        return not eq(d, st)

    return ne


def _build_seq(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    (fa, _), (fb, _) = c.args(args, paths, scoped)

    def seq(d: Any, st: _Run) -> Any:
        a = fa(d, st)
        b = fb(d, st)
        t = type(a)
        if t is type(b) and (t is str or t is int or t is float or t is bool):
            return a == b
        return _strict_eq(a, b)

    return seq


def _build_sne(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    seq = _build_seq(c, args, paths, op_path, scoped)

    def sne(d: Any, st: _Run) -> Any:
        return not seq(d, st)

    return sne


def _compare2(fa: Fn, fb: Fn, cb: Any, strict: bool, flip: bool) -> Fn:
    """``a < b`` (strict) or ``a <= b``; flip swaps the operands for ``>``/``>=``."""
    slow = _lt if strict else _le
    if cb is not _NC and (type(cb) is int or type(cb) is float):
        if strict and not flip:

            def lt_num(d: Any, st: _Run) -> Any:
                a = fa(d, st)
                if type(a) is int or type(a) is float:
                    return a < cb
                return _lt(a, cb, st)

            return lt_num
        if strict and flip:

            def gt_num(d: Any, st: _Run) -> Any:
                a = fa(d, st)
                if type(a) is int or type(a) is float:
                    return a > cb
                return _lt(cb, a, st)

            return gt_num
        if not flip:

            def le_num(d: Any, st: _Run) -> Any:
                a = fa(d, st)
                if type(a) is int or type(a) is float:
                    return a <= cb
                return _le(a, cb, st)

            return le_num

        def ge_num(d: Any, st: _Run) -> Any:
            a = fa(d, st)
            if type(a) is int or type(a) is float:
                return a >= cb
            return _le(cb, a, st)

        return ge_num

    def compare(d: Any, st: _Run) -> Any:
        a = fa(d, st)
        b = fb(d, st)
        if flip:
            a, b = b, a
        ta, tb = type(a), type(b)
        if (ta is int or ta is float) and (tb is int or tb is float):
            return a < b if strict else a <= b
        return slow(a, b, st)

    return compare


def _make_between(strict: bool) -> Callable[..., Fn]:
    def build(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
        parts = c.args(args, paths, scoped)
        if len(parts) == 2:
            (fa, _), (fb, cb) = parts
            return _compare2(fa, fb, cb, strict, flip=False)
        fa, fb, fc = _fns(parts)
        slow = _lt if strict else _le

        def between(d: Any, st: _Run) -> Any:
            a = fa(d, st)
            b = fb(d, st)
            cc = fc(d, st)  # the reference evaluates all three before comparing
            return slow(a, b, st) and slow(b, cc, st)

        return between

    return build


def _make_greater(strict: bool) -> Callable[..., Fn]:
    def build(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
        (fa, _), (fb, cb) = c.args(args, paths, scoped)
        return _compare2(fa, fb, cb, strict, flip=True)

    return build


# ---- membership, strings, arrays


def _build_in(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    (fa, ca), (fb, cb) = c.args(args, paths, scoped)
    if type(ca) is str and cb is _NC:

        def in_str(d: Any, st: _Run) -> Any:
            b = fb(d, st)
            if type(b) is str:
                return ca in b if b else False
            return _in(ca, b, st, op_path)

        return in_str
    if type(cb) is tuple and all(type(x) is str for x in cb):
        members = frozenset(cb)

        def in_set(d: Any, st: _Run) -> Any:
            a = fa(d, st)
            if type(a) is str:
                return a in members
            return _in(a, cb, st, op_path)

        return in_set

    def in_(d: Any, st: _Run) -> Any:
        return _in(fa(d, st), fb(d, st), st, op_path)

    return in_


def _build_contains(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    fc, fv = _fns(c.args(args, paths, scoped))

    def contains(d: Any, st: _Run) -> Any:
        return _contains(fc(d, st), fv(d, st), st, op_path)

    return contains


def _build_cat(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    fns = _fns(c.args(args, paths, scoped))

    def cat(d: Any, st: _Run) -> Any:
        out = []
        for f in fns:
            v = f(d, st)
            out.append(v if type(v) is str else ("" if v is None else _to_str(v, st)))
        s = "".join(out)
        st[_LEFT] -= len(s)
        if st[_LEFT] < 0:
            raise _over_budget(st, op_path)
        return s

    return cat


def _build_substr(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    fns = _fns(c.args(args, paths, scoped))
    if len(fns) == 2:
        fs, fa = fns

        def substr2(d: Any, st: _Run) -> Any:
            return _substr(fs(d, st), fa(d, st), _MISSING, st)

        return substr2
    fs, fa, fl = fns

    def substr3(d: Any, st: _Run) -> Any:
        return _substr(fs(d, st), fa(d, st), fl(d, st), st)

    return substr3


def _build_merge(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    fns = _fns(c.args(args, paths, scoped))

    def merge(d: Any, st: _Run) -> Any:
        out: list[Any] = []
        for f in fns:
            v = f(d, st)
            if type(v) is list or type(v) is tuple:
                st[_LEFT] -= len(v)
                if st[_LEFT] < 0:
                    raise _over_budget(st, op_path)
                out.extend(v)
            else:
                out.append(v)
        return out

    return merge


# ---- arithmetic


def _add2(a: Any, b: Any, st: _Run) -> Any:
    if type(a) is int and type(b) is int:
        return _int_out(a + b)
    x = _parse_float(a, st)
    y = _parse_float(b, st)
    if type(x) is int and type(y) is int:
        return _int_out(x + y)
    return _float_out(_as_float(x) + _as_float(y))


def _build_plus(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    fns = _fns(c.args(args, paths, scoped))
    if len(fns) == 2:
        f0, f1 = fns

        def plus2(d: Any, st: _Run) -> Any:
            return _add2(f0(d, st), f1(d, st), st)

        return plus2

    def plus(d: Any, st: _Run) -> Any:
        total: Any = 0
        for f in fns:
            total = _add2(total, f(d, st), st)
        return total

    return plus


def _mul2(a: Any, b: Any, st: _Run) -> Any:
    x = a if (type(a) is int or type(a) is float) else _parse_float(a, st)
    y = b if (type(b) is int or type(b) is float) else _parse_float(b, st)
    if type(x) is int and type(y) is int and -_MAX_SAFE <= x <= _MAX_SAFE and -_MAX_SAFE <= y <= _MAX_SAFE:
        return _int_out(x * y)
    return _float_out(_as_float(x) * _as_float(y))


def _build_times(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    fns = _fns(c.args(args, paths, scoped))
    if len(fns) == 1:
        (f0,) = fns

        def times1(d: Any, st: _Run) -> Any:
            v = _parse_float(f0(d, st), st)
            return v if type(v) is int else _float_out(v)

        return times1
    if len(fns) == 2:
        f0, f1 = fns

        def times2(d: Any, st: _Run) -> Any:
            return _mul2(f0(d, st), f1(d, st), st)

        return times2
    first, rest = fns[0], fns[1:]

    def times(d: Any, st: _Run) -> Any:
        total = first(d, st)
        for f in rest:
            total = _mul2(total, f(d, st), st)
        return total

    return times


def _num_pair(a: Any, b: Any, st: _Run) -> tuple[Any, Any]:
    x = a if (type(a) is int or type(a) is float) else _to_num(a, st)
    y = b if (type(b) is int or type(b) is float) else _to_num(b, st)
    return x, y


def _sub(a: Any, b: Any, st: _Run) -> Any:
    x, y = _num_pair(a, b, st)
    if type(x) is int and type(y) is int:
        return _int_out(x - y)
    return _float_out(_as_float(x) - _as_float(y))


def _build_minus(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    fns = _fns(c.args(args, paths, scoped))
    if len(fns) == 1:
        (f0,) = fns

        def negate(d: Any, st: _Run) -> Any:
            v = f0(d, st)
            x = v if (type(v) is int or type(v) is float) else _to_num(v, st)
            return _int_out(-x) if type(x) is int else _float_out(-x)

        return negate
    f0, f1 = fns

    def minus(d: Any, st: _Run) -> Any:
        return _sub(f0(d, st), f1(d, st), st)

    return minus


def _div(a: Any, b: Any, st: _Run) -> Any:
    x, y = _num_pair(a, b, st)
    fx, fy = _as_float(x), _as_float(y)
    if fy == 0:
        if fx == 0 or fx != fx:
            return math.nan
        return math.inf if (fx > 0) == (math.copysign(1.0, fy) > 0) else -math.inf
    if type(x) is int and type(y) is int and y != 0 and x % y == 0:
        return _int_out(x // y)
    return _float_out(fx / fy)


def _mod(a: Any, b: Any, st: _Run) -> Any:
    x, y = _num_pair(a, b, st)
    if type(x) is int and type(y) is int:
        if y == 0:
            return math.nan
        r = abs(x) % abs(y)
        return _int_out(-r if x < 0 else r)
    fx, fy = _as_float(x), _as_float(y)
    if fy == 0 or fx != fx or fy != fy or math.isinf(fx):
        return math.nan
    if math.isinf(fy):
        return _float_out(fx)
    return _float_out(math.fmod(fx, fy))


def _binary(func: Callable[[Any, Any, _Run], Any]) -> Callable[..., Fn]:
    def build(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
        f0, f1 = _fns(c.args(args, paths, scoped))

        def binary(d: Any, st: _Run) -> Any:
            return func(f0(d, st), f1(d, st), st)

        return binary

    return build


def _make_min_max(want_max: bool) -> Callable[..., Fn]:
    def build(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
        fns = _fns(c.args(args, paths, scoped))

        def min_max(d: Any, st: _Run) -> Any:
            return _js_min_max([f(d, st) for f in fns], st, want_max)

        return min_max

    return build


# ---- iteration


def _body_cost(rule: Any) -> int:
    """Work charged per iteration: the number of nodes of the body (at least 1)."""
    count = 0
    stack = [rule]
    while stack:
        v = stack.pop()
        count += 1
        if type(v) is dict:
            stack.extend(v.values())
        elif type(v) in (list, tuple):
            stack.extend(v)
    return count


def _make_iterator(kind: str) -> Callable[..., Fn]:
    def build(c: _Compiler, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
        coll_fn, _ = c.node(args[0], paths[0], scoped)
        body, _ = c.node(args[1], paths[1], True)  # the body reads each item, not the context
        cost = _body_cost(args[1]) + 1

        if kind == "map":

            def map_(d: Any, st: _Run) -> Any:
                items = coll_fn(d, st)
                if type(items) is not list and type(items) is not tuple:
                    return []
                st[_LEFT] -= len(items) * cost
                if st[_LEFT] < 0:
                    raise _over_budget(st, op_path)
                return [body(x, st) for x in items]

            return map_
        if kind == "filter":

            def filter_(d: Any, st: _Run) -> Any:
                items = coll_fn(d, st)
                if type(items) is not list and type(items) is not tuple:
                    return []
                st[_LEFT] -= len(items) * cost
                if st[_LEFT] < 0:
                    raise _over_budget(st, op_path)
                return [x for x in items if truthy(body(x, st))]

            return filter_
        if kind == "reduce":
            init_fn = c.node(args[2], paths[2], scoped)[0] if len(args) > 2 else _const_fn(None)

            def reduce_(d: Any, st: _Run) -> Any:
                items = coll_fn(d, st)
                acc = init_fn(d, st)
                if type(items) is not list and type(items) is not tuple:
                    return acc
                st[_LEFT] -= len(items) * cost
                if st[_LEFT] < 0:
                    raise _over_budget(st, op_path)
                for x in items:
                    acc = body({"current": x, "accumulator": acc}, st)
                return acc

            return reduce_

        empty_result = kind == "none"  # all/some of nothing is false, none of nothing is true
        stop_on = kind != "all"  # some/none stop at the first truthy item, all at the first falsy

        def quantifier(d: Any, st: _Run) -> Any:
            items = coll_fn(d, st)
            if (type(items) is not list and type(items) is not tuple) or not items:
                return empty_result
            for x in items:
                st[_LEFT] -= cost
                if st[_LEFT] < 0:
                    raise _over_budget(st, op_path)
                if truthy(body(x, st)) is stop_on:
                    return kind == "some" if stop_on else False
            return kind != "some"

        return quantifier

    return build


_BUILDERS: dict[str, Callable[[_Compiler, list[Any], list[str], str, bool], Fn]] = {
    "==": _build_eq,
    "===": _build_seq,
    "!=": _build_ne,
    "!==": _build_sne,
    ">": _make_greater(strict=True),
    ">=": _make_greater(strict=False),
    "<": _make_between(strict=True),
    "<=": _make_between(strict=False),
    "!": _build_not,
    "!!": _build_notnot,
    "and": _build_and,
    "or": _build_or,
    "if": _build_if,
    "?:": _build_if,
    "var": _build_var,
    "missing": _build_missing,
    "missing_some": _build_missing_some,
    "in": _build_in,
    "contains": _build_contains,
    "+": _build_plus,
    "-": _build_minus,
    "*": _build_times,
    "/": _binary(_div),
    "%": _binary(_mod),
    "min": _make_min_max(want_max=False),
    "max": _make_min_max(want_max=True),
    "cat": _build_cat,
    "substr": _build_substr,
    "merge": _build_merge,
    "map": _make_iterator("map"),
    "filter": _make_iterator("filter"),
    "reduce": _make_iterator("reduce"),
    "all": _make_iterator("all"),
    "some": _make_iterator("some"),
    "none": _make_iterator("none"),
}
assert set(_BUILDERS) == SUPPORTED_OPERATORS


# --------------------------------------------------------------------------- public API


class CompiledRule:
    """A rule checked and compiled once; evaluate it as often as needed (thread-safe)."""

    __slots__ = ("rule", "reads", "reads_without_default", "budget", "_fn", "_limits")

    def __init__(
        self,
        rule: Any,
        fn: Fn,
        reads: frozenset[str],
        reads_without_default: frozenset[str],
        budget: int,
        limits: tuple[int, int] = (DEFAULT_MAX_DEPTH, DEFAULT_MAX_NODES),
    ) -> None:
        self.rule = rule
        #: dot paths the rule reads from the top-level data (static names only)
        self.reads = reads
        #: the subset of ``reads`` read by a ``var`` without a default
        self.reads_without_default = reads_without_default
        self.budget = budget
        self._fn = fn
        self._limits = limits

    def __reduce__(self) -> tuple[Any, ...]:
        # Closures do not pickle or deep-copy; the rule does, so copies recompile it.
        return (_recompile, (self.rule, self._limits, self.budget))

    def __repr__(self) -> str:
        return f"CompiledRule({json.dumps(self.rule)[:80]})"

    def evaluate(self, data: Any = None, *, budget: int | None = None) -> Any:
        """The rule's value on ``data`` with the reference semantics.

        Raises LogicBudgetError when the evaluation would exceed its work budget.
        """
        b = self.budget if budget is None else budget
        st: _Run = [b, [], b]
        try:
            return self._fn(data, st)
        except LogicError:
            raise
        except Exception as exc:
            raise _evaluation_error(exc) from exc

    def evaluate_guard(self, data: Any = None, *, budget: int | None = None) -> GuardResult:
        """Evaluate as a transition guard: a missing variable means the guard does not hold.

        The reference makes ``{"<": [{"var": "age"}, 18]}`` true when ``age`` is
        missing (null compares as 0). Here any top-level ``var`` without a
        default that finds nothing (absent or null) makes ``holds`` false and is
        listed in ``missing_vars``. Reads inside map/filter/reduce/all/some/none
        bodies and the lookups of ``missing``/``missing_some`` do not count.
        """
        b = self.budget if budget is None else budget
        st: _Run = [b, [], b]
        try:
            value = self._fn(data, st)
        except LogicError:
            raise
        except Exception as exc:
            raise _evaluation_error(exc) from exc
        if st[_MISSING_READS]:
            return GuardResult(value, False, tuple(dict.fromkeys(st[_MISSING_READS])))
        if value is True:
            return _HOLDS
        if value is False:
            return _DOES_NOT_HOLD
        return GuardResult(value, truthy(value), ())


# The two most common guard results, shared (they are immutable) to save building them.
_HOLDS = GuardResult(True, True, ())
_DOES_NOT_HOLD = GuardResult(False, False, ())


def _evaluation_error(exc: Exception) -> LogicError:
    """Map an unexpected failure during evaluation to our typed errors."""
    if isinstance(exc, (RecursionError, MemoryError)):
        return LogicBudgetError(
            f"evaluation ran out of resources ({type(exc).__name__}); "
            "the data is too deeply nested or too large"
        )
    # e.g. data holding a Python type JSON does not have, or an exotic mapping
    logger.debug("JsonLogic evaluation failed", exc_info=exc)
    return LogicError(f"evaluation failed: {type(exc).__name__}: {exc}")


def compile_logic(
    rule: Any,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_nodes: int = DEFAULT_MAX_NODES,
    budget: int = DEFAULT_BUDGET,
) -> CompiledRule:
    """Check and compile a rule; raises LogicError (with a JSON path) for anything wrong."""
    if not 1 <= max_depth <= HARD_MAX_DEPTH:
        raise LogicError(f"max_depth must be between 1 and {HARD_MAX_DEPTH}, got {max_depth}")
    issues = _scan(rule, max_depth, max_nodes, first_only=True)
    if issues:
        first = issues[0]
        message = first.message + (f" ({first.hint})" if first.hint else "")
        raise LogicError(message, path=first.path)
    compiler = _Compiler()
    fn, _ = compiler.node(rule, "$", scoped=False)
    return CompiledRule(
        rule,
        fn,
        frozenset(compiler.reads),
        frozenset(compiler.reads_without_default),
        budget,
        (max_depth, max_nodes),
    )


def _recompile(rule: Any, limits: tuple[int, int], budget: int) -> CompiledRule:
    return compile_logic(rule, max_depth=limits[0], max_nodes=limits[1], budget=budget)


_CACHE_SIZE = 512
_cache: OrderedDict[str, CompiledRule] = OrderedDict()
_cache_lock = threading.Lock()


def evaluate_logic(logic: Any, data: Any = None) -> Any:
    """Evaluate a rule once (the seed's API); compiled rules are cached by their canonical JSON."""
    try:
        canonical = json.dumps(logic, sort_keys=True, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return compile_logic(logic).evaluate(data)  # raises the precise LogicError
    with _cache_lock:
        compiled = _cache.get(canonical)
        if compiled is not None:
            _cache.move_to_end(canonical)
    if compiled is None:
        compiled = compile_logic(logic)
        with _cache_lock:
            _cache[canonical] = compiled
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    return compiled.evaluate(data)
