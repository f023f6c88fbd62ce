"""What the compiler and its operator builders share. A compiled rule is a closure ``Fn(data, run)``; each
compile step returns it with its constant value (``_NC`` when it has none) so that a parent can specialise on
constant arguments.

Builders see the compiler only through ``_Compiling``, so each family of operators sits in a module of its own
without importing the driver (``_compiler``) that imports them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from llm_fsm.logic._coercions import _Run

Fn = Callable[[Any, _Run], Any]


class _NoConst:
    __slots__ = ()


_NC: Any = _NoConst()


def _const_fn(value: Any) -> Fn:
    def const(d: Any, st: _Run) -> Any:
        return value

    return const


def _fns(parts: list[tuple[Fn, Any]]) -> list[Fn]:
    return [f for f, _ in parts]


class _Compiling(Protocol):
    """What an operator's builder uses of the compiler: compiling its arguments, and recording the keys the
    rule reads (``_compiler._Compiler`` is the one implementation)."""

    reads: set[str]
    reads_without_default: set[str]
    mentions_without_default: set[str]

    def node(self, rule: Any, path: str, scoped: bool) -> tuple[Fn, Any]: ...

    def args(self, args: list[Any], paths: list[str], scoped: bool) -> list[tuple[Fn, Any]]: ...


#: compiles one operator: (compiler, arguments, their paths, the operator's path, inside an iteration body)
Builder = Callable[[_Compiling, list[Any], list[str], str, bool], Fn]
