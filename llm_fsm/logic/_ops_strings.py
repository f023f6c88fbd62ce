"""Compiling ``in``, ``contains``, ``cat`` and ``substr``: membership (a substring of a string, an item of a
list) and building strings, charged against the rule's budget by the length of what they build."""

from __future__ import annotations

from typing import Any

from llm_fsm.logic._closures import _NC, Fn, _Compiling, _fns
from llm_fsm.logic._coercions import _LEFT, _MISSING, _contains, _in, _over_budget, _Run, _substr, _to_str


def _build_in(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
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


def _build_contains(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    fc, fv = _fns(c.args(args, paths, scoped))

    def contains(d: Any, st: _Run) -> Any:
        return _contains(fc(d, st), fv(d, st), st, op_path)

    return contains


def _build_cat(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
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


def _build_substr(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
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
