"""Global transitions in the definition: which states they apply to, what loading refuses, and the content hash.

A global transition is declared once (``global_transitions:``) and is a candidate in every state of its scope:
all states, or ``from_states`` plus the states of ``from_groups`` (``state_groups:``), minus ``except_states``,
never a terminal state and never the state it leads to. ``FSMDefinition.transitions_from`` is the one place that
says so; everything else reads it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.errors import DefinitionError
from llm_fsm.lint._linter import lint_data
from llm_fsm.loading import load_fsm_definition

ROOT = Path(__file__).resolve().parents[1]


def state(sid: str, *targets: str) -> dict[str, Any]:
    return {
        "id": sid,
        "description": sid,
        "purpose": sid,
        "transitions": [{"target_state": t, "description": f"to {t}"} for t in targets],
    }


BASE: dict[str, Any] = {
    "name": "shop",
    "description": "d",
    "initial_state": "browse",
    "states": {
        "browse": state("browse", "cart"),
        "cart": state("cart", "pay"),
        "pay": state("pay", "done"),
        "person": state("person", "done"),
        "done": state("done"),
    },
}

TALK = {"target_state": "person", "description": "the user asks for a person"}


def define(*globals_: dict[str, Any], **extra: Any) -> FSMDefinition:
    doc = copy.deepcopy(BASE)
    doc["global_transitions"] = list(globals_)
    doc.update(extra)
    return FSMDefinition.model_validate(doc)


def targets(definition: FSMDefinition, state_id: str) -> list[str]:
    return [t.target_state for t in definition.transitions_from(state_id)]


def test_a_global_transition_is_offered_after_a_states_own_transitions() -> None:
    definition = define(TALK)
    assert targets(definition, "browse") == ["cart", "person"]
    assert targets(definition, "pay") == ["done", "person"]


def test_a_global_transition_never_leaves_a_terminal_state() -> None:
    definition = define(TALK)
    assert definition.transitions_from("done") == []
    assert definition.states["done"].is_terminal


def test_a_global_transition_is_no_self_loop_in_the_state_it_leads_to() -> None:
    assert targets(define(TALK), "person") == ["done"]


def test_except_states_removes_a_global_transition_from_those_states() -> None:
    definition = define({**TALK, "except_states": ["pay"]})
    assert targets(definition, "pay") == ["done"]
    assert targets(definition, "cart") == ["pay", "person"]


def test_from_states_limits_a_global_transition_to_the_states_listed() -> None:
    definition = define({**TALK, "from_states": ["cart"]})
    assert targets(definition, "cart") == ["pay", "person"]
    assert targets(definition, "browse") == ["cart"]


def test_from_groups_limits_a_global_transition_to_the_states_of_the_group() -> None:
    groups = {"checkout": {"states": ["cart", "pay"], "description": "paying"}}
    definition = define({**TALK, "from_groups": ["checkout"], "except_states": ["pay"]}, state_groups=groups)
    assert targets(definition, "cart") == ["pay", "person"]
    assert targets(definition, "pay") == ["done"]
    assert targets(definition, "browse") == ["cart"]


def test_from_states_and_from_groups_together_apply_in_the_states_of_both() -> None:
    groups = {"checkout": {"states": ["pay"]}}
    definition = define({**TALK, "from_states": ["browse"], "from_groups": ["checkout"]}, state_groups=groups)
    assert [s for s in definition.states if "person" in targets(definition, s)] == ["browse", "pay"]


def test_a_global_transition_index_points_at_its_declaration() -> None:
    definition = define(TALK)
    assert definition.transition_path("cart", 0) == ("states", "cart", "transitions", 0)
    assert definition.transition_path("cart", 1) == ("global_transitions", 0)
    assert definition.global_index("cart", 1) == 0
    assert definition.global_index("cart", 0) is None


def test_without_global_transitions_a_state_has_only_its_own() -> None:
    definition = FSMDefinition.model_validate(BASE)
    assert definition.transitions_from("cart") is definition.states["cart"].transitions


# --- what loading refuses -------------------------------------------------------------------------------------


def codes_at(doc: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(d.code, d.path) for d in lint_data(doc).diagnostics if d.severity.value == "error"]


def with_globals(*globals_: dict[str, Any], **extra: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["global_transitions"] = list(globals_)
    doc.update(extra)
    return doc


def test_a_global_transition_to_an_undeclared_state_is_refused() -> None:
    doc = with_globals({**TALK, "target_state": "persn"})
    assert ("FSM006", "$.global_transitions[0].target_state") in codes_at(doc)
    with pytest.raises(DefinitionError, match="persn"):
        load_fsm_definition(doc)


@pytest.mark.parametrize("field", ["from_states", "except_states"])
def test_a_scope_naming_an_undeclared_state_is_refused(field: str) -> None:
    doc = with_globals({**TALK, field: ["cart", "chekout"]})
    assert ("FSM058", f"$.global_transitions[0].{field}[1]") in codes_at(doc)
    with pytest.raises(DefinitionError, match="chekout"):
        load_fsm_definition(doc)


def test_a_scope_naming_an_undeclared_group_is_refused() -> None:
    doc = with_globals({**TALK, "from_groups": ["checkout"]}, state_groups={"check_out": {"states": ["cart"]}})
    assert ("FSM058", "$.global_transitions[0].from_groups[0]") in codes_at(doc)


def test_a_group_naming_an_undeclared_state_is_refused() -> None:
    doc = with_globals(TALK, state_groups={"checkout": {"states": ["cart", "paying"]}})
    assert ("FSM058", "$.state_groups.checkout.states[1]") in codes_at(doc)


def test_a_sound_global_transition_loads() -> None:
    groups = {"checkout": {"states": ["cart", "pay"]}}
    definition = load_fsm_definition(with_globals({**TALK, "from_groups": ["checkout"]}, state_groups=groups))
    assert targets(definition, "pay") == ["done", "person"]


# --- the content hash -----------------------------------------------------------------------------------------

#: content hashes of shipped definitions before global transitions existed (stored conversations pin them)
HASHES_BEFORE = {
    "appointment_scheduler.json": "49d9651f985ab2cd",
    "coffee_order.yaml": "f40c3eb06c79e96c",
    "loan_prequalification.yaml": "36f071b037cac8fd",
    "personal_information_collection.json": "3ced224f5d944c77",
    "simple_greeting.yaml": "8a9ca9bf2966df86",
    "tech_support_triage.yaml": "bd397871b5b82296",
}


@pytest.mark.parametrize("name", sorted(HASHES_BEFORE))
def test_the_content_hash_of_a_definition_without_global_transitions_is_what_it_was(name: str) -> None:
    assert load_fsm_definition(ROOT / "definitions" / name).content_hash == HASHES_BEFORE[name]


def test_no_shipped_definition_without_global_transitions_hashes_the_new_fields() -> None:
    for path in sorted((ROOT / "definitions").glob("*.*")):
        if path.suffix not in (".json", ".yaml") or "global_transitions" in path.read_text(encoding="utf-8"):
            continue
        plain = load_fsm_definition(path)
        assert plain.global_transitions is None and plain.state_groups is None
        spelled_out = FSMDefinition.model_validate(
            {**plain.model_dump(mode="json", exclude={"global_transitions", "state_groups"}), "state_groups": None}
        )
        assert spelled_out.content_hash == plain.content_hash, path.name


def test_global_transitions_change_the_content_hash() -> None:
    assert define(TALK).content_hash != FSMDefinition.model_validate(BASE).content_hash
