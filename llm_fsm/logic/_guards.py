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

from llm_fsm.logic._compiler import static_reads
from llm_fsm.logic._rules import CompiledRule, check_rule, compile_checked
from llm_fsm.logic._spec import GuardResult


class Guard:
    """A checked condition: an ``and``/``or`` skeleton over leaf clauses, each compiled when first judged.

    Loading a definition checks every rule (unknown operators, arities, limits fail there, with their path)
    but compiles none: compiling was most of the cost of loading a large definition, and a conversation
    judges only the conditions of the states it visits. What a rule reads is found without compiling it
    (``static_reads``, held to the compiler's answer by a property test). The whole rule (``rule``: what
    plain ``evaluate`` runs) is compiled only if asked for: guards are judged clause by clause.
    """

    __slots__ = ("logic", "operator", "children", "_rule", "_reads")

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
        self._reads: tuple[frozenset[str], frozenset[str], frozenset[str]] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (compile_guard, (self.logic,))

    def __repr__(self) -> str:
        return f"Guard({self.operator or 'clause'}, {self.logic!r:.80})"

    @property
    def rule(self) -> CompiledRule:
        """The whole rule, compiled (on first use; the rule was checked already)."""
        if self._rule is None:
            self._rule = compile_checked(self.logic)
        return self._rule

    def _static(self) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
        if self._reads is None:
            if self._rule is not None:
                rule = self._rule
                self._reads = (rule.reads, rule.reads_without_default, rule.mentions_without_default)
            else:
                self._reads = static_reads(self.logic)
        return self._reads

    @property
    def reads(self) -> frozenset[str]:
        """The dot paths the rule reads from the context (static names only), as compiling it records them."""
        return self._static()[0]

    @property
    def reads_without_default(self) -> frozenset[str]:
        """Of ``reads``, those read by a ``var`` without a default."""
        return self._static()[1]

    @property
    def mentions_without_default(self) -> frozenset[str]:
        """Every static var name read without a default, inside map/filter/reduce bodies too (for lint)."""
        return self._static()[2]

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
    """Check a condition's rule (raising LogicError with a path on any problem) and make it a Guard."""
    check_rule(logic)
    return _skeleton(logic)


def _skeleton(logic: Any) -> Guard:
    if isinstance(logic, dict) and len(logic) == 1:
        ((operator, args),) = logic.items()
        if operator in ("and", "or") and isinstance(args, list) and args:
            return Guard(logic, operator=operator, children=tuple(_skeleton(arg) for arg in args))
    return Guard(logic)


__all__ = ["Guard", "compile_guard"]
