"""Compiling ``+``, ``-``, ``*``, ``/``, ``%``, ``min`` and ``max`` with JavaScript's numbers: integers stay
integers while they are exact (up to 2**53), strings are parsed as JavaScript parses them, and dividing by
zero gives an infinity or NaN rather than an exception."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from llm_fsm.logic._closures import Fn, _Compiling, _fns
from llm_fsm.logic._coercions import (
    _MAX_SAFE,
    _as_float,
    _float_out,
    _int_out,
    _js_min_max,
    _parse_float,
    _Run,
    _to_num,
)


def _add2(a: Any, b: Any, st: _Run) -> Any:
    if type(a) is int and type(b) is int:
        return _int_out(a + b)
    x = _parse_float(a, st)
    y = _parse_float(b, st)
    if type(x) is int and type(y) is int:
        return _int_out(x + y)
    return _float_out(_as_float(x) + _as_float(y))


def _build_plus(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
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


def _build_times(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
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


def _build_minus(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
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
    def build(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
        f0, f1 = _fns(c.args(args, paths, scoped))

        def binary(d: Any, st: _Run) -> Any:
            return func(f0(d, st), f1(d, st), st)

        return binary

    return build


def _make_min_max(want_max: bool) -> Callable[..., Fn]:
    def build(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
        fns = _fns(c.args(args, paths, scoped))

        def min_max(d: Any, st: _Run) -> Any:
            return _js_min_max([f(d, st) for f in fns], st, want_max)

        return min_max

    return build
