"""Compiling ``merge`` and the iterations ``map``, ``filter``, ``reduce``, ``all``, ``some`` and ``none``. An
iteration's body reads each item, not the context; each item is charged the size of the body, so the work
of a rule stays bounded whatever the data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llm_fsm.logic._closures import Fn, _Compiling, _const_fn, _fns
from llm_fsm.logic._coercions import _LEFT, _over_budget, _Run, truthy


def _build_merge(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
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
    def build(c: _Compiling, args: list[Any], paths: list[str], op_path: str, scoped: bool) -> Fn:
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
