"""Compiling the data-access operators ``var``, ``missing`` and ``missing_some``. They are most of what a
guard does, so the common shapes of ``var`` get their lookup inlined; and they are how the compiler learns
which top-level keys a rule reads."""

from __future__ import annotations

from typing import Any

from llm_fsm.logic._closures import _NC, Fn, _Compiling, _fns
from llm_fsm.logic._coercions import (
    _MISSING,
    _MISSING_READS,
    _charge,
    _key_step,
    _le,
    _lookup,
    _Run,
    _split_path,
    _to_str,
    _var_value,
)


def _build_var(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
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


def _static_keys(c: _Compiling, parts: list[tuple[Fn, Any]], scoped: bool) -> None:
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


def _build_missing(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
    parts = c.args(args, paths, scoped)
    _static_keys(c, parts, scoped)
    fns = _fns(parts)

    def missing(d: Any, st: _Run) -> Any:
        return _missing_keys(d, [f(d, st) for f in fns], st, op_path)

    return missing


def _build_missing_some(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
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
