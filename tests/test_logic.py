"""Behaviour of llm_fsm.logic: compile-time checks, semantics, guards, safety limits."""

from __future__ import annotations

import copy
import math
import pickle

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from llm_fsm.errors import FSMError, LogicBudgetError, LogicError
from llm_fsm.logic import _coercions, _rules
from llm_fsm.logic._checks import check_logic
from llm_fsm.logic._coercions import truthy
from llm_fsm.logic._rules import CompiledRule, compile_logic, evaluate_logic
from llm_fsm.logic._spec import SUPPORTED_OPERATORS, GuardResult, LogicIssue


def ev(rule, data=None):
    return compile_logic(rule).evaluate(data)


def nested(op: str, depth: int, leaf=True):
    """``{"!": [{"!": [... leaf ...]}]}`` with ``depth`` operators, built without recursion."""
    rule = leaf
    for _ in range(depth):
        rule = {op: [rule]}
    return rule


# --------------------------------------------------------------------------- compile-time checks


def test_unknown_operator_is_rejected_at_compile_time_with_its_path():
    with pytest.raises(LogicError) as info:
        compile_logic({"and": [True, {"frobnicate": [1]}]})
    assert info.value.path == "$.and[1].frobnicate"
    assert "unknown operator 'frobnicate'" in str(info.value)


def test_path_quotes_operator_keys_that_are_not_identifiers():
    with pytest.raises(LogicError) as info:
        compile_logic({"and": [True, {"==": [1, 2, 3]}]})
    assert info.value.path == "$.and[1]['==']"


def test_misspelt_operator_gets_a_suggestion():
    with pytest.raises(LogicError, match="did you mean 'missing'"):
        compile_logic({"mising": ["a"]})


@pytest.mark.parametrize("op", ["method", "log", "val", "??", "exists", "throw", "try", "preserve"])
def test_operators_we_do_not_implement_are_rejected(op):
    with pytest.raises(LogicError, match="unknown operator"):
        compile_logic({op: ["x", "upper"]})


def test_method_cannot_reach_python_objects():
    with pytest.raises(LogicError):
        compile_logic({"method": [{"var": "name"}, "upper"]})


@pytest.mark.parametrize(
    "rule",
    [
        {"==": [1]},
        {"==": [1, 2, 3]},
        {">": [1, 2, 3]},
        {"<": [1]},
        {"<": [1, 2, 3, 4]},
        {"!": []},
        {"and": []},
        {"or": []},
        {"var": ["a", 1, 2]},
        {"missing_some": [1]},
        {"in": ["a"]},
        {"-": []},
        {"-": [1, 2, 3]},
        {"/": [1]},
        {"%": [1, 2, 3]},
        {"*": []},
        {"min": []},
        {"substr": ["abc"]},
        {"map": [[1]]},
        {"reduce": [[1], 1, 2, 3]},
        {"contains": ["abc"]},
    ],
    ids=lambda r: next(iter(r)) + str(len(r[next(iter(r))])),
)
def test_wrong_arity_is_rejected_at_compile_time(rule):
    with pytest.raises(LogicError) as info:
        compile_logic(rule)
    assert "takes" in info.value.message


@pytest.mark.parametrize(
    ("rule", "what"),
    [
        ({"==": [{1, 2}, 1]}, "set"),
        ({"==": [math.nan, 1]}, "nan"),
        ({"==": [math.inf, 1]}, "inf"),
        ({"==": [object(), 1]}, "object"),
        ({"==": [b"bytes", 1]}, "bytes"),
        ({"if": [{1: "a", 2: "b"}, 1, 2]}, "not a string"),
    ],
)
def test_values_that_are_not_json_are_rejected(rule, what):
    with pytest.raises(LogicError, match="JSON"):
        compile_logic(rule)


def test_rule_at_the_depth_limit_compiles():
    assert compile_logic(nested("!", 64), max_depth=64).evaluate() is True


def test_rule_deeper_than_the_limit_is_rejected():
    with pytest.raises(LogicError, match="nested deeper than 64"):
        compile_logic(nested("!", 65))


@pytest.mark.parametrize("shape", ["operators", "arrays"])
def test_a_100000_deep_rule_is_rejected_without_hitting_the_recursion_limit(shape):
    rule: object = True
    for _ in range(100_000):
        rule = {"!": [rule]} if shape == "operators" else [rule]
    with pytest.raises(LogicError, match="nested deeper"):
        compile_logic(rule)
    with pytest.raises(LogicError, match="nested deeper"):
        evaluate_logic(rule)
    assert [i.code for i in check_logic(rule)] == ["too-deep"]


def test_rule_with_more_nodes_than_the_limit_is_rejected():
    with pytest.raises(LogicError, match="more than 100 nodes"):
        compile_logic({"in": [1, list(range(200))]}, max_nodes=100)


def test_max_depth_cannot_be_raised_beyond_what_compiling_can_recurse():
    with pytest.raises(LogicError, match="max_depth"):
        compile_logic(True, max_depth=100_000)


def test_errors_are_part_of_the_library_hierarchy():
    with pytest.raises(FSMError):
        compile_logic({"nope": 1})
    with pytest.raises(ValueError):  # the seed documents ValueError for bad rules
        compile_logic({"nope": 1})


def test_check_logic_reports_every_problem_with_paths_and_hints():
    issues = check_logic({"and": [{"frob": [1]}, {"==": [1]}, {"or": [{"nope": 2}]}]})
    assert [(i.code, i.path) for i in issues] == [
        ("unknown-operator", "$.and[0].frob"),
        ("arity", "$.and[1]['==']"),
        ("unknown-operator", "$.and[2].or[0].nope"),
    ]
    assert all(isinstance(i, LogicIssue) and i.message and i.hint for i in issues)


def test_check_logic_of_a_valid_rule_is_empty():
    assert check_logic({"and": [{"<": [{"var": "age"}, 18]}, {"in": ["x", {"var": "s"}]}]}) == []


@given(
    st.recursive(
        st.none() | st.booleans() | st.text(max_size=3) | st.integers(),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=2),
        max_leaves=20,
    )
)
@settings(max_examples=200)
def test_check_logic_never_raises_and_agrees_with_compile(rule):
    issues = check_logic(rule)
    try:
        compile_logic(rule)
    except LogicError:
        assert issues
    else:
        assert issues == []


def test_check_logic_never_raises_on_garbage():
    assert check_logic(object())[0].code == "not-json"
    assert check_logic({"var": {1, 2}})[0].code == "not-json"


def test_objects_with_several_keys_are_literals_like_in_the_reference():
    assert ev({"a": {"var": "x"}, "b": 1}) == {"a": {"var": "x"}, "b": 1}


# --------------------------------------------------------------------------- semantics


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, False),
        (0.0, False),
        (math.nan, False),
        ("", False),
        (None, False),
        (False, False),
        ([], False),
        (1, True),
        (-1, True),
        ("0", True),
        (" ", True),
        ({}, True),
        ([0], True),
        (True, True),
        ((), False),
    ],
)
def test_truthiness_is_javascript_with_empty_arrays_false(value, expected):
    assert truthy(value) is expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (1, "1", True),
        (0, False, True),
        ("", 0, True),
        ("0", False, True),
        (None, None, True),
        (None, 0, False),
        (None, False, False),
        ([1], 1, True),
        ([1, 2], "1,2", True),
        ([], 0, True),
        ({}, "[object Object]", True),
        ("abc", 0, False),
        (1.0, 1, True),
        (True, "1", True),
        (" 12 ", 12, True),
        ("0x10", 16, True),
        ("1e3", 1000, True),
        ("Infinity", math.inf, True),
        ("inf", math.inf, False),
        ("1_000", 1000, False),
    ],
)
def test_loose_equality_coerces_like_javascript(a, b, expected):
    data = {"a": a, "b": b}
    assert ev({"==": [{"var": "a"}, {"var": "b"}]}, data) is expected
    assert ev({"!=": [{"var": "a"}, {"var": "b"}]}, data) is (not expected)


def test_arrays_compare_by_identity_like_javascript():
    assert ev({"==": [[1], [1]]}) is False
    assert ev({"==": [{"var": "x"}, {"var": "x"}]}, {"x": [1]}) is True


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(1, 1.0, True), (1, "1", False), (True, 1, False), (None, None, True), ("a", "a", True), (0, False, False)],
)
def test_strict_equality_needs_the_same_type(a, b, expected):
    assert ev({"===": [a, b]}) is expected
    assert ev({"!==": [a, b]}) is (not expected)


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({">": ["10", 9]}, True),
        ({"<": ["10", "9"]}, True),  # two strings compare as strings
        ({"<": [None, 1]}, True),  # null is 0
        ({"<": ["abc", 1]}, False),  # NaN compares false
        ({">=": ["abc", 1]}, False),
        ({"<=": [1, "1"]}, True),
        ({"<": [1, 2, 3]}, True),
        ({"<": [1, 3, 3]}, False),
        ({"<=": [1, 3, 3]}, True),
        ({"<": [[2], 3]}, True),  # [2] is "2" is 2
        ({">": [True, 0]}, True),
    ],
)
def test_comparisons_coerce_like_javascript(rule, expected):
    assert ev(rule) is expected


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({"+": ["3.5abc", 1]}, 4.5),  # parseFloat takes the numeric prefix
        ({"+": [" 2", "3"]}, 5),
        ({"+": []}, 0),
        ({"*": ["2", "3"]}, 6),
        ({"-": ["5", 2]}, 3),
        ({"-": [""]}, 0),
        ({"-": [True, 1]}, 0),
        ({"/": [1, 4]}, 0.25),
        ({"/": [1, 0]}, math.inf),
        ({"/": [-1, 0]}, -math.inf),
        ({"%": [-7, 3]}, -1),  # sign of the dividend, like JavaScript
        ({"%": [7.5, 2]}, 1.5),
        ({"max": ["3", 2]}, 3),
        ({"min": [1, "0.5"]}, 0.5),
    ],
)
def test_arithmetic_follows_the_reference(rule, expected):
    assert ev(rule) == expected


@pytest.mark.parametrize(
    "rule", [{"+": [True, 1]}, {"+": [None, 1]}, {"*": ["x", 2]}, {"%": [1, 0]}, {"/": [0, 0]}, {"max": ["x", 1]}]
)
def test_arithmetic_without_numbers_is_nan_like_the_reference(rule):
    assert math.isnan(ev(rule))


def test_integral_results_are_ints():
    assert type(ev({"/": [4, 2]})) is int
    assert type(ev({"+": ["1.5", 1.5]})) is int
    assert type(ev({"*": [0.5, 3]})) is float


def test_huge_products_become_floats_instead_of_growing_without_bound():
    rule = {"reduce": [{"var": "xs"}, {"*": [{"var": "accumulator"}, {"var": "accumulator"}]}, 10]}
    result = ev(rule, {"xs": list(range(20))})
    assert result == math.inf


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1.5e-7, "1.5e-7"),
        (0.000001, "0.000001"),
        (-0.0, "0"),
        (True, "true"),
        (None, ""),
        ([1, [2, None]], "1,2,"),
        ({"a": 1}, "[object Object]"),
        (123456789012345680000, "123456789012345680000"),
        (2**70, "1.1805916207174113e+21"),
    ],
)
def test_cat_formats_values_like_javascript(value, text):
    assert ev({"cat": [{"var": "v"}]}, {"v": value}) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_number_formatting_round_trips(x):
    assert float(_coercions._num_to_str(x)) == x


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["jsonlogic", 4], "logic"),
        (["jsonlogic", -5, 3], "log"),
        (["jsonlogic", 1, -5], "son"),
        ([12345, 1, 2], "23"),
        (["abc", 10], ""),
        (["abc", -10, 1], "a"),
    ],
)
def test_substr_follows_the_reference(args, expected):
    assert ev({"substr": args}) == expected


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({"in": ["bill", "my bill"]}, True),
        ({"in": [1, "a1"]}, True),  # the needle becomes a string
        ({"in": ["", ""]}, False),  # like the reference: an empty haystack holds nothing
        ({"in": [1, ["1"]]}, False),  # arrays use ===
        ({"in": [True, [1]]}, False),
        ({"in": ["a", {"var": "obj"}]}, False),  # objects have no indexOf
        ({"in": ["a", None]}, False),
    ],
)
def test_in_is_substring_or_strict_array_membership(rule, expected):
    assert ev(rule, {"obj": {"a": 1}}) is expected


@pytest.mark.parametrize(
    ("collection", "value", "expected"),
    [
        ("my bill", "bill", True),
        ("my bill", "refund", False),
        (["a", "b"], "b", True),
        ([1, 2], "1", False),
        ({"vip": True}, "vip", True),
        ({"vip": True}, "gold", False),
        ({"1": 0}, 1, True),
        (None, "x", False),
        (42, 4, False),
        ({"a": 1}, ["a"], False),
    ],
)
def test_contains_checks_substring_element_or_key(collection, value, expected):
    assert ev({"contains": [{"var": "c"}, {"var": "v"}]}, {"c": collection, "v": value}) is expected


json_scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab1", max_size=3)


@given(json_scalars | st.lists(json_scalars, max_size=3), json_scalars)
def test_contains_is_in_with_the_arguments_swapped_for_strings_and_arrays(collection, value):
    data = {"c": collection, "v": value}
    assert ev({"contains": [{"var": "c"}, {"var": "v"}]}, data) is ev({"in": [{"var": "v"}, {"var": "c"}]}, data)


def test_merge_flattens_one_level():
    assert ev({"merge": [1, [2, [3]], [], "x"]}) == [1, 2, [3], "x"]


def test_var_reads_dot_paths_and_indexes():
    data = {"a": {"b": [10, {"c": "deep"}]}, "s": "hey"}
    assert ev({"var": "a.b.1.c"}, data) == "deep"
    assert ev({"var": "a.b.0"}, data) == 10
    assert ev({"var": "s.1"}, data) == "e"
    assert ev({"var": 1}, ["x", "y"]) == "y"
    assert ev({"var": "a.b.01"}, data) is None  # not a canonical index, like JavaScript
    assert ev({"var": "a.b.-1"}, data) is None


def test_var_default_applies_only_to_absent_values():
    assert ev({"var": ["a.b", 7]}, {"a": None}) == 7  # null in the middle: not found
    assert ev({"var": ["a", 7]}, {"a": None}) is None  # null at the end is a value
    assert ev({"var": ["x", [1]]}, {}) == [1]


def test_var_without_name_returns_the_whole_data():
    assert ev({"var": ""}, 5) == 5
    assert ev({"var": []}, [1]) == [1]
    assert ev({"var": None}, {"a": 1}) == {"a": 1}


def test_dynamic_var_names_are_evaluated():
    rule = {"var": {"cat": ["pie.", {"var": "which"}]}}
    assert ev(rule, {"which": "eta", "pie": {"eta": "60s"}}) == "60s"


class Secret:
    token = "s3cr3t"

    def upper(self):
        raise AssertionError("a method was called")


@pytest.mark.parametrize(
    "path", ["__class__", "s.__class__", "s.upper", "obj.token", "obj.__dict__", "items.length", "s.length", "d.keys"]
)
def test_var_never_reaches_python_attributes(path):
    data = {"s": "text", "obj": Secret(), "items": [1, 2], "d": {"a": 1}}
    assert ev({"var": path}, data) is None


def test_missing_lists_absent_null_and_empty_keys():
    assert ev({"missing": ["a", "b", "c", "d.e"]}, {"a": 1, "b": None, "c": "", "d": {"e": 0}}) == ["b", "c"]
    assert ev({"missing": [["x", "a"]]}, {"a": 1}) == ["x"]


def test_missing_some_is_empty_when_enough_are_present():
    assert ev({"missing_some": [1, ["a", "b"]]}, {"b": 1}) == []
    assert ev({"missing_some": [2, ["a", "b", "c"]]}, {"b": 1}) == ["a", "c"]


def test_iterators_read_each_item_and_the_reduce_scope():
    data = {"xs": [1, 2, 3, 4]}
    assert ev({"map": [{"var": "xs"}, {"*": [{"var": ""}, 10]}]}, data) == [10, 20, 30, 40]
    assert ev({"filter": [{"var": "xs"}, {"%": [{"var": ""}, 2]}]}, data) == [1, 3]
    assert ev({"reduce": [{"var": "xs"}, {"+": [{"var": "current"}, {"var": "accumulator"}]}, 0]}, data) == 10
    assert ev({"all": [{"var": "xs"}, {">": [{"var": ""}, 0]}]}, data) is True
    assert ev({"some": [{"var": "xs"}, {">": [{"var": ""}, 3]}]}, data) is True
    assert ev({"none": [{"var": "xs"}, {">": [{"var": ""}, 4]}]}, data) is True
    assert ev({"all": [[], True]}) is False
    assert ev({"none": [None, True]}) is True


def test_if_chains_and_and_or_return_operands():
    assert ev({"if": [False, 1, None, 2, 3]}) == 3
    assert ev({"and": [1, "x", []]}) == []
    assert ev({"or": [0, "", "found"]}) == "found"


def test_results_are_fresh_values_that_callers_may_mutate():
    rule = compile_logic({"if": [True, [1, 2], 0]})
    rule.evaluate().append(3)
    assert rule.evaluate() == [1, 2]
    literal = compile_logic({"a": [1], "b": 2})
    literal.evaluate()["a"].append(9)
    assert literal.evaluate() == {"a": [1], "b": 2}
    default = compile_logic({"var": ["x", [1]]})
    default.evaluate({}).append(2)
    assert default.evaluate({}) == [1]


def test_reads_lists_static_top_level_paths():
    rule = compile_logic(
        {
            "and": [
                {"==": [{"var": "customer.tier"}, "premium"]},
                {">": [{"var": ["spend", 0]}, 10]},
                {"var": {"cat": ["dyn", "amic"]}},
                {"all": [{"var": "items"}, {">": [{"var": "qty"}, 0]}]},
                {"missing": ["email"]},
                {"var": ""},
            ]
        }
    )
    assert rule.reads == {"customer.tier", "spend", "items", "email"}
    assert rule.reads_without_default == {"customer.tier", "items"}


def test_a_huge_numeric_looking_string_is_coerced_in_linear_time():
    digits = "1" * 200_000
    assert ev({"==": [{"var": "s"}, 5]}, {"s": digits + "x"}) is False
    assert ev({"+": [{"var": "s"}, 0]}, {"s": digits + "x"}) == math.inf


def test_compiled_rules_survive_pickle_and_deepcopy():
    rule = compile_logic({"<": [{"var": "age"}, 18]}, budget=7)
    for clone in (pickle.loads(pickle.dumps(rule)), copy.deepcopy(rule)):
        assert clone.evaluate_guard({}) == rule.evaluate_guard({})
        assert clone.budget == 7 and clone.reads == rule.reads


def test_compiled_rule_keeps_the_original_rule():
    rule = {"var": "a"}
    compiled = compile_logic(rule)
    assert isinstance(compiled, CompiledRule)
    assert compiled.rule is rule


# --------------------------------------------------------------------------- guards


def test_a_guard_compiles_a_clause_when_first_judged_and_the_whole_rule_only_when_asked(monkeypatch) -> None:
    from llm_fsm.logic import _guards
    from llm_fsm.logic._compiler import _Compiler

    compilers = []
    original = _Compiler.__init__

    def counting(self: _Compiler) -> None:
        compilers.append(self)
        original(self)

    monkeypatch.setattr(_Compiler, "__init__", counting)
    rule = {"and": [{">=": [{"var": "a"}, 1]}, {"or": [{"var": "b"}, {"!": [{"var": ["c", 0]}]}]}]}
    guard = _guards.compile_guard(rule)
    assert guard.reads == {"a", "b", "c"} and guard.reads_without_default == {"a", "b"}
    assert compilers == []  # checked and read, not compiled
    assert guard.evaluate_guard({"a": 0}) == GuardResult(False, False, ())
    assert len(compilers) == 1  # the first clause failed: the or was never judged
    assert guard.evaluate_guard({"a": 2, "b": 1}) == GuardResult(True, True, ())
    assert guard.evaluate_guard({"a": 2, "c": 1}) == GuardResult(False, False, ("b",))
    assert len(compilers) == 3  # each clause once
    assert guard.evaluate({"a": 2, "c": 0}) is True  # reference semantics: the whole rule, compiled now
    assert guard.evaluate({"a": 2, "c": 0}) is True
    assert len(compilers) == 4
    assert guard.reads == compile_logic(rule).reads
    clone = pickle.loads(pickle.dumps(guard))
    assert clone.evaluate_guard({"a": 2, "c": 1}) == guard.evaluate_guard({"a": 2, "c": 1})


def test_a_guard_reports_the_first_problem_of_the_whole_rule_with_its_path() -> None:
    from llm_fsm.logic._guards import compile_guard

    with pytest.raises(LogicError) as info:
        compile_guard({"and": [{"var": "a"}, {"or": [{"nope": [1]}]}]})
    assert info.value.path == "$.and[1].or[0].nope"


def test_reference_semantics_make_a_missing_age_look_under_18():
    assert compile_logic({"<": [{"var": "age"}, 18]}).evaluate({}) is True


@pytest.mark.parametrize("data", [{}, {"age": None}, None, {"other": 1}])
def test_guard_with_a_missing_var_does_not_hold(data):
    result = compile_logic({"<": [{"var": "age"}, 18]}).evaluate_guard(data)
    assert result == GuardResult(value=True, holds=False, missing_vars=("age",))


def test_guard_holds_when_its_vars_are_present_and_the_value_is_truthy():
    rule = compile_logic({"<": [{"var": "age"}, 18]})
    assert rule.evaluate_guard({"age": 12}) == GuardResult(True, True, ())
    assert rule.evaluate_guard({"age": 40}) == GuardResult(False, False, ())


def test_guard_with_a_default_uses_the_default():
    rule = compile_logic({"<": [{"var": ["age", 99]}, 18]})
    assert rule.evaluate_guard({}).holds is False
    assert compile_logic({"==": [{"var": ["tier", "basic"]}, "basic"]}).evaluate_guard({}).holds is True


def test_guard_reading_a_missing_nested_path_does_not_hold():
    result = compile_logic({"!": [{"var": "customer.blocked"}]}).evaluate_guard({"customer": {}})
    assert result.value is True and result.holds is False
    assert result.missing_vars == ("customer.blocked",)


def test_guard_ignores_vars_in_branches_that_were_not_evaluated():
    rule = compile_logic({"if": [{"missing": ["age"]}, False, {"<": [{"var": "age"}, 18]}]})
    assert rule.evaluate_guard({}) == GuardResult(False, False, ())
    assert rule.evaluate_guard({"age": 3}) == GuardResult(True, True, ())


def test_guard_ignores_reads_inside_iteration_bodies():
    rule = compile_logic({"some": [{"var": "items"}, {"==": [{"var": "flag"}, None]}]})
    assert rule.evaluate_guard({"items": [{"x": 1}]}) == GuardResult(True, True, ())


def test_guard_ignores_missing_and_missing_some_lookups():
    assert compile_logic({"!": [{"missing": ["a"]}]}).evaluate_guard({"a": 1}).holds is True
    assert compile_logic({"missing_some": [1, ["a", "b"]]}).evaluate_guard({}).missing_vars == ()


def test_guard_counts_a_missing_dynamic_var():
    result = compile_logic({"!": [{"var": {"cat": ["x", "y"]}}]}).evaluate_guard({})
    assert result.holds is False and result.missing_vars == ("xy",)


def test_guard_lists_each_missing_var_once_in_reading_order():
    rule = compile_logic({"or": [{"var": "b"}, {"var": "a"}, {"var": "b"}, True]})
    assert rule.evaluate_guard({}).missing_vars == ("b", "a")


def test_guard_with_null_value_counts_as_missing_even_if_the_rule_tests_for_null():
    assert compile_logic({"==": [{"var": "a"}, None]}).evaluate_guard({"a": None}).holds is False


# --------------------------------------------------------------------------- work budget


def test_map_over_a_huge_merged_range_exceeds_the_budget():
    big = {"merge": [{"var": "xs"}] * 200}
    rule = compile_logic({"map": [big, {"map": [big, {"+": [1, 2]}]}]})
    with pytest.raises(LogicBudgetError) as info:  # 200,000 x 200,000 steps if it did not stop
        rule.evaluate({"xs": list(range(1000))})
    assert "budget of 100000" in str(info.value)


def test_nested_iteration_is_charged_for_every_inner_step():
    xs = list(range(400))
    rule = compile_logic({"map": [{"var": "xs"}, {"map": [{"var": ""}, 1]}]})
    nested_data = {"xs": [xs] * 400}  # 160,000 inner iterations
    with pytest.raises(LogicBudgetError):
        rule.evaluate(nested_data)
    assert len(rule.evaluate(nested_data, budget=2_000_000)) == 400


def test_doubling_a_string_in_reduce_exceeds_the_budget():
    rule = compile_logic({"reduce": [{"var": "xs"}, {"cat": [{"var": "accumulator"}, {"var": "accumulator"}]}, "ab"]})
    with pytest.raises(LogicBudgetError):
        rule.evaluate({"xs": list(range(64))})


def test_cat_of_a_huge_string_many_times_exceeds_the_budget():
    rule = compile_logic({"cat": [{"var": "s"}] * 50})
    with pytest.raises(LogicBudgetError):
        rule.evaluate({"s": "x" * 10_000})


def test_normal_rules_stay_well_within_the_budget():
    rule = compile_logic({"filter": [{"var": "xs"}, {">": [{"var": ""}, 50]}]})
    assert len(rule.evaluate({"xs": list(range(100))}, budget=1000)) == 49


def test_budget_can_be_set_per_rule():
    rule = compile_logic({"map": [{"var": "xs"}, 1]}, budget=10)
    with pytest.raises(LogicBudgetError):
        rule.evaluate({"xs": list(range(6))})


def test_deeply_nested_data_raises_a_budget_error_not_recursion_error():
    deep: object = 1
    for _ in range(50_000):
        deep = [deep]
    with pytest.raises(LogicBudgetError):
        compile_logic({"cat": [{"var": "x"}]}).evaluate({"x": deep}, budget=10**9)


def test_budget_errors_are_logic_errors():
    assert issubclass(LogicBudgetError, LogicError)


# --------------------------------------------------------------------------- seed API


def test_evaluate_logic_compiles_each_distinct_rule_once(monkeypatch):
    calls = []
    real = _rules.compile_logic

    def counting(rule, **kwargs):
        calls.append(rule)
        return real(rule, **kwargs)

    monkeypatch.setattr(_rules, "compile_logic", counting)
    _rules._compiled.cache_clear()
    assert evaluate_logic({"+": [{"var": "a"}, 1]}, {"a": 1}) == 2
    assert evaluate_logic({"+": [{"var": "a"}, 1]}, {"a": 5}) == 6
    assert evaluate_logic({"==": [1, {"var": "a"}]}, {"a": 1}) is True
    assert len(calls) == 2


def test_evaluate_logic_rejects_bad_rules():
    with pytest.raises(LogicError):
        evaluate_logic({"nope": []})
    with pytest.raises(LogicError):
        evaluate_logic({"==": [{1, 2}, 1]})


def test_supported_operators_are_the_documented_set():
    assert {
        "==",
        "===",
        "!=",
        "!==",
        ">",
        ">=",
        "<",
        "<=",
        "!",
        "!!",
        "and",
        "or",
        "if",
        "?:",
        "var",
        "missing",
        "missing_some",
        "in",
        "contains",
        "+",
        "-",
        "*",
        "/",
        "%",
        "min",
        "max",
        "cat",
        "substr",
        "merge",
        "map",
        "filter",
        "reduce",
        "all",
        "some",
        "none",
    } == SUPPORTED_OPERATORS


# --------------------------------------------------------------------------- robustness

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4),
    max_leaves=12,
)


def rules(depth: int = 3):
    ops = sorted(SUPPORTED_OPERATORS)
    leaf = json_values | st.builds(lambda p: {"var": p}, st.sampled_from(["a", "b", "a.b", "0", "", "c.0"]))
    return st.recursive(
        leaf,
        lambda children: st.builds(
            lambda op, args: {op: args}, st.sampled_from(ops), st.lists(children, min_size=0, max_size=4)
        ),
        max_leaves=15,
    )


@given(rules(), json_values)
@settings(max_examples=400, deadline=None)
def test_any_rule_on_any_data_returns_a_value_or_raises_a_logic_error(rule, data):
    try:
        compiled = compile_logic(rule)
    except LogicError:
        return
    try:
        first = compiled.evaluate(data)
        guard = compiled.evaluate_guard(data)
    except LogicError:
        return
    assert isinstance(guard.holds, bool)
    second = compiled.evaluate(data)
    assert repr(first) == repr(second)  # deterministic (repr: NaN != NaN)


@given(
    st.one_of(
        st.recursive(
            st.none() | st.booleans() | st.text(max_size=3) | st.integers() | st.floats(),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=2),
            max_leaves=20,
        ),
        rules(),
        # an object of several keys is a literal: operators inside it are not checked, nor below in its arrays
        st.dictionaries(st.sampled_from(["a", "b", "nope"]), st.lists(rules(), max_size=2) | rules(), min_size=2),
        st.dictionaries(st.integers(), st.none(), min_size=1, max_size=2),
        st.builds(
            lambda op, a: {op: tuple(a)}, st.sampled_from(["and", "!", "var"]), st.lists(st.integers(), max_size=3)
        ),
    ),
    st.integers(1, 6),
    st.integers(1, 40),
)
@settings(max_examples=500)
@example(rule={"max": [{"merge": []}, {"": [None] * 4, "0": [None]}, {"var": "a"}, [None]]}, max_depth=3, max_nodes=14)
def test_the_quick_check_passes_exactly_the_rules_the_full_scan_passes(rule, max_depth, max_nodes):
    from llm_fsm.logic._checks import _passes, _scan

    assert _passes(rule, max_depth, max_nodes) == (not _scan(rule, max_depth, max_nodes, first_only=True))


@given(rules())
@settings(max_examples=600, deadline=None)
@example({"var": []})
@example({"map": [{"var": "items"}, {"var": "x"}]})
@example({"var": [["a", 1]]})
@example({"var": [{"cat": ["a", "b"]}]})
@example({"reduce": [{"var": "xs"}, {"var": "current"}, {"var": "start"}]})
@example({"var": [[], 1]})
@example({"missing": [0]})
@example({"missing": [["a", "", 1.5, True]]})
@example({"missing_some": [1, ["a", "b"]]})
@example({"filter": [{"var": "xs"}, {"missing": ["inside"]}]})
def test_what_a_rule_reads_is_found_without_compiling_it_exactly_as_compiling_finds_it(rule):
    from llm_fsm.logic._compiler import static_reads

    try:
        compiled = compile_logic(rule)
    except LogicError:
        return
    assert static_reads(rule) == (compiled.reads, compiled.reads_without_default, compiled.mentions_without_default)


def test_one_compiled_rule_can_be_evaluated_from_many_threads():
    from concurrent.futures import ThreadPoolExecutor

    rule = compile_logic({"if": [{"<": [{"var": "n"}, 50]}, {"var": "n"}, {"var": "missing"}]})

    def check(n: int) -> bool:
        result = rule.evaluate_guard({"n": n})
        return result.missing_vars == (() if n < 50 else ("missing",)) and (result.value == n) == (n < 50)

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert all(pool.map(check, list(range(100)) * 20))
