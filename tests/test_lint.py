"""fsm-lint's checks, one behaviour per test, each over the smallest document that shows it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fsm.definition._documents import parse_text
from llm_fsm.errors import LogicError
from llm_fsm.lint._linter import lint_data, lint_document
from llm_fsm.lint._missing_reads import risky_missing_reads
from llm_fsm.lint._rules import RULES, RULES_BY_CODE, Diagnostic, Severity
from llm_fsm.logic._guards import compile_guard

ROOT = Path(__file__).resolve().parent.parent


def state(sid: str, *targets: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": sid,
        "description": f"{sid} state",
        "purpose": f"do {sid}",
        "transitions": [{"target_state": t, "description": f"to {t}"} for t in targets],
        **extra,
    }


def fsm(*states: dict[str, Any], initial: str = "start", **extra: Any) -> dict[str, Any]:
    return {
        "name": "t",
        "description": "test",
        "initial_state": initial,
        "version": "3.0",
        "states": {s["id"]: s for s in states},
        **extra,
    }


def base() -> dict[str, Any]:
    return fsm(state("start", "end", required_context_keys=["age"]), state("end"))


def guarded(logic: Any = None, requires: list[str] | None = None, target: str = "end", **extra: Any) -> dict[str, Any]:
    condition: dict[str, Any] = {"description": "c"}
    if logic is not None:
        condition["logic"] = logic
    if requires is not None:
        condition["requires_context_keys"] = requires
    return {"target_state": target, "description": "guarded", "conditions": [condition], **extra}


def with_transitions(*transitions: dict[str, Any], collect: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    doc = fsm(state("start", required_context_keys=collect or ["age"]), state("end"), **extra)
    doc["states"]["start"]["transitions"] = list(transitions)
    return doc


def codes(doc: Any) -> list[str]:
    return [d.code for d in lint_data(doc).diagnostics]


def only(doc: Any, code: str) -> list[Diagnostic]:
    return [d for d in lint_data(doc).diagnostics if d.code == code]


def test_a_sound_definition_has_no_findings() -> None:
    assert codes(base()) == []


def test_the_registry_has_unique_codes_and_names() -> None:
    assert len(RULES) == len(RULES_BY_CODE)
    assert all(rule.code.startswith("FSM") and len(rule.code) == 6 for rule in RULES.values())


def test_every_code_is_documented_in_docs_lint_md() -> None:
    text = (ROOT / "docs" / "lint.md").read_text(encoding="utf-8")
    for rule in RULES.values():
        assert f"`{rule.code}`" in text and f"`{rule.name}`" in text, rule.code


# --- schema and format ------------------------------------------------------------------------


def test_a_top_level_list_is_a_schema_violation() -> None:
    assert codes([1, 2]) == ["FSM001"]


def test_a_missing_required_field_is_reported_at_its_path() -> None:
    doc = base()
    del doc["states"]["end"]["purpose"]
    (finding,) = only(doc, "FSM001")
    assert finding.path == "$.states.end.purpose"
    assert finding.severity is Severity.ERROR


def test_a_state_that_is_not_an_object_is_reported_and_the_rest_is_still_checked() -> None:
    doc = base()
    doc["states"]["end"] = "the end"
    doc["initial_state"] = "nowhere"
    found = codes(doc)
    assert "FSM001" in found and "FSM005" in found


def test_an_unsupported_version_is_an_error() -> None:
    (finding,) = only(fsm(state("start", "end"), state("end"), version="4.1"), "FSM002")
    assert finding.path == "$.version"


def test_an_unquoted_yaml_version_gets_a_hint_to_quote_it() -> None:
    doc = parse_text("version: 3.0\n", fmt="yaml")
    doc = type(doc)(data={**base(), "version": 3.0}, lines=doc.lines)
    (finding,) = [d for d in lint_document(doc).diagnostics if d.path == "$.version"]
    assert finding.code == "FSM001" and "quote" in (finding.hint or "")


def test_unknown_fields_are_warnings_with_a_spelling_hint() -> None:
    doc = base()
    doc["states"]["start"]["transitons"] = []
    (finding,) = only(doc, "FSM003")
    assert finding.severity is Severity.WARNING
    assert finding.path == "$.states.start.transitons"
    assert "transitions" in (finding.hint or "")


def test_the_original_function_handlers_field_is_only_a_warning() -> None:
    result = lint_data({**base(), "function_handlers": []})
    assert [d.code for d in result.diagnostics] == ["FSM003"]
    assert result.definition is not None


def test_a_json_file_naming_its_schema_is_not_an_unknown_field() -> None:
    """``"$schema"`` at the top is how editors are pointed at the schema; it is expected, not ignored by mistake."""
    result = lint_data({"$schema": "../schemas/fsm_definition.schema.json", **base()})
    assert [d.code for d in result.diagnostics] == []


def test_unknown_fields_in_transitions_and_conditions_are_found() -> None:
    doc = with_transitions({**guarded(requires=["age"]), "weight": 1})
    doc["states"]["start"]["transitions"][0]["conditions"][0]["note"] = "x"
    paths = {d.path for d in only(doc, "FSM003")}
    assert paths == {"$.states.start.transitions[0].weight", "$.states.start.transitions[0].conditions[0].note"}


# --- states and the graph --------------------------------------------------------------------


def test_a_state_whose_id_differs_from_its_key_is_an_error() -> None:
    doc = base()
    doc["states"]["end"]["id"] = "finish"
    (finding,) = only(doc, "FSM004")
    assert finding.path == "$.states.end.id"


def test_a_missing_initial_state_is_an_error_with_a_suggestion() -> None:
    (finding,) = only({**base(), "initial_state": "strat"}, "FSM005")
    assert "start" in (finding.hint or "")


def test_a_transition_to_an_undeclared_state_is_an_error() -> None:
    doc = base()
    doc["states"]["start"]["transitions"][0]["target_state"] = "ned"
    (finding,) = only(doc, "FSM006")
    assert finding.path == "$.states.start.transitions[0].target_state"
    assert "end" in (finding.hint or "")


def test_an_unreachable_state_is_an_error() -> None:
    doc = base()
    doc["states"]["orphan"] = state("orphan", "end")
    (finding,) = only(doc, "FSM007")
    assert finding.path == "$.states.orphan"
    assert finding.severity is Severity.ERROR


def test_a_definition_without_terminal_state_is_reported_once_not_per_state() -> None:
    doc = fsm(state("start", "loop"), state("loop", "start"))
    assert codes(doc) == ["FSM008"]


def test_a_self_loop_does_not_make_a_state_terminal() -> None:
    doc = fsm(state("start", "end", "stuck"), state("stuck", "stuck"), state("end"))
    (finding,) = only(doc, "FSM009")
    assert finding.path == "$.states.stuck"


def test_a_cycle_with_a_way_out_is_not_a_trap() -> None:
    doc = fsm(state("start", "again"), state("again", "start", "end"), state("end"))
    assert codes(doc) == []


def test_a_trap_that_is_also_unreachable_is_reported_as_unreachable_only() -> None:
    doc = fsm(state("start", "end"), state("end"), state("island", "island"))
    assert codes(doc) == ["FSM007"]


# --- transitions -----------------------------------------------------------------------------


def test_duplicate_transitions_are_reported_at_the_second_one() -> None:
    doc = with_transitions(guarded(requires=["age"]), guarded(requires=["age"], priority=5))
    (finding,) = only(doc, "FSM010")
    assert finding.path == "$.states.start.transitions[1]"


def test_same_target_with_different_conditions_is_not_a_duplicate() -> None:
    doc = with_transitions(
        guarded({">": [{"var": "age"}, 1]}, priority=1), guarded({">": [{"var": "age"}, 2]}, priority=2)
    )
    assert only(doc, "FSM010") == []


def test_guarded_transitions_to_different_targets_sharing_a_priority_are_ambiguous() -> None:
    doc = fsm(state("start", required_context_keys=["age"]), state("a"), state("b"))
    doc["states"]["start"]["transitions"] = [
        guarded({">": [{"var": "age"}, 18]}, target="a", priority=1),
        guarded({">": [{"var": "age"}, 65]}, target="b", priority=1),
    ]
    (finding,) = only(doc, "FSM011")
    assert finding.path == "$.states.start.transitions[1].priority"


def test_unguarded_transitions_may_share_a_priority() -> None:
    doc = fsm(state("start", "a", "b"), state("a"), state("b"))
    assert codes(doc) == []


def test_a_condition_without_logic_or_keys_always_holds() -> None:
    (finding,) = only(with_transitions(guarded()), "FSM017")
    assert finding.path == "$.states.start.transitions[0].conditions[0]"


# --- JsonLogic -------------------------------------------------------------------------------


def test_an_unknown_operator_is_reported_inside_the_rule() -> None:
    doc = with_transitions(guarded({"and": [{"equals": [{"var": "age"}, 1]}]}))
    (finding,) = only(doc, "FSM012")
    assert finding.path == "$.states.start.transitions[0].conditions[0].logic.and[0].equals"
    assert finding.severity is Severity.ERROR


def test_a_wrong_arity_is_reported() -> None:
    (finding,) = only(with_transitions(guarded({"!": [1, 2]})), "FSM012")
    assert "argument" in finding.message


def test_an_invalid_rule_is_not_also_reported_as_a_schema_violation() -> None:
    assert codes(with_transitions(guarded({"nope": []}))) == ["FSM012"]


@pytest.mark.parametrize(
    "rule",
    [
        {"<": [{"var": "age"}, 18]},
        {"<=": [{"var": "age"}, 18]},
        {"!": {"var": "age"}},
        {"!": [{"var": ["age"]}]},
        {"!=": [{"var": "age"}, 3]},
        {"!==": [{"var": "age"}, "x"]},
        {"==": [{"var": "age"}, None]},
        {">": [18, {"var": "age"}]},
        {"<": [{"var": "age"}, {"var": "limit"}]},
        {"and": [{"!!": [1]}, {"<=": [0, {"var": "age"}, 10]}]},
    ],
)
def test_conditions_true_for_a_missing_key_under_reference_jsonlogic_are_warned(rule: Any) -> None:
    doc = with_transitions(guarded(rule), collect=["age", "limit"])
    (finding,) = [d for d in only(doc, "FSM013") if "'age'" in d.message]
    assert "'age'" in finding.message
    assert "requires_context_keys" in (finding.hint or "")


@pytest.mark.parametrize(
    "rule",
    [
        {">": [{"var": "age"}, 18]},
        {"==": [{"var": "age"}, 18]},
        {"<": [{"var": ["age", 0]}, 18]},
        {"!": {"var": ["age", False]}},
        {"!=": [{"var": "age"}, None]},
        {"<": [18, {"var": "age"}]},
        {"in": ["x", {"var": "age"}]},
    ],
)
def test_conditions_false_for_a_missing_key_either_way_are_not_warned(rule: Any) -> None:
    assert only(with_transitions(guarded(rule)), "FSM013") == []


def test_requiring_the_key_silences_the_missing_key_warning() -> None:
    doc = with_transitions(guarded({"<": [{"var": "age"}, 18]}, requires=["age"]))
    assert codes(doc) == []


def test_the_risky_read_walk_is_iterative() -> None:
    rule: Any = {"!": {"var": "deep"}}
    for _ in range(50_000):
        rule = {"and": [rule]}
    assert ("deep", "`!` of a missing (null) value is true") in list(risky_missing_reads(rule))


# --- context keys ----------------------------------------------------------------------------


def test_a_condition_reading_a_key_nothing_provides_is_warned() -> None:
    doc = with_transitions(guarded({"==": [{"var": "plan"}, "gold"]}))
    (finding,) = only(doc, "FSM014")
    assert "'plan'" in finding.message
    assert finding.path == "$.states.start.transitions[0].conditions[0].logic"


@pytest.mark.parametrize(
    "extra",
    [
        {"application_context_keys": ["plan"]},
        {"protected_context_keys": ["plan"]},
    ],
)
def test_keys_the_application_provides_may_be_read(extra: dict[str, Any]) -> None:
    doc = with_transitions(guarded({"==": [{"var": "plan"}, "gold"]}), **extra)
    assert codes(doc) == []


def test_a_key_another_condition_requires_may_be_read() -> None:
    doc = with_transitions(
        guarded({"==": [{"var": "plan"}, "gold"]}, priority=1),
        guarded(requires=["plan"], priority=2, target="start"),
        application_context_keys=[],
    )
    assert only(doc, "FSM014") == []


def test_collecting_an_object_provides_its_fields() -> None:
    doc = with_transitions(guarded({"==": [{"var": "customer.tier"}, "gold"]}), collect=["customer"])
    assert codes(doc) == []


def test_collecting_a_field_provides_reading_its_object() -> None:
    doc = with_transitions(guarded({"!!": [{"var": "customer"}]}), collect=["customer.tier"])
    assert codes(doc) == []


def test_collecting_a_sibling_field_does_not_provide_another() -> None:
    doc = with_transitions(guarded({"==": [{"var": "customer.tier"}, "gold"]}), collect=["customer.name"])
    assert [d.code for d in lint_data(doc).diagnostics] == ["FSM014"]


def test_requiring_a_key_no_state_collects_is_warned() -> None:
    (finding,) = only(with_transitions(guarded(requires=["email"])), "FSM015")
    assert finding.path == "$.states.start.transitions[0].conditions[0].requires_context_keys[0]"


# --- a misspelt key in a guard: FSM041 ----------------------------------------------------------------


def test_requiring_a_misspelling_of_a_collected_key_is_an_error_that_names_the_key_meant() -> None:
    doc = with_transitions(guarded(requires=["emial"]), collect=["email"])
    (finding,) = lint_data(doc).diagnostics
    assert (finding.code, finding.severity) == ("FSM041", Severity.ERROR)
    assert finding.path == "$.states.start.transitions[0].conditions[0].requires_context_keys[0]"
    assert "never holds" in finding.message and "'end'" in finding.message
    assert finding.hint == "did you mean 'email'?"


def test_a_misspelling_of_a_declared_key_is_an_error_and_still_an_undeclared_key() -> None:
    doc = with_transitions(
        guarded(requires=["emial"]), collect=["email"], context_keys={"email": {"type": "string", "format": "email"}}
    )
    assert sorted(codes(doc)) == ["FSM032", "FSM041"]  # not also FSM015: FSM041 is that finding, with its cost


def test_a_read_of_a_misspelt_key_that_leaves_the_guard_no_way_to_hold_is_an_error() -> None:
    doc = with_transitions(guarded({"in": ["@", {"var": "emial"}]}, requires=["email"]), collect=["email"])
    (finding,) = lint_data(doc).diagnostics
    assert (finding.code, finding.path) == ("FSM041", "$.states.start.transitions[0].conditions[0].logic")


@pytest.mark.parametrize(
    "logic",
    [
        {"or": [{"==": [{"var": "emial"}, "x"]}, {"==": [{"var": "email"}, "y"]}]},  # the other clause can hold
        {"==": [{"var": ["emial", "x"]}, "x"]},  # a default: the rule holds without the key
    ],
)
def test_a_misspelt_read_the_guard_can_hold_without_stays_a_warning(logic: Any) -> None:
    doc = with_transitions(guarded(logic), collect=["email"])
    assert "FSM041" not in codes(doc)


def test_a_key_no_state_collects_and_nothing_resembles_stays_a_warning() -> None:
    # the application may pass it without listing it (the seed's router does): lint cannot know
    assert codes(with_transitions(guarded(requires=["order_total"]), collect=["email"])) == ["FSM015"]


def test_a_misspelling_the_application_says_it_provides_is_no_finding() -> None:
    doc = with_transitions(guarded(requires=["emial"]), collect=["email"], application_context_keys=["emial"])
    assert codes(doc) == []


# --- locations -------------------------------------------------------------------------------


def test_findings_carry_file_and_line_from_the_parsed_document() -> None:
    text = """\
name: t
description: d
initial_state: start
states:
  start:
    id: start
    description: s
    purpose: p
    transitions:
      - target_state: gone
        description: x
"""
    result = lint_document(parse_text(text, file="t.yaml"))
    (finding,) = [d for d in result.diagnostics if d.code == "FSM006"]
    assert (finding.file, finding.line) == ("t.yaml", 10)


def test_duplicate_keys_are_warned_with_their_line() -> None:
    text = '{\n "name": "t",\n "name": "u"\n}'
    (finding,) = [d for d in lint_document(parse_text(text, file="d.json")).diagnostics if d.code == "FSM016"]
    assert (finding.path, finding.line) == ("$.name", 3)


def test_findings_are_sorted_by_line() -> None:
    doc = copy.deepcopy(base())
    doc["states"]["start"]["transitions"][0]["target_state"] = "ghost"
    doc["initial_state"] = "ghost2"
    import json

    result = lint_document(parse_text(json.dumps(doc, indent=1), file="x.json"))
    lines = [d.line for d in result.diagnostics]
    assert lines == sorted(lines)


def test_diagnostics_serialise_to_plain_json_types() -> None:
    doc = base()
    doc["states"]["orphan"] = state("orphan", "end")
    (finding,) = lint_data(doc).diagnostics
    assert finding.to_dict() == {
        "code": "FSM007",
        "name": "unreachable-state",
        "severity": "error",
        "message": "state 'orphan' cannot be reached from the initial state 'start'",
        "hint": "add a transition into it, or remove it",
        "file": None,
        "path": "$.states.orphan",
        "line": None,
    }


# --- sub-flows and confirmations -------------------------------------------------------------


def test_conditions_of_sub_flows_are_checked_like_transition_conditions() -> None:
    doc = base()
    doc["flows"] = [
        {
            "name": "f",
            "definition": "f.yaml",
            "description": "d",
            "conditions": [{"description": "c", "logic": {"bogus": [1]}}],
        }
    ]
    (finding,) = only(doc, "FSM012")
    assert finding.path == "$.flows[0].conditions[0].logic.bogus"


def test_a_sub_flow_condition_reading_an_unprovided_key_is_warned() -> None:
    doc = base()
    doc["states"]["start"]["flows"] = [
        {
            "name": "f",
            "definition": "f.yaml",
            "description": "d",
            "conditions": [{"description": "c", "logic": {"==": [{"var": "plan"}, "x"]}}],
        }
    ]
    (finding,) = only(doc, "FSM014")
    assert finding.path == "$.states.start.flows[0].conditions[0].logic"


def test_unknown_fields_of_flows_and_confirmations_are_warned() -> None:
    doc = base()
    doc["flows"] = [{"name": "f", "definition": "f.yaml", "description": "d", "mdoe": "call"}]
    doc["states"]["start"]["confirmation"] = {"on_yes": "end", "onno": "cancel"}
    assert {d.path for d in only(doc, "FSM003")} == {"$.flows[0].mdoe", "$.states.start.confirmation.onno"}


def test_a_confirmation_must_name_declared_transitions() -> None:
    doc = base()
    doc["states"]["start"]["confirmation"] = {"on_yes": "elsewhere", "on_no": "cancel"}
    (finding,) = only(doc, "FSM018")
    assert finding.path == "$.states.start.confirmation.on_yes"


def test_a_confirmation_over_declared_transitions_is_clean() -> None:
    doc = base()
    doc["states"]["start"]["confirmation"] = {"on_yes": "end", "on_no": None}
    assert codes(doc) == []


def test_a_loaded_model_can_be_linted_and_keeps_its_unknown_fields() -> None:
    from llm_fsm.definition._model import FSMDefinition
    from llm_fsm.lint._linter import lint_definition

    doc = base()
    doc["states"]["orphan"] = state("orphan", "end")
    doc["function_handlers"] = []
    found = {d.code for d in lint_definition(FSMDefinition.model_validate(doc), file="m.json")}
    assert found == {"FSM003", "FSM007"}


# --- the garbage collector ------------------------------------------------------------------


def test_linting_pauses_the_garbage_collector_and_restores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from llm_fsm.lint import _linter

    seen: list[bool] = []
    monkeypatch.setattr(_linter, "CHECKS", (lambda run: seen.append(gc.isenabled()), *_linter.CHECKS))
    assert gc.isenabled()
    lint_document(parse_text('{"name": "x"}', file="x.json"))
    assert seen == [False]
    assert gc.isenabled()
    with pytest.raises(Exception, match="not valid JSON"):
        parse_text('{"name": ', file="x.json")
    assert gc.isenabled()
    gc.disable()
    try:  # a program that turned the collector off keeps it off
        lint_document(parse_text('{"name": "x"}', file="x.json"))
        assert not gc.isenabled()
    finally:
        gc.enable()


# --- FSM013 skips rules whose every var without a default is required -----------------------------

_NAMES = st.sampled_from(["a", "b", "a.b", "", 0, 1, 1.5, True, None])
_VARS = st.one_of(
    st.builds(lambda n: {"var": n}, _NAMES),
    st.builds(lambda n: {"var": [n]}, _NAMES),
    st.builds(lambda n, d: {"var": [n, d]}, _NAMES, st.integers()),
)


def _fsm013_rules() -> st.SearchStrategy[Any]:
    operators = ["!", "!=", "==", "<", "<=", ">", ">=", "and", "or", "if", "in", "map", "filter", "some", "var", "+"]
    leaf = _VARS | st.integers(-2, 2) | st.none() | st.sampled_from(["x", ""])
    return st.recursive(
        leaf,
        lambda children: (
            st.builds(lambda op, args: {op: args}, st.sampled_from(operators), st.lists(children, max_size=3))
            | st.lists(children, max_size=2)
            | st.dictionaries(st.sampled_from(["p", "q"]), children, min_size=2, max_size=2)
        ),
        max_leaves=12,
    )


@settings(max_examples=400, deadline=None)
@given(_fsm013_rules())
def test_every_key_fsm013_can_flag_is_among_the_compiled_rules_mentions(rule: Any) -> None:
    try:
        guard = compile_guard(rule)
    except LogicError:
        return
    assert {key for key, _ in risky_missing_reads(rule)} <= guard.mentions_without_default
