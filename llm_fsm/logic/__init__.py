"""JsonLogic, compiled: the dialect's operators and limits, JavaScript's coercions, static checks, the compiler,
compiled
rules and guards.

Our own evaluator, differential-tested against json-logic-qubit; bounded in depth, size and work.
"""

from __future__ import annotations

from llm_fsm.logic._checks import check_logic
from llm_fsm.logic._coercions import truthy
from llm_fsm.logic._guards import Guard, compile_guard
from llm_fsm.logic._rules import CompiledRule, compile_logic, evaluate_logic
from llm_fsm.logic._spec import (
    DEFAULT_BUDGET,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_NODES,
    SUPPORTED_OPERATORS,
    GuardResult,
    LogicIssue,
)

__all__ = [
    "CompiledRule",
    "DEFAULT_BUDGET",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_NODES",
    "Guard",
    "GuardResult",
    "LogicIssue",
    "SUPPORTED_OPERATORS",
    "check_logic",
    "compile_guard",
    "compile_logic",
    "evaluate_logic",
    "truthy",
]
