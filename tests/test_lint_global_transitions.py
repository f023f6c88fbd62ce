"""fsm-lint on global transitions: the graph checks see them, and the mistakes only they allow are reported."""

from __future__ import annotations

import copy
from typing import Any

from llm_fsm.lint._linter import lint_data


def state(sid: str, *targets: str, **extra: Any) -> dict[str, Any]:
    transitions = [{"target_state": t, "description": f"to {t}"} for t in targets]
    return {"id": sid, "description": sid, "purpose": sid, "transitions": transitions, **extra}


BASE: dict[str, Any] = {
    "name": "shop",
    "description": "d",
    "initial_state": "browse",
    "states": {
        "browse": state("browse", "cart"),
        "cart": state("cart", "done"),
        "person": state("person", "done"),
        "done": state("done"),
    },
}
TALK = {"target_state": "person", "description": "the user asks for a person"}


def doc(*globals_: dict[str, Any], **changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["global_transitions"] = list(globals_)
    data.update(changes)
    return data


def found(data: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(d.code, d.path) for d in lint_data(data).diagnostics]


def test_a_state_only_a_global_transition_leads_to_is_reachable() -> None:
    assert ("FSM007", "$.states.person") in found(copy.deepcopy(BASE))
    assert found(doc(TALK)) == []


def test_a_global_transition_is_a_way_out_of_a_state_for_the_trap_check() -> None:
    data = doc({"target_state": "done", "description": "the user gives up"})
    data["states"]["cart"] = state("cart", "cart")  # its only own transition loops
    data["states"]["browse"] = state("browse", "cart", "person")
    assert not [f for f in found(data) if f[0] == "FSM009"]


def test_a_confirmation_may_name_a_global_transition_that_applies_to_it() -> None:
    confirm = state("cart", "done", confirmation={"on_yes": "done", "on_no": "person"})
    assert found(doc(TALK, states={**BASE["states"], "cart": confirm})) == []
    excluded = doc({**TALK, "except_states": ["cart"]}, states={**BASE["states"], "cart": confirm})
    assert ("FSM018", "$.states.cart.confirmation.on_no") in found(excluded)


def test_a_global_transition_that_applies_in_no_state_is_reported() -> None:
    assert ("FSM059", "$.global_transitions[1]") in found(doc(TALK, {**TALK, "from_states": ["done", "person"]}))


def test_a_global_transition_every_state_already_declares_is_reported_as_shadowed() -> None:
    states = {**BASE["states"], "browse": state("browse", "cart", "person"), "cart": state("cart", "done", "person")}
    assert ("FSM060", "$.global_transitions[0]") in found(doc(TALK, states=states))
    assert "FSM060" not in [code for code, _ in found(doc({**TALK, "priority": 5}, states=states))]


def test_from_states_naming_a_terminal_state_or_the_target_is_reported() -> None:
    findings = found(doc({**TALK, "from_states": ["cart", "done", "person"]}))
    assert ("FSM061", "$.global_transitions[0].from_states[1]") in findings
    assert ("FSM061", "$.global_transitions[0].from_states[2]") in findings


def test_the_conditions_of_a_global_transition_are_checked_like_a_states() -> None:
    guarded = {**TALK, "conditions": [{"description": "angry", "logic": {"==": [{"var": "angyr"}, True]}}]}
    assert ("FSM014", "$.global_transitions[0].conditions[0].logic") in found(doc(guarded))


def test_an_unknown_field_of_a_global_transition_is_a_warning() -> None:
    assert ("FSM003", "$.global_transitions[0].from_state") in found(doc({**TALK, "from_state": ["cart"]}))


def test_a_dead_guard_is_not_called_the_only_way_out_when_a_global_transition_leaves_too() -> None:
    data = doc()
    data["states"]["cart"]["required_context_keys"] = ["email"]
    data["states"]["cart"]["transitions"] = [
        {
            "target_state": "done",
            "description": "email given",
            "conditions": [{"description": "email", "requires_context_keys": ["emial"]}],
        }
    ]
    alone = [d.message for d in lint_data(data).diagnostics if d.code == "FSM041"]
    assert alone and "only way out of 'cart'" in alone[0]
    data["global_transitions"] = [TALK]
    [message] = [d.message for d in lint_data(data).diagnostics if d.code == "FSM041"]
    assert "the transition to 'done' never fires" in message and "only way out" not in message


def test_a_global_transitions_text_is_checked_against_the_keys_set_in_every_state_it_applies_in() -> None:
    data = doc({**TALK, "say": "Connecting you about order {order}."}, context_keys={"order": {"type": "string"}})
    data["states"]["cart"]["required_context_keys"] = ["order"]
    data["states"]["cart"]["transitions"] = [
        {
            "target_state": "done",
            "description": "ordered",
            "conditions": [{"description": "order", "requires_context_keys": ["order"]}],
        }
    ]
    assert ("FSM067", "$.global_transitions[0].say") in found(data)  # from browse, no order is known yet
    data["global_transitions"][0]["from_states"] = ["done_shopping"]
    data["states"]["done_shopping"] = state("done_shopping", "done")
    data["states"]["cart"]["transitions"][0]["target_state"] = "done_shopping"
    assert "FSM067" not in [code for code, _ in found(data)]


def test_a_refusal_on_a_judgment_global_transition_is_never_said() -> None:
    assert ("FSM068", "$.global_transitions[0].refusal") in found(doc({**TALK, "refusal": "Not now."}))
    guarded = {**TALK, "refusal": "Not now.", "conditions": [{"description": "v", "requires_context_keys": ["v"]}]}
    assert "FSM068" not in [code for code, _ in found(doc(guarded, application_context_keys=["v"]))]


def test_a_global_transitions_text_into_a_state_that_chains_on_is_reported_once() -> None:
    data = doc({"target_state": "cart", "description": "to the cart", "say": "Your cart."})
    data["states"]["cart"]["transitions"] = [
        {
            "target_state": "done",
            "description": "x",
            "conditions": [{"description": "v", "requires_context_keys": ["v"]}],
        }
    ]
    data["application_context_keys"] = ["v"]
    assert [p for code, p in found(data) if code == "FSM069"] == ["$.global_transitions[0].say"]
