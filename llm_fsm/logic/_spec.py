"""The dialect we evaluate: operators and their arities, the limits every rule is held to, and the result types."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

DEFAULT_MAX_DEPTH = 64

DEFAULT_MAX_NODES = 10_000

DEFAULT_BUDGET = 100_000

#: compile is recursive (bounded by max_depth); this keeps it far from the interpreter's limit
HARD_MAX_DEPTH = 200

#: (minimum, maximum or None) number of arguments per operator
_ARITY: dict[str, tuple[int, int | None]] = {
    "==": (2, 2),
    "===": (2, 2),
    "!=": (2, 2),
    "!==": (2, 2),
    ">": (2, 2),
    ">=": (2, 2),
    "<": (2, 3),
    "<=": (2, 3),
    "!": (1, 1),
    "!!": (1, 1),
    "and": (1, None),
    "or": (1, None),
    "if": (0, None),
    "?:": (0, None),
    "var": (0, 2),
    "missing": (0, None),
    "missing_some": (2, 2),
    "in": (2, 2),
    "contains": (2, 2),
    "+": (0, None),
    "-": (1, 2),
    "*": (1, None),
    "/": (2, 2),
    "%": (2, 2),
    "min": (1, None),
    "max": (1, None),
    "cat": (0, None),
    "substr": (2, 3),
    "merge": (0, None),
    "map": (2, 2),
    "filter": (2, 2),
    "reduce": (2, 3),
    "all": (2, 2),
    "some": (2, 2),
    "none": (2, 2),
}

SUPPORTED_OPERATORS: frozenset[str] = frozenset(_ARITY)

_ITERATORS = frozenset({"map", "filter", "reduce", "all", "some", "none"})

# --------------------------------------------------------------------------- results


class GuardResult(NamedTuple):
    """What a guard evaluated to, and why it holds or not.

    ``missing_vars`` lists the top-level variables the evaluation read without
    a default and found absent or null; any of them makes ``holds`` false.
    (A named tuple because guards are evaluated on every turn; it is cheap to build.)
    """

    value: Any
    holds: bool
    missing_vars: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LogicIssue:
    """One problem found in a rule by :func:`check_logic` (for fsm-lint)."""

    code: str
    path: str
    message: str
    hint: str = ""
