"""The prover explores global transitions like a state's own: what they reach is reachable, a way out they give is
progress, and a gate the model alone can open on one is found."""

from __future__ import annotations

import copy
from typing import Any

from test_prove import FORM, definition, findings, never_leaves

from llm_fsm.lint import prove

PERSON_STATE = {"id": "person", "description": "A person", "purpose": "Hand over", "transitions": []}
TALK = {"target_state": "person", "description": "The user asks for a person"}


def with_person(data: dict[str, Any], *globals_: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(data)
    data["states"]["person"] = PERSON_STATE
    data["global_transitions"] = list(globals_)
    return data


def test_a_state_only_a_global_transition_leads_to_is_reachable() -> None:
    report = prove(definition(with_person(FORM, TALK)))
    assert ((), "person") in report.reachable
    assert report.complete


def test_a_global_transition_out_of_a_state_whose_own_exit_never_holds_is_progress() -> None:
    stuck = never_leaves("amount", "confirm")
    assert prove(definition(stuck)).status("progress") == "failed"
    report = prove(definition(with_person(stuck, TALK)))
    assert findings(report, "progress") == []


def test_a_guarded_global_transition_the_model_alone_can_open_is_a_model_gate() -> None:
    data = with_person(
        FORM,
        {
            "target_state": "person",
            "description": "VIP",
            "conditions": [{"description": "vip", "logic": {"==": [{"var": "vip"}, True]}}],
            "from_states": ["confirm"],
        },
    )
    data["states"]["person"] = {**PERSON_STATE, "handoff": True}
    data["context_keys"]["vip"] = {"type": "boolean"}
    report = prove(definition(data))
    assert [(f.code, f.state, f.transition) for f in findings(report, "no_model_gate")] == [
        ("FSM044", "confirm", "person")
    ]
