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
from typing import Any

from llm_fsm.logic._rules import CompiledRule, check_rule, compile_checked
from llm_fsm.logic._spec import GuardResult


class Guard:
    """A compiled condition: an ``and``/``or`` skeleton over compiled leaf clauses.

    Each clause is compiled once. The whole rule (``rule``: what ``reads`` and
    plain ``evaluate`` stand for) is compiled only if asked for: guards are
    judged clause by clause, and compiling every ``and``/``or`` rule whole as
    well as clause by clause was a third of the cost of loading a definition.
    """

    __slots__ = ("logic", "operator", "children", "reads", "reads_without_default", "mentions_without_default", "_rule")

    def __init__(
        self,
        logic: Any,
        rule: CompiledRule | None = None,
        operator: str | None = None,
        children: tuple[Guard, ...] = (),
    ) -> None:
        self.logic = logic
        self.operator = operator
        self.children = children
        self._rule = rule
        self.reads: frozenset[str]
        self.reads_without_default: frozenset[str]
        """The dot paths the rule reads (of them, those read by a ``var`` without a default), as ``rule`` has them."""
        self.mentions_without_default: frozenset[str]
        """Every static var name read without a default, inside map/filter/reduce bodies too (for lint)."""
        if rule is not None:
            self.reads, self.reads_without_default = rule.reads, rule.reads_without_default
            self.mentions_without_default = rule.mentions_without_default
        else:  # and/or add no reads of their own
            self.reads = frozenset().union(*(child.reads for child in children))
            self.reads_without_default = frozenset().union(*(child.reads_without_default for child in children))
            self.mentions_without_default = frozenset().union(*(c.mentions_without_default for c in children))

    def __reduce__(self) -> tuple[Any, ...]:
        return (compile_guard, (self.logic,))

    def __repr__(self) -> str:
        return f"Guard({self.operator or 'clause'}, {self.logic!r:.80})"

    @property
    def rule(self) -> CompiledRule:
        """The whole rule, compiled (on first use for an and/or guard; the rule was checked already)."""
        if self._rule is None:
            self._rule = compile_checked(self.logic)
        return self._rule

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
    """Check a condition's rule (raising LogicError with a path on any problem) and compile it into a Guard."""
    check_rule(logic)
    return _skeleton(logic)


def _skeleton(logic: Any) -> Guard:
    if isinstance(logic, dict) and len(logic) == 1:
        ((operator, args),) = logic.items()
        if operator in ("and", "or") and isinstance(args, list) and args:
            return Guard(logic, operator=operator, children=tuple(_skeleton(arg) for arg in args))
    return Guard(logic, compile_checked(logic))


__all__ = ["Guard", "compile_guard"]
