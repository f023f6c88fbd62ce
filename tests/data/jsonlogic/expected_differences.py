"""Compat-suite cases where llm_fsm.logic deliberately differs, and why (see docs/jsonlogic.md).

Every id here is a strict expected failure in tests/test_logic_conformance.py: if one
starts passing, the test fails and this table must be updated.
"""

from __future__ import annotations

ARITY = (
    "arity: we reject at compile time an argument count that the reference silently ignores "
    "(extra operands of -, /, %, ==, >, ...; no operand of and/or/!/!!/*) and that the "
    "community suite gives a new meaning"
)
ARITY_IDS = (
    "arithmetic/multiply.json#14",
    "arithmetic/minus.json#2",
    "arithmetic/minus.json#3",
    "arithmetic/minus.json#4",
    "arithmetic/minus.json#5",
    "arithmetic/minus.json#6",
    "arithmetic/divide.json#2",
    "arithmetic/divide.json#3",
    "arithmetic/divide.json#5",
    "arithmetic/divide.json#7",
    "arithmetic/divide.json#9",
    "arithmetic/divide.json#11",
    "arithmetic/divide.json#13",
    "arithmetic/divide.json#14",
    "arithmetic/divide.json#15",
    "arithmetic/divide.json#16",
    "arithmetic/divide.json#18",
    "arithmetic/divide.json#19",
    "arithmetic/divide.json#21",
    "arithmetic/modulo.json#4",
    "arithmetic/modulo.json#5",
    "arithmetic/modulo.json#9",
    "comparison/greaterThan.json#0",
    "comparison/greaterThan.json#1",
    "comparison/greaterThanEquals.json#0",
    "comparison/greaterThanEquals.json#1",
    "comparison/softEquals.json#0",
    "comparison/softEquals.json#1",
    "comparison/softNotEquals.json#0",
    "comparison/strictEquals.json#0",
    "comparison/strictEquals.json#1",
    "comparison/strictNotEquals.json#0",
    "control/and.json#20",
    "control/or.json#4",
    "control/not.json#15",
    "control/doublebang.json#13",
)

VALUE_NOT_ERROR = (
    "value, not error: the community suite raises on NaN or invalid arguments; the reference "
    "(and we) return a value (NaN, false, [] ...)"
)
VALUE_NOT_ERROR_IDS = (
    "arithmetic/plus.json#24",
    "arithmetic/plus.json#25",
    "arithmetic/plus.json#28",
    "arithmetic/plus.json#29",
    "arithmetic/plus.json#30",
    "arithmetic/plus.json#31",
    "arithmetic/multiply.json#25",
    "arithmetic/multiply.json#26",
    "arithmetic/multiply.json#27",
    "arithmetic/minus.json#20",
    "arithmetic/minus.json#21",
    "arithmetic/divide.json#26",
    "arithmetic/divide.json#27",
    "arithmetic/divide.json#28",
    "arithmetic/divide.json#29",
    "arithmetic/modulo.json#27",
    "arithmetic/modulo.json#28",
    "comparison/greaterThan.json#16",
    "comparison/greaterThan.json#24",
    "comparison/greaterThan.json#31",
    "comparison/greaterThan.json#32",
    "comparison/greaterThan.json#33",
    "comparison/greaterThan.json#34",
    "comparison/greaterThanEquals.json#16",
    "comparison/greaterThanEquals.json#17",
    "comparison/greaterThanEquals.json#24",
    "comparison/greaterThanEquals.json#25",
    "comparison/greaterThanEquals.json#26",
    "comparison/greaterThanEquals.json#27",
    "comparison/lessThan.json#16",
    "comparison/lessThan.json#34",
    "comparison/lessThan.json#41",
    "comparison/lessThan.json#42",
    "comparison/lessThan.json#43",
    "comparison/lessThan.json#44",
    "comparison/lessThanEquals.json#1",
    "comparison/lessThanEquals.json#9",
    "comparison/lessThanEquals.json#16",
    "comparison/lessThanEquals.json#17",
    "comparison/lessThanEquals.json#18",
    "comparison/lessThanEquals.json#19",
    "comparison/softEquals.json#16",
    "comparison/softEquals.json#24",
    "comparison/softEquals.json#31",
    "comparison/softEquals.json#32",
    "comparison/softEquals.json#33",
    "comparison/softEquals.json#34",
    "comparison/softNotEquals.json#15",
    "comparison/softNotEquals.json#23",
    "comparison/softNotEquals.json#30",
    "comparison/softNotEquals.json#31",
    "comparison/softNotEquals.json#32",
    "comparison/softNotEquals.json#33",
    "array/map.json#6",
    "array/map.json#7",
    "array/filter.json#6",
    "array/filter.json#7",
    "array/all.json#5",
    "array/all.json#6",
    "array/some.json#5",
    "array/some.json#6",
    "array/none.json#5",
    "array/none.json#6",
)

NON_ARRAY_ARGUMENT = (
    "non-array argument: the reference treats a non-array argument as one argument; the "
    "community suite rejects it for and/or/if and spreads an operator's array result into "
    "arguments"
)
NON_ARRAY_ARGUMENT_IDS = (
    "control/and.json#21",
    "control/if.json#39",
    "control/or.json#17",
    "chained.json#3",
    "iterators.extra.json#17",
    "iterators.extra.json#18",
    "iterators.extra.json#19",
)

PARSEFLOAT = (
    "parseFloat: the reference adds and multiplies through parseFloat, so true, false, null and "
    "the empty string give NaN; the community suite uses Number() (true is 1)"
)
PARSEFLOAT_IDS = (
    "arithmetic/plus.json#5",
    "arithmetic/plus.json#6",
    "arithmetic/plus.json#19",
    "arithmetic/plus.json#20",
    "arithmetic/plus.json#21",
    "arithmetic/plus.json#22",
    "arithmetic/multiply.json#5",
    "arithmetic/multiply.json#6",
    "arithmetic/multiply.json#8",
    "arithmetic/multiply.json#20",
    "arithmetic/multiply.json#21",
    "arithmetic/multiply.json#22",
    "arithmetic/multiply.json#23",
    "array/reduce.json#6",
)

NULL_EQUALS_ZERO = "null == 0: false in JavaScript and in the reference; the community suite says true"
NULL_EQUALS_ZERO_IDS = (
    "comparison/softEquals.json#27",
    "comparison/softNotEquals.json#26",
)

EXPECTED_DIFFERENCES: dict[str, str] = {
    **{case_id: ARITY for case_id in ARITY_IDS},
    **{case_id: VALUE_NOT_ERROR for case_id in VALUE_NOT_ERROR_IDS},
    **{case_id: NON_ARRAY_ARGUMENT for case_id in NON_ARRAY_ARGUMENT_IDS},
    **{case_id: PARSEFLOAT for case_id in PARSEFLOAT_IDS},
    **{case_id: NULL_EQUALS_ZERO for case_id in NULL_EQUALS_ZERO_IDS},
}
