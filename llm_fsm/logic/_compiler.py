"""Compiles a checked rule into nested closures, folding constants, so a guard costs a few Python calls per turn instead
of a tree walk.

This is the driver: it walks the rule and hands each operator to its builder, found by family in the ``_ops_*``
modules (data access, logic, comparison, strings, arrays, arithmetic); ``static_reads`` finds what compiling
would record without building closures."""

from __future__ import annotations

import json
from typing import Any

from llm_fsm.logic._checks import _fmt_key
from llm_fsm.logic._closures import _NC, Builder, Fn, _const_fn
from llm_fsm.logic._coercions import _Run, _to_str
from llm_fsm.logic._ops_arithmetic import _binary, _build_minus, _build_plus, _build_times, _div, _make_min_max, _mod
from llm_fsm.logic._ops_arrays import _build_merge, _make_iterator
from llm_fsm.logic._ops_compare import _build_eq, _build_ne, _build_seq, _build_sne, _make_between, _make_greater
from llm_fsm.logic._ops_data import _build_missing, _build_missing_some, _build_var
from llm_fsm.logic._ops_logic import _build_and, _build_if, _build_not, _build_notnot, _build_or
from llm_fsm.logic._ops_strings import _build_cat, _build_contains, _build_in, _build_substr
from llm_fsm.logic._spec import SUPPORTED_OPERATORS


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


_BUILDERS: dict[str, Builder] = {
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
