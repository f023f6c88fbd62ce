"""Guards: how a condition's JsonLogic decides whether a transition may fire.

Reference JsonLogic treats a missing variable as ``null``, and ``null``
compares as 0: ``{"<": [{"var": "age"}, 18]}`` is *true* when nobody has said
an age. In a guard that is dangerous, so the engine judges guards clause by
clause:

* ``and`` holds when every clause holds; ``or`` holds when any clause holds
  (so ``{"or": [{"==": [{"var": "issue.category"}, "billing"]}, {"in": ["bill",
  {"var": "issue.description"}]}]}`` holds for a billing description even
  though no category was collected);
* any other clause holds when it is truthy **and** read no variable that is
  missing (absent or null) without a default.

A rule that gives defaults (``{"var": ["age", 0]}``) or checks presence
(``missing``, ``requires_context_keys``) keeps full control.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llm_fsm.logic._rules import CompiledRule, compile_logic
from llm_fsm.logic._spec import GuardResult


@dataclass(frozen=True)
class Guard:
    """A compiled condition: an ``and``/``or`` skeleton over compiled leaf clauses."""

    rule: CompiledRule
    """The whole rule, compiled (what ``reads`` and plain evaluation use)."""
    operator: str | None = None
    children: tuple[Guard, ...] = ()

    @property
    def reads(self) -> frozenset[str]:
        return self.rule.reads

    @property
    def reads_without_default(self) -> frozenset[str]:
        return self.rule.reads_without_default

    def evaluate(self, data: Any = None) -> Any:
        return self.rule.evaluate(data)

    def evaluate_guard(self, data: Mapping[str, Any] | None) -> GuardResult:
        if self.operator is None:
            return self.rule.evaluate_guard(data)
        missing: list[str] = []
        if self.operator == "and":
            for child in self.children:
                result = child.evaluate_guard(data)
                if not result.holds:
                    return GuardResult(value=False, holds=False, missing_vars=result.missing_vars)
            return GuardResult(value=True, holds=True, missing_vars=())
        for child in self.children:  # "or"
            result = child.evaluate_guard(data)
            if result.holds:
                return GuardResult(value=True, holds=True, missing_vars=())
            missing.extend(v for v in result.missing_vars if v not in missing)
        return GuardResult(value=False, holds=False, missing_vars=tuple(missing))


def compile_guard(logic: Any) -> Guard:
    """Compile a condition's rule (raising LogicError with a path on any problem) into a Guard."""
    whole = compile_logic(logic)
    return _skeleton(logic, whole)


def _skeleton(logic: Any, compiled: CompiledRule) -> Guard:
    if isinstance(logic, dict) and len(logic) == 1:
        ((operator, args),) = logic.items()
        if operator in ("and", "or") and isinstance(args, list) and args:
            children = tuple(_skeleton(arg, compile_logic(arg)) for arg in args)
            return Guard(rule=compiled, operator=operator, children=children)
    return Guard(rule=compiled)


__all__ = ["Guard", "compile_guard"]
