"""Compiles a checked rule into nested closures, folding constants, so a guard costs a few Python calls per turn instead
of a tree walk."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from llm_fsm.logic._checks import _fmt_key
from llm_fsm.logic._coercions import (
    _LEFT,
    _MAX_SAFE,
    _MISSING,
    _MISSING_READS,
    _as_float,
    _charge,
    _contains,
    _float_out,
    _in,
    _int_out,
    _js_min_max,
    _key_step,
    _le,
    _lookup,
    _loose_eq,
    _lt,
    _over_budget,
    _parse_float,
    _Run,
    _split_path,
    _strict_eq,
    _substr,
    _to_num,
    _to_str,
    _var_value,
    truthy,
)
from llm_fsm.logic._spec import SUPPORTED_OPERATORS

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
        self.mentions_without_default: set[str] = set()

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
        return [self.node(a, p, scoped) for a, p in zip(args, paths, strict=False)]


_SCALAR_TYPES = (type(None), bool, int, float, str)

_ITERATOR_OPS = frozenset(("map", "filter", "reduce", "all", "some", "none"))


def _all_scalars(values: Any) -> bool:
    """Whether the compiler folds this array to a constant (see ``_Compiler.array``)."""
    return all(type(v) in _SCALAR_TYPES for v in values)


def static_reads(rule: Any) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """(reads, reads_without_default, mentions_without_default) of a checked rule, as compiling it records
    them, found by a walk that builds no closures.

    It follows the compiler: objects of several keys are literals; a var's name is static when it is a scalar
    or an array of scalars, and reads nothing when it is null or ""; the constant keys of missing and
    missing_some are reads too; the body of map, filter, reduce, all, some and none reads the item, not the
    context. ``tests/test_logic.py`` holds the two to the same sets.
    """
    reads: set[str] = set()
    without_default: set[str] = set()
    mentions: set[str] = set()
    context: list[Any] = [rule]  # nodes that read the context
    items: list[Any] = []  # nodes in the body of an iteration: they read the item
    for stack, scoped in ((context, False), (items, True)):
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is not dict:
                if kind is list or kind is tuple:
                    stack.extend(node)
                continue
            if len(node) != 1:
                continue
            for op, args in node.items():
                arguments = args if type(args) in (list, tuple) else (args,)
                if op in _ITERATOR_OPS:
                    for index, arg in enumerate(arguments):
                        (items if index == 1 else stack).append(arg)
                    continue
                stack.extend(arguments)
                if op == "var":
                    if not arguments:
                        continue
                    name = arguments[0]
                    if type(name) is str:
                        if not name:
                            continue  # the whole data
                        key = name
                    elif type(name) in (list, tuple):
                        if not _all_scalars(name):
                            continue  # a name computed at run time
                        key = _to_str(list(name))
                    elif type(name) in _SCALAR_TYPES and name is not None:
                        key = _to_str(name)
                    else:
                        continue
                    if len(arguments) == 1:
                        mentions.add(key)
                        if not scoped:
                            without_default.add(key)
                    if not scoped:
                        reads.add(key)
                elif (op == "missing" or op == "missing_some") and not scoped:
                    # their constant keys count as reads (see _static_keys)
                    for arg in arguments if op == "missing" else arguments[1:]:
                        values = arg if type(arg) in (list, tuple) and _all_scalars(arg) else (arg,)
                        reads.update(_to_str(v) for v in values if type(v) in (str, int, float) and v != "")
    return frozenset(reads), frozenset(without_default), frozenset(mentions)


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
    if not has_default:
        c.mentions_without_default.add(key)
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
        ((t0, j0),) = keys

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
        ((k0, i0),) = keys

        def get(d: Any) -> Any:
            if type(d) is dict:
                return d.get(k0, _MISSING)
            return _key_step(d, k0, i0)

    elif len(keys) == 2:
        (k0, i0), (k1, i1) = keys

        def get(d: Any) -> Any:
            d = d.get(k0, _MISSING) if type(d) is dict else _key_step(d, k0, i0)
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
            if type(v) in (str, int, float) and not (type(v) is str and v == ""):
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
