"""JavaScript's value model as json-logic-js applies it: truthiness, coercions, loose and strict equality, comparison,
and data lookup.

Every conversion that can be made to do unbounded work is charged against the rule's budget.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from llm_fsm.errors import LogicBudgetError

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
        nonzero: bool = value != 0
        return nonzero
    if t is float:
        nonzero_number: bool = value != 0.0 and value == value
        return nonzero_number
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
_Run = list[Any]

_LEFT, _MISSING_READS, _BUDGET = 0, 1, 2


def _over_budget(st: _Run, path: str) -> LogicBudgetError:
    return LogicBudgetError(f"evaluation exceeded its work budget of {st[_BUDGET]} steps", path=path)


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
        number: int | float = v
        return number
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
        number: int | float = v
        return number
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
        text: str = v
        return text
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
            return d.get(key, _MISSING)
        except Exception:  # a caller's exotic mapping; a failed read is just "missing"
            return _MISSING
    return _MISSING


def _split_path(name: str) -> tuple[tuple[str, int | None], ...]:
    return tuple((part, int(part) if _INDEX_RE.fullmatch(part) else None) for part in name.split("."))


def _lookup(d: Any, keys: tuple[tuple[str, int | None], ...]) -> Any:
    for key, index in keys:
        d = d.get(key, _MISSING) if type(d) is dict else _key_step(d, key, index)
        if d is _MISSING:
            return _MISSING
    return d


def _var_value(d: Any, name: Any) -> Any:
    """The reference ``var`` with a runtime name; _MISSING when absent."""
    if name is None or (type(name) is str and name == ""):
        return d
    return _lookup(d, _split_path(_to_str(name)))
