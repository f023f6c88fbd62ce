"""Compiling ``==``, ``===``, ``!=``, ``!==``, ``<``, ``<=`` (with their three-argument "between" forms), ``>``
and ``>=``. Same-type scalars, and a constant on the right, compare natively; anything else goes through
JavaScript's coercions in ``_coercions``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llm_fsm.logic._closures import _NC, Fn, _Compiling, _fns
from llm_fsm.logic._coercions import _le, _loose_eq, _lt, _Run, _strict_eq


def _build_eq(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    (fa, ca), (fb, cb) = c.args(args, paths, scoped)
    if cb is not _NC and type(cb) is str and ca is _NC:

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


def _build_ne(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    eq = _build_eq(c, args, paths, op_path, scoped)

    def ne(d: Any, st: _Run) -> Any:
        return not eq(d, st)

    return ne


def _build_seq(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    (fa, _), (fb, _) = c.args(args, paths, scoped)

    def seq(d: Any, st: _Run) -> Any:
        a = fa(d, st)
        b = fb(d, st)
        t = type(a)
        if t is type(b) and (t is str or t is int or t is float or t is bool):
            return a == b
        return _strict_eq(a, b)

    return seq


def _build_sne(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
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
    def build(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
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
    def build(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
        (fa, _), (fb, cb) = c.args(args, paths, scoped)
        return _compare2(fa, fb, cb, strict, flip=True)

    return build
