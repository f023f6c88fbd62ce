"""fsm-lint with declared context keys (FSM027-FSM032, and declaration problems): one behaviour per test, each
finding shown firing and its nearest miss shown not firing."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from llm_fsm.definition._documents import parse_text
from llm_fsm.lint._checks_keys import _MAX_TYPO_INDEX, _Typos
from llm_fsm.lint._linter import lint_data, lint_document
from llm_fsm.lint._rules import Diagnostic, Severity
from llm_fsm.lint._run import MAX_FINDINGS_PER_RULE

DECLARED: dict[str, Any] = {
    "origin": {"type": "string", "enum": ["Oslo", "London", "Paris", "New York"], "synonyms": {"NYC": "New York"}},
    "age": {"type": "integer", "minimum": 0, "maximum": 130},
    "vip": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string", "enum": ["vip", "new"]}},
    "customer": {"type": "object"},
    "price": {"type": "number", "writable_by": "application"},
}
COLLECTED = ["origin", "age", "vip", "tags", "customer"]


def fsm(
    *conditions: dict[str, Any],
    keys: dict[str, Any] | None = None,
    collect: list[str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A two-state definition declaring ``keys`` whose start state collects ``collect`` and moves on when
    ``conditions`` hold."""
    transition: dict[str, Any] = {"target_state": "end", "description": "on"}
    if conditions:
        transition["conditions"] = list(conditions)
    start = {
        "id": "start",
        "description": "s",
        "purpose": "p",
        "required_context_keys": COLLECTED if collect is None else collect,
        "transitions": [transition],
    }
    end = {"id": "end", "description": "e", "purpose": "p", "transitions": []}
    return {
        "name": "t",
        "description": "d",
        "initial_state": "start",
        "context_keys": copy.deepcopy(DECLARED if keys is None else keys),
        "states": {"start": start, "end": end},
        **extra,
    }


def when(logic: Any, requires: list[str] | None = None) -> dict[str, Any]:
    condition: dict[str, Any] = {"description": "c", "logic": logic}
    if requires is not None:
        condition["requires_context_keys"] = requires
    return condition


def found(data: Any, code: str) -> list[Diagnostic]:
    return [d for d in lint_data(data).diagnostics if d.code == code]


def var(key: str, *default: Any) -> dict[str, Any]:
    return {"var": [key, *default]} if default else {"var": key}


CONDITION = "$.states.start.transitions[0].conditions[0].logic"


# --- FSM027 condition-type-mismatch -------------------------------------------------------------------


def test_comparing_an_integer_key_with_a_string_is_a_type_mismatch_reported_at_the_literal() -> None:
    (finding,) = found(fsm(when({"==": [var("age"), "18"]})), "FSM027")
    assert finding.severity is Severity.WARNING
    assert finding.path == f"{CONDITION}['=='][1]"
    assert "'age', declared as integer, with the string \"18\"" in finding.message
    assert finding.hint is not None and "the number 18" in finding.hint


def test_comparing_a_boolean_key_with_a_string_suggests_true_or_false() -> None:
    (finding,) = found(fsm(when({"===": [var("vip"), "yes"]})), "FSM027")
    assert "never true" in finding.message
    assert finding.hint is not None and "true or false" in finding.hint


def test_a_literal_on_the_left_is_judged_like_one_on_the_right() -> None:
    (finding,) = found(fsm(when({"<": ["18", var("age")]})), "FSM027")
    assert finding.path == f"{CONDITION}['<'][0]"


def test_an_integer_key_compared_with_a_fraction_is_no_mismatch() -> None:
    assert found(fsm(when({"<": [var("age"), 17.5]})), "FSM027") == []


def test_in_on_a_number_key_is_never_true() -> None:
    (finding,) = found(fsm(when({"in": [1, var("age")]})), "FSM027")
    assert "substring of a string or an item of a list" in finding.message
    assert finding.path == f"{CONDITION}.in[1]"


def test_contains_on_an_object_key_tests_its_keys_and_is_not_a_mismatch() -> None:
    assert found(fsm(when({"contains": [var("customer"), "tier"]})), "FSM027") == []


def test_an_item_of_an_in_list_of_another_type_is_reported_at_the_item() -> None:
    (finding,) = found(fsm(when({"in": [var("origin"), ["Oslo", 3]]})), "FSM027")
    assert finding.path == f"{CONDITION}.in[1][1]"


def test_a_var_default_of_the_literal_type_is_no_mismatch() -> None:
    assert found(fsm(when({"==": [var("age", "unknown"), "unknown"]})), "FSM027") == []


def test_null_is_a_presence_test_not_a_mismatch() -> None:
    assert found(fsm(when({"!=": [var("age"), None]})), "FSM027") == []


def test_a_var_inside_an_iteration_body_reads_the_item_not_the_declared_key() -> None:
    rule = {"some": [var("tags"), {"==": [var("age"), "x"]}]}
    assert found(fsm(when(rule)), "FSM027") == []


def test_a_field_of_a_declared_object_is_not_judged() -> None:
    assert found(fsm(when({"==": [var("customer.tier"), 3]}), collect=[*COLLECTED, "customer.tier"]), "FSM027") == []


def test_a_comparison_inside_and_or_and_not_is_judged() -> None:
    rule = {"or": [{"!": {"==": [var("age"), "18"]}}, {"and": [True, {"==": [var("vip"), 1]}]}]}
    assert len(found(fsm(when(rule)), "FSM027")) == 2


def test_without_declarations_nothing_is_type_checked() -> None:
    assert found(fsm(when({"==": [var("age"), "18"]}), keys={}), "FSM027") == []


# --- FSM028 condition-value-not-in-enum --------------------------------------------------------------


def test_a_misspelt_enum_value_never_matches_and_the_hint_names_the_closest() -> None:
    (finding,) = found(fsm(when({"==": [var("origin"), "Olso"]})), "FSM028")
    assert finding.severity is Severity.ERROR
    assert finding.path == f"{CONDITION}['=='][1]"
    assert "never true" in finding.message
    assert finding.hint == "did you mean 'Oslo'?"


def test_a_value_in_another_case_is_reported_with_the_stored_spelling() -> None:
    (finding,) = found(fsm(when({"==": [var("origin"), "oslo"]})), "FSM028")
    assert finding.hint is not None and '"oslo" is spelt "Oslo"' in finding.hint


def test_a_synonym_in_a_condition_is_reported_with_the_value_it_stands_for() -> None:
    (finding,) = found(fsm(when({"==": [var("origin"), "NYC"]})), "FSM028")
    assert finding.hint is not None and '"NYC" is a synonym of "New York"' in finding.hint


def test_not_equal_to_a_value_outside_the_enum_is_always_true() -> None:
    (finding,) = found(fsm(when({"!=": [var("origin"), "Olso"]})), "FSM028")
    assert "always true" in finding.message


def test_declared_values_are_not_reported() -> None:
    rule = {"or": [{"==": [var("origin"), "Oslo"]}, {"in": [var("origin"), ["London", "New York"]]}]}
    assert found(fsm(when(rule)), "FSM028") == []


def test_each_item_of_an_in_list_outside_the_enum_is_reported_at_the_item() -> None:
    findings = found(fsm(when({"in": [var("origin"), ["Oslo", "Olso", "Pariss"]]})), "FSM028")
    assert [d.path for d in findings] == [f"{CONDITION}.in[1][1]", f"{CONDITION}.in[1][2]"]
    assert all("that item never matches" in d.message for d in findings)


def test_in_on_a_string_key_needs_a_substring_of_some_enum_value() -> None:
    assert found(fsm(when({"in": ["York", var("origin")]})), "FSM028") == []
    (finding,) = found(fsm(when({"in": ["Olso", var("origin")]})), "FSM028")
    assert finding.path == f"{CONDITION}.in[0]"


def test_a_list_key_is_checked_against_its_items_enum() -> None:
    (finding,) = found(fsm(when({"in": ["vipp", var("tags")]})), "FSM028")
    assert "the items of 'tags'" in finding.message
    assert found(fsm(when({"contains": [var("tags"), "vip"]})), "FSM028") == []


def test_an_item_read_by_index_is_checked_against_the_items_declaration() -> None:
    assert len(found(fsm(when({"==": [var("tags.0"), "vipp"]})), "FSM028")) == 1


def test_a_default_outside_the_enum_makes_the_comparison_possible() -> None:
    assert found(fsm(when({"==": [var("origin", "none"), "none"]})), "FSM028") == []


def test_the_empty_string_is_not_judged_against_an_enum() -> None:
    assert found(fsm(when({"!=": [var("origin"), ""]})), "FSM028") == []


# --- FSM029 condition-value-outside-declaration ----------------------------------------------------


def test_greater_than_the_maximum_never_holds() -> None:
    (finding,) = found(fsm(when({">": [var("age"), 130]})), "FSM029")
    assert finding.severity is Severity.ERROR
    assert "'age' > 130 never holds: the declared maximum is 130" in finding.message


def test_a_key_on_the_right_is_judged_with_the_operator_turned_round() -> None:
    (finding,) = found(fsm(when({">": [0, var("age")]})), "FSM029")  # 0 > age: age < 0
    assert "the declared minimum is 0" in finding.message


def test_both_ends_of_a_between_are_judged() -> None:
    (finding,) = found(fsm(when({"<": [130, var("age"), 200]})), "FSM029")
    assert finding.path == f"{CONDITION}['<'][0]"


def test_equal_to_a_value_outside_the_bounds_never_holds() -> None:
    assert len(found(fsm(when({"==": [var("age"), 200]})), "FSM029")) == 1


def test_comparisons_some_value_within_the_bounds_satisfies_are_not_reported() -> None:
    rule = {"and": [{"<": [var("age"), 200]}, {">=": [var("age"), 130]}, {"<=": [var("age"), 0]}]}
    assert found(fsm(when(rule)), "FSM029") == []


def test_a_default_that_satisfies_the_comparison_makes_it_possible() -> None:
    assert found(fsm(when({">": [var("age", 999), 130]})), "FSM029") == []


# --- FSM030 required-key-not-writable ----------------------------------------------------------------


def test_a_state_asking_for_a_key_writable_only_by_the_application_is_an_error() -> None:
    (finding,) = found(fsm(collect=["price"]), "FSM030")
    assert finding.severity is Severity.ERROR
    assert finding.path == "$.states.start.required_context_keys[0]"
    assert "writable_by: application" in finding.message


def test_a_state_asking_for_a_field_of_a_protected_key_is_an_error_without_declarations() -> None:
    (finding,) = found(fsm(keys={}, collect=["account.id"], protected_context_keys=["account"]), "FSM030")
    assert "protected_context_keys" in finding.message


def test_with_additional_keys_false_an_undeclared_key_cannot_be_collected() -> None:
    (finding,) = found(fsm(collect=[*COLLECTED, "destination"], additional_keys=False), "FSM030")
    assert "additional_keys: false" in finding.message
    assert found(fsm(collect=[*COLLECTED, "destination"]), "FSM030") == []


def test_a_condition_waiting_for_an_application_key_is_fine() -> None:
    assert found(fsm(when({">": [var("price"), 10]}, requires=["price"])), "FSM030") == []


# --- FSM031 declared-key-never-collected -------------------------------------------------------------


def test_a_declared_key_nothing_names_is_reported_at_its_declaration() -> None:
    (finding,) = found(fsm(collect=["origin", "age", "vip", "tags"]), "FSM031")
    assert finding.path == "$.context_keys.customer"
    assert finding.severity is Severity.WARNING


USES: dict[str, dict[str, Any]] = {
    "collected": {"collect": ["customer"]},
    "a field collected": {"collect": ["customer.name"]},
    "read by a condition": {"conditions": [when({"!!": [var("customer.tier")]})]},
    "tested by missing": {"conditions": [when({"!": {"missing": ["customer"]}})]},
    "required by a condition": {"conditions": [{"description": "c", "requires_context_keys": ["customer"]}]},
    "confirmed": {"confirmation": ["customer"]},
    "handed to a sub-flow": {"flow": {"inputs": {"who": "customer"}}},
    "copied back from a sub-flow": {"flow": {"outputs": {"customer": "who"}}},
    "provided by the application": {"extra": {"application_context_keys": ["customer"]}},
    "protected": {"extra": {"protected_context_keys": ["customer"]}},
}


@pytest.mark.parametrize("use", list(USES))
def test_a_declared_key_named_anywhere_is_used(use: str) -> None:
    spec = USES[use]
    data = fsm(*spec.get("conditions", ()), collect=["origin", "age", "vip", "tags", *spec.get("collect", ())])
    data.update(spec.get("extra", {}))
    if "confirmation" in spec:
        data["states"]["start"]["confirmation"] = {"keys": spec["confirmation"], "on_yes": "end"}
    if "flow" in spec:
        flow = {"name": "f", "definition": "other.yaml", "description": "f", **spec["flow"]}
        data["states"]["start"]["flows"] = [flow]
    assert found(data, "FSM031") == []


def test_a_key_declared_writable_by_the_application_needs_no_collector() -> None:
    keys = {"price": DECLARED["price"]}
    assert found(fsm(keys=keys, collect=[]), "FSM031") == []


# --- FSM032 undeclared-key -----------------------------------------------------------------------------


def test_with_additional_keys_false_a_condition_reading_an_undeclared_key_is_reported() -> None:
    (finding,) = found(fsm(when({"==": [var("destination"), "Rome"]}), additional_keys=False), "FSM032")
    assert finding.path == CONDITION
    assert "additional_keys: false" in finding.message


def test_with_additional_keys_false_a_key_the_application_provides_is_fine() -> None:
    data = fsm(when({"==": [var("destination"), "Rome"]}), additional_keys=False)
    data["application_context_keys"] = ["destination"]
    assert found(data, "FSM032") == []


def test_with_additional_keys_false_a_key_a_called_flow_copies_back_is_fine() -> None:
    data = fsm(when({"==": [var("destination"), "Rome"]}), additional_keys=False)
    data["flows"] = [{"name": "f", "definition": "o.yaml", "description": "f", "outputs": {"destination": "d"}}]
    assert found(data, "FSM032") == []


def test_with_additional_keys_true_a_misspelt_key_is_reported_with_the_declared_one() -> None:
    (finding,) = found(fsm(when({"==": [var("orign"), "Oslo"]}, requires=["orign"])), "FSM032")
    assert finding.path == "$.states.start.transitions[0].conditions[0].requires_context_keys[0]"
    assert "'origin' is" in finding.message
    assert len(found(fsm(collect=[*COLLECTED, "Origin"]), "FSM032")) == 1


def test_with_additional_keys_true_an_unrelated_undeclared_key_is_fine() -> None:
    assert found(fsm(when({"==": [var("destination"), "Rome"]}), collect=[*COLLECTED, "destination"]), "FSM032") == []


def test_keys_differing_only_in_their_digits_are_not_a_misspelling() -> None:
    keys = {"address_line1": {"type": "string"}}
    assert found(fsm(keys=keys, collect=["address_line1", "address_line2"]), "FSM032") == []


def test_a_field_of_a_declared_object_is_declared() -> None:
    assert found(fsm(collect=[*COLLECTED, "customer.tier"], additional_keys=False), "FSM032") == []


def test_without_declarations_no_key_is_undeclared() -> None:
    assert found(fsm(when({"==": [var("orign"), "Oslo"]}), keys={}, additional_keys=False), "FSM032") == []


# --- FSM014/FSM015 with declarations ----------------------------------------------------------------------


def test_a_key_declared_writable_by_the_application_is_provided_to_conditions() -> None:
    data = fsm(when({">": [var("price"), 10]}, requires=["price"]))
    assert found(data, "FSM014") == [] and found(data, "FSM015") == []


# --- problems inside a declaration -------------------------------------------------------------------


YAML = """\
name: t
description: d
initial_state: start
context_keys:
  code:
    type: string
    pattern: "[a-z"
  city:
    type: integer
    synonyms: {NYC: New York}
  tags:
    type: array
    items:
      type: string
      minLength: 2
states:
  start: {id: start, description: s, purpose: p, required_context_keys: [code, city, tags], transitions: []}
"""


def test_a_pattern_that_does_not_compile_is_a_schema_error_at_the_pattern_line() -> None:
    diagnostics = lint_document(parse_text(YAML, file="x.yaml")).diagnostics
    (finding,) = [d for d in diagnostics if d.path == "$.context_keys.code.pattern"]
    assert finding.code == "FSM001" and finding.line == 7 and finding.blocks_loading
    assert "does not compile" in finding.message
    assert finding.hint is not None and "regular expression" in finding.hint


def test_synonyms_without_an_enum_point_at_the_synonyms_line() -> None:
    diagnostics = lint_document(parse_text(YAML, file="x.yaml")).diagnostics
    (finding,) = [d for d in diagnostics if d.path == "$.context_keys.city.synonyms"]
    assert finding.code == "FSM001" and finding.line == 10


def test_a_json_schema_spelling_inside_items_names_the_snake_case_field() -> None:
    diagnostics = lint_document(parse_text(YAML, file="x.yaml")).diagnostics
    (finding,) = [d for d in diagnostics if d.code == "FSM003"]
    assert finding.path == "$.context_keys.tags.items.minLength" and finding.line == 15
    assert finding.hint is not None and "min_length" in finding.hint


@pytest.mark.parametrize(
    ("written", "meant"),
    [("minLength", "min_length"), ("maxLength", "max_length"), ("minItems", "min_items"),
     ("maxItems", "max_items"), ("writableBy", "writable_by")],
)  # fmt: skip
def test_json_schema_spellings_of_declaration_fields_are_pointed_at_the_snake_case_name(
    written: str, meant: str
) -> None:
    keys = {"code": {"type": "string", written: 3}}
    (finding,) = found(fsm(keys=keys, collect=["code"]), "FSM003")
    assert finding.severity is Severity.WARNING and finding.path == f"$.context_keys.code.{written}"
    assert finding.hint is not None and meant in finding.hint


def test_a_known_field_named_like_a_declared_key_is_not_a_spelling_mistake() -> None:
    keys = {"pattern": {"type": "string", "pattern": "^[a-z]+$"}}
    assert lint_data(fsm(keys=keys, collect=["pattern"])).diagnostics == ()


def test_a_broken_declaration_is_not_used_but_the_others_still_are() -> None:
    keys = {"origin": DECLARED["origin"], "age": {"type": "integer", "enum": ["x"]}}
    rule = {"and": [{"==": [var("origin"), "Olso"]}, {"==": [var("age"), "x"]}]}
    codes = [d.code for d in lint_data(fsm(when(rule), keys=keys, collect=["origin", "age"])).diagnostics]
    assert sorted(codes) == ["FSM001", "FSM028"]


# --- bounded work ----------------------------------------------------------------------------------------


def test_many_comparisons_against_a_large_enum_stop_at_the_cap_and_build_the_enum_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from llm_fsm.lint import _checks_keys

    builds: list[int] = []
    real = _checks_keys._Comparisons.enum

    def counting(self: Any, declaration: Any) -> Any:
        if id(declaration) not in self._enums:
            builds.append(1)
        return real(self, declaration)

    monkeypatch.setattr(_checks_keys._Comparisons, "enum", counting)
    keys = {"city": {"type": "string", "enum": [f"c{i}" for i in range(5_000)]}}
    conditions = [when({"==": [var("city"), f"x{i}"]}) for i in range(1_000)]
    findings = found(fsm(*conditions, keys=keys, collect=["city"]), "FSM028")
    assert len(findings) == MAX_FINDINGS_PER_RULE + 1
    assert builds == [1]


def test_the_misspelling_index_is_bounded_however_many_keys_are_declared() -> None:
    typos = _Typos([f"declared_key_number_{i:06d}" for i in range(20_000)])
    assert len(typos.index) <= _MAX_TYPO_INDEX + 64
    assert typos.near("Declared-Key-Number-000001") == "declared_key_number_000001"


def test_a_hint_for_a_value_outside_a_huge_enum_does_not_compare_it_with_every_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from llm_fsm.lint import _checks_keys

    compared: list[int] = []
    monkeypatch.setattr(_checks_keys, "_did_you_mean", lambda word, options: compared.append(len(options)) or "")
    keys = {"city": {"type": "string", "enum": [f"city {i}" for i in range(_checks_keys._MAX_SUBSTRING_ENUM + 1)]}}
    (finding,) = found(fsm(when({"==": [var("city"), "nowhere"]}), keys=keys, collect=["city"]), "FSM028")
    assert compared == [] and finding.hint is not None


def test_a_state_asking_for_a_field_of_a_key_declared_without_fields_is_an_error() -> None:
    (finding,) = found(fsm(collect=[*COLLECTED, "origin.city"]), "FSM030")
    assert "'origin' is declared as string, which has no fields" in finding.message
    assert found(fsm(collect=[*COLLECTED, "customer.tier"]), "FSM030") == []


def test_a_dot_path_of_a_million_levels_is_matched_through_its_first_levels_only() -> None:
    from llm_fsm.lint._support import MAX_PATH_LEVELS, KeyCover, _prefixes

    key = "a." * 1_000_000 + "a"
    assert len(list(_prefixes(key))) == MAX_PATH_LEVELS
    assert KeyCover([key]).covers("a.a") and not KeyCover(["a"]).covers("b.a")


def test_a_value_with_stray_spaces_is_reported_with_the_stored_spelling() -> None:
    (finding,) = found(fsm(when({"==": [var("origin"), "new  york "]})), "FSM028")
    assert finding.hint is not None and 'is spelt "New York"' in finding.hint


def test_a_state_asking_for_an_underscore_key_is_an_error_without_declarations() -> None:
    (finding,) = found(fsm(keys={}, collect=["_internal"]), "FSM030")
    assert "starts with _" in finding.message


FORMS: dict[str, Any] = {
    "email": {"type": "string", "format": "email"},
    "day": {"type": "string", "format": "date"},
    "at": {"type": "string", "format": "time"},
    "code": {"type": "string", "min_length": 3, "max_length": 5},
    "name": {"type": "string"},
}


def formed(logic: Any) -> dict[str, Any]:
    return fsm(when(logic), keys=FORMS, collect=list(FORMS))


def test_equal_to_a_value_of_the_wrong_format_never_holds() -> None:
    (finding,) = found(formed({"==": [var("email"), "not an address"]}), "FSM029")
    assert "it is not an email address, the declared format" in finding.message and "never true" in finding.message


def test_equal_to_a_date_not_in_its_stored_form_never_holds_and_the_hint_gives_the_stored_form() -> None:
    (finding,) = found(formed({"==": [var("day"), "5 January 2027"]}), "FSM029")
    assert finding.hint == 'compare with "2027-01-05"'


def test_ordering_times_against_a_literal_in_another_form_is_reported() -> None:
    (finding,) = found(formed({"<": [var("at"), "9:30"]}), "FSM029")
    assert finding.hint == 'compare with "09:30"'
    assert found(formed({"<": [var("at"), "09:30"]}), "FSM029") == []


def test_equal_to_a_number_no_region_has_never_holds_for_a_phone_key_with_a_region() -> None:
    keys = {"tel": {"type": "string", "format": "phone", "region": "GB"}}
    (finding,) = found(fsm(when({"==": [var("tel"), "+44 20 7946 000"]}), keys=keys, collect=["tel"]), "FSM029")
    assert "it is not a phone number, the declared format" in finding.message and "never true" in finding.message


def test_equal_to_a_phone_number_not_in_e164_gives_the_stored_form() -> None:
    keys = {"tel": {"type": "string", "format": "phone", "region": "GB"}}
    (finding,) = found(fsm(when({"==": [var("tel"), "020 7946 0958"]}), keys=keys, collect=["tel"]), "FSM029")
    assert finding.hint == 'compare with "+442079460958"'


def test_ordering_plain_strings_is_not_judged() -> None:
    assert found(formed({"<": [var("name"), " m"]}), "FSM029") == []


def test_equal_to_a_value_of_the_wrong_length_never_holds() -> None:
    (finding,) = found(formed({"!=": [var("code"), "toolong"]}), "FSM029")
    assert "longer than the declared max_length (5)" in finding.message and "always true" in finding.message


def test_equal_to_a_value_with_stray_spaces_never_holds_since_stored_values_are_trimmed() -> None:
    (finding,) = found(formed({"==": [var("name"), "Ada "]}), "FSM029")
    assert finding.hint == 'compare with "Ada"'


def test_values_in_their_stored_form_are_not_reported() -> None:
    rule = {
        "and": [
            {"==": [var("email"), "ada@example.com"]},
            {"==": [var("day"), "2027-01-05"]},
            {"in": [var("code"), ["abc", "abcde"]]},
            {"==": [var("name"), "Ada"]},
        ]
    }
    assert found(formed(rule), "FSM029") == []


def test_a_pattern_is_not_run_by_lint() -> None:
    keys = {"code": {"type": "string", "pattern": "^(a+)+$"}}
    assert found(fsm(when({"==": [var("code"), "a" * 40 + "b"]}), keys=keys, collect=["code"]), "FSM029") == []


def test_ordering_a_numeric_enum_past_all_its_values_never_holds() -> None:
    keys = {"stars": {"type": "integer", "enum": [1, 2, 3, 4, 5]}}
    (finding,) = found(fsm(when({">": [var("stars"), 5]}), keys=keys, collect=["stars"]), "FSM029")
    assert "no declared value (1, 2, 3, 4, 5) is" in finding.message
    assert found(fsm(when({">=": [var("stars"), 5]}), keys=keys, collect=["stars"]), "FSM029") == []


def test_an_integer_key_never_equals_a_fraction() -> None:
    (finding,) = found(fsm(when({"==": [var("age"), 17.5]})), "FSM029")
    assert "declared integer" in finding.message
    assert found(fsm(when({"==": [var("age"), 17.0]})), "FSM029") == []


@pytest.mark.parametrize("rule", [True, "x", 3, None, [], {}, {"a": 1, "b": 2}])
def test_a_literal_rule_is_walked_without_failing(rule: Any) -> None:
    assert found(fsm(when(rule)), "FSM099") == []


def test_a_broken_declaration_still_declares_its_key() -> None:
    keys = {**DECLARED, "origin": {"type": "string", "enum": ["Oslo"], "synonyms": {"NYC": "New York"}}}  # not in enum
    rule = {"==": [var("origin"), "Olso"]}
    codes = {
        d.code for d in lint_data(fsm(when(rule, requires=["origin"]), keys=keys, additional_keys=False)).diagnostics
    }
    assert codes == {"FSM001"}
