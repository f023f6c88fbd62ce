"""Compiling ``and``, ``or``, ``if`` (and ``?:``), ``!`` and ``!!``. They short-circuit as json-logic-js does,
returning the deciding value rather than a boolean; the two- and three-argument forms are unrolled because
guards are mostly those."""

from __future__ import annotations

from typing import Any

from llm_fsm.logic._closures import Fn, _Compiling, _const_fn, _fns
from llm_fsm.logic._coercions import _Run, truthy


def _build_and(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
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


def _build_or(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
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


def _build_if(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
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


def _build_not(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    (f,) = _fns(c.args(args, paths, scoped))

    def not_(d: Any, st: _Run) -> Any:
        v = f(d, st)
        if v is True:
            return False
        if v is False:
            return True
        return not truthy(v)

    return not_


def _build_notnot(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    (f,) = _fns(c.args(args, paths, scoped))

    def notnot(d: Any, st: _Run) -> Any:
        return truthy(f(d, st))

    return notnot
