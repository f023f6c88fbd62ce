"""The public face of the evaluator: compiled rules, ``compile_logic`` and a cached ``evaluate_logic``."""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

from llm_fsm.errors import LogicBudgetError, LogicError
from llm_fsm.logic._checks import _passes, _scan
from llm_fsm.logic._closures import Fn
from llm_fsm.logic._coercions import _MISSING_READS, _Run, truthy
from llm_fsm.logic._compiler import _Compiler
from llm_fsm.logic._spec import (
    DEFAULT_BUDGET,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_NODES,
    HARD_MAX_DEPTH,
    GuardResult,
)

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------- public API


class CompiledRule:
    """A rule checked and compiled once; evaluate it as often as needed (thread-safe)."""

    __slots__ = ("rule", "reads", "reads_without_default", "mentions_without_default", "budget", "_fn", "_limits")

    def __init__(
        self,
        rule: Any,
        fn: Fn,
        reads: frozenset[str],
        reads_without_default: frozenset[str],
        budget: int,
        limits: tuple[int, int] = (DEFAULT_MAX_DEPTH, DEFAULT_MAX_NODES),
        mentions_without_default: frozenset[str] = frozenset(),
    ) -> None:
        self.rule = rule
        #: dot paths the rule reads from the top-level data (static names only)
        self.reads = reads
        #: the subset of ``reads`` read by a ``var`` without a default
        self.reads_without_default = reads_without_default
        #: every static var name read without a default, inside map/filter/reduce bodies too (for lint)
        self.mentions_without_default = mentions_without_default
        self.budget = budget
        self._fn = fn
        self._limits = limits

    def __reduce__(self) -> tuple[Any, ...]:
        # Closures do not pickle or deep-copy; the rule does, so copies recompile it.
        return (_recompile, (self.rule, self._limits, self.budget))

    def __repr__(self) -> str:
        return f"CompiledRule({json.dumps(self.rule)[:80]})"

    def evaluate(self, data: Any = None, *, budget: int | None = None) -> Any:
        """The rule's value on ``data`` with the reference semantics.

        Raises LogicBudgetError when the evaluation would exceed its work budget.
        """
        b = self.budget if budget is None else budget
        st: _Run = [b, [], b]
        try:
            return self._fn(data, st)
        except LogicError:
            raise
        except Exception as exc:
            raise _evaluation_error(exc) from exc

    def evaluate_guard(self, data: Any = None, *, budget: int | None = None) -> GuardResult:
        """Evaluate as a transition guard: a missing variable means the guard does not hold.

        The reference makes ``{"<": [{"var": "age"}, 18]}`` true when ``age`` is
        missing (null compares as 0). Here any top-level ``var`` without a
        default that finds nothing (absent or null) makes ``holds`` false and is
        listed in ``missing_vars``. Reads inside map/filter/reduce/all/some/none
        bodies and the lookups of ``missing``/``missing_some`` do not count.
        """
        b = self.budget if budget is None else budget
        st: _Run = [b, [], b]
        try:
            value = self._fn(data, st)
        except LogicError:
            raise
        except Exception as exc:
            raise _evaluation_error(exc) from exc
        if st[_MISSING_READS]:
            return GuardResult(value, False, tuple(dict.fromkeys(st[_MISSING_READS])))
        if value is True:
            return _HOLDS
        if value is False:
            return _DOES_NOT_HOLD
        return GuardResult(value, truthy(value), ())


# The two most common guard results, shared (they are immutable) to save building them.
_HOLDS = GuardResult(True, True, ())

_DOES_NOT_HOLD = GuardResult(False, False, ())


def _evaluation_error(exc: Exception) -> LogicError:
    """Map an unexpected failure during evaluation to our typed errors."""
    if isinstance(exc, (RecursionError, MemoryError)):
        return LogicBudgetError(
            f"evaluation ran out of resources ({type(exc).__name__}); the data is too deeply nested or too large"
        )
    # e.g. data holding a Python type JSON does not have, or an exotic mapping
    logger.debug("JsonLogic evaluation failed", exc_info=exc)
    return LogicError(f"evaluation failed: {type(exc).__name__}: {exc}")


def compile_logic(
    rule: Any,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_nodes: int = DEFAULT_MAX_NODES,
    budget: int = DEFAULT_BUDGET,
) -> CompiledRule:
    """Check and compile a rule; raises LogicError (with a JSON path) for anything wrong."""
    if not 1 <= max_depth <= HARD_MAX_DEPTH:
        raise LogicError(f"max_depth must be between 1 and {HARD_MAX_DEPTH}, got {max_depth}")
    check_rule(rule, max_depth=max_depth, max_nodes=max_nodes)
    return compile_checked(rule, max_depth=max_depth, max_nodes=max_nodes, budget=budget)


def check_rule(rule: Any, *, max_depth: int = DEFAULT_MAX_DEPTH, max_nodes: int = DEFAULT_MAX_NODES) -> None:
    """Raise LogicError (with a JSON path) for the first structural problem of a rule, as ``compile_logic`` does."""
    if _passes(rule, max_depth, max_nodes):
        return
    issues = _scan(rule, max_depth, max_nodes, first_only=True)
    if issues:
        first = issues[0]
        message = first.message + (f" ({first.hint})" if first.hint else "")
        raise LogicError(message, path=first.path)


def compile_checked(
    rule: Any,
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_nodes: int = DEFAULT_MAX_NODES,
    budget: int = DEFAULT_BUDGET,
) -> CompiledRule:
    """Compile a rule that ``check_rule`` passed, or a part of one (a part of a checked rule is within its limits)."""
    compiler = _Compiler()
    fn, _ = compiler.node(rule, "$", scoped=False)
    return CompiledRule(
        rule,
        fn,
        frozenset(compiler.reads),
        frozenset(compiler.reads_without_default),
        budget,
        (max_depth, max_nodes),
        frozenset(compiler.mentions_without_default),
    )


def _recompile(rule: Any, limits: tuple[int, int], budget: int) -> CompiledRule:
    return compile_logic(rule, max_depth=limits[0], max_nodes=limits[1], budget=budget)


_CACHE_SIZE = 512


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compiled(canonical: str) -> CompiledRule:
    """The compiled rule of a canonical JSON text. ``lru_cache`` is thread-safe by itself, so the pure core
    needs no lock (and imports no ``threading``)."""
    return compile_logic(json.loads(canonical))


def evaluate_logic(logic: Any, data: Any = None) -> Any:
    """Evaluate a rule once (the seed's API); compiled rules are cached by their canonical JSON."""
    try:
        canonical = json.dumps(logic, sort_keys=True, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return compile_logic(logic).evaluate(data)  # raises the precise LogicError
    return _compiled(canonical).evaluate(data)
