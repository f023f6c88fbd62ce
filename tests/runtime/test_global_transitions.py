"""Global transitions in a conversation, the same through every driver.

A global transition is one more candidate of every state it applies to: the model sees it like the state's own,
the same decision rule judges it (judgment only by the model, guarded ones fire on their own, priority decides,
the state's own wins a tie), chaining follows it, and a confirmation's on_no may name it. A sub-flow has its own
global transitions: its parent's never apply inside it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from llm_fsm.definition import FSMDefinition
from llm_fsm.engine._records import LLMRequest

from .drivers import Driver, last_record, state_of
from .models import Metered, Model, manager_for, reply


def state(sid: str, *transitions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": sid, "description": sid, "purpose": f"purpose of {sid}", "transitions": list(transitions), **extra}


def to(target: str, *, logic: Any = None, priority: int = 100, description: str | None = None) -> dict[str, Any]:
    transition: dict[str, Any] = {"target_state": target, "description": description or f"go to {target}"}
    if logic is not None:
        transition["conditions"] = [{"description": f"{target} holds", "logic": logic}]
    if priority != 100:
        transition["priority"] = priority
    return transition


PERSON = {"target_state": "person", "description": "The user asks to talk to a person"}

SHOP: dict[str, Any] = {
    "name": "shop",
    "description": "Buy something",
    "initial_state": "browse",
    "states": {
        "browse": state("browse", to("cart")),
        "cart": state("cart", to("pay")),
        "pay": state(
            "pay",
            to("done"),
            to("cart"),
            confirmation={"keys": ["item"], "on_yes": "done", "on_no": "person"},
        ),
        "person": state("person", to("done")),
        "done": state("done"),
    },
    "global_transitions": [PERSON],
}


def shop(**changes: Any) -> FSMDefinition:
    doc = copy.deepcopy(SHOP)
    doc.update(changes)
    return FSMDefinition.model_validate(doc)


def start(driver: Driver, definition: FSMDefinition, *turns: dict[str, Any]) -> tuple[Any, str, Metered]:
    model = Metered(Model(*turns))
    manager = manager_for(model, definition=definition)
    cid, _ = driver.start(manager, "shop")
    return manager, cid, model


def test_the_model_can_take_a_global_transition_from_a_state_that_does_not_declare_it(driver: Driver) -> None:
    manager, cid, _ = start(driver, shop(), reply("Let me find someone.", "person"))
    sent = driver.send(manager, cid, "I want to talk to a human")
    assert (sent.state, sent.verdict) == ("person", "proposal_accepted")
    assert last_record(manager, cid).verdict.transition_index == 1  # after browse's own transition
    assert shop().transition_path("browse", 1) == ("global_transitions", 0)


def test_the_model_is_offered_a_global_transition_like_the_states_own(driver: Driver) -> None:
    manager, cid, model = start(driver, shop(), reply("Sure.", "cart"))
    driver.send(manager, cid, "show me the cart")
    request: LLMRequest = [r for r in model.requests if r.purpose == "turn"][-1]
    assert "The user asks to talk to a person" in request.system_prompt
    targets = request.response_schema["properties"]["transition"]["properties"]["target_state"]["enum"]
    assert targets == ["browse", "cart", "person"]


def test_a_global_transition_in_an_excluded_state_is_refused(driver: Driver) -> None:
    definition = shop(global_transitions=[{**PERSON, "except_states": ["browse"]}])
    manager, cid, _ = start(driver, definition, reply("Let me find someone.", "person"))
    sent = driver.send(manager, cid, "I want to talk to a human")
    assert (sent.state, sent.verdict) == ("browse", "stay_rejected")


def test_a_guarded_global_transition_fires_on_its_own_when_its_conditions_hold(driver: Driver) -> None:
    angry = {**to("person", logic={"==": [{"var": "angry"}, True]}), "description": "The user is angry"}
    manager, cid, _ = start(driver, shop(global_transitions=[angry]), reply("Hm.", "", angry=True))
    sent = driver.send(manager, cid, "THIS IS OUTRAGEOUS")
    assert (sent.state, sent.verdict) == ("person", "guarded_fallback")


def test_a_states_own_guarded_transition_wins_a_tie_of_priority_with_a_global_one(driver: Driver) -> None:
    ready = {"==": [{"var": "ready"}, True]}
    states = {**SHOP["states"], "browse": state("browse", to("cart", logic=ready))}
    only_here = {**to("person", logic=ready), "from_states": ["browse"]}  # (from cart it would chain on)
    definition = shop(states=states, global_transitions=[only_here])
    manager, cid, _ = start(driver, definition, reply("Ok.", "", ready=True))
    assert driver.send(manager, cid, "ready").state == "cart"


def test_a_global_transition_of_better_priority_beats_a_states_own(driver: Driver) -> None:
    ready = {"==": [{"var": "ready"}, True]}
    states = {**SHOP["states"], "browse": state("browse", to("cart", logic=ready))}
    definition = shop(states=states, global_transitions=[to("person", logic=ready, priority=10)])
    manager, cid, _ = start(driver, definition, reply("Ok.", "", ready=True))
    assert driver.send(manager, cid, "ready").state == "person"


def test_a_judgment_global_transition_never_fires_without_the_model(driver: Driver) -> None:
    manager, cid, _ = start(driver, shop(), reply("Ok.", ""))
    assert driver.send(manager, cid, "hello").state == "browse"


def test_chaining_follows_a_guarded_global_transition_that_already_holds(driver: Driver) -> None:
    blocked = to("person", logic={"==": [{"var": "blocked"}, True]})
    manager, cid, _ = start(driver, shop(global_transitions=[blocked]), reply("To the cart.", "cart", blocked=True))
    driver.send(manager, cid, "cart please")
    record = last_record(manager, cid)
    assert state_of(manager, cid) == "person"
    assert [(s.kind, s.target_state) for s in record.chained] == [("chained", "person")]


def test_a_confirmations_on_no_may_name_a_global_transition(driver: Driver) -> None:
    manager, cid, _ = start(
        driver, shop(), reply("Cart.", "cart", item="lamp"), reply("Pay?", "pay"), reply("Ok.", "", intent="deny")
    )
    driver.send(manager, cid, "cart")
    driver.send(manager, cid, "pay")
    sent = driver.send(manager, cid, "no")
    assert sent.state == "person"


def test_a_global_transition_is_never_a_way_out_of_a_terminal_state() -> None:
    assert shop().transitions_from("done") == []


def test_a_parents_global_transitions_do_not_apply_inside_its_sub_flow(driver: Driver) -> None:
    child = FSMDefinition.model_validate(
        {
            "name": "child",
            "description": "A sub-flow",
            "initial_state": "ask",
            "states": {"ask": state("ask", to("end")), "end": state("end")},
        }
    )
    flows = [{"name": "gift", "definition": "child", "description": "The user wants a gift wrap"}]
    parent = shop(flows=flows)
    model = Metered(
        Model(
            reply("Sure.", "", intent="start_flow") | {"flow": "gift"},
            reply("Let me find someone.", "person"),
        )
    )
    manager = manager_for(model, definition=parent)
    manager.fsm_loader = lambda fsm_id: child if fsm_id == "child" else parent  # type: ignore[method-assign]
    if driver.over_http:
        pytest.skip("the HTTP driver serves definitions by id from its own table")
    cid, _ = driver.start(manager, "shop")
    driver.send(manager, cid, "gift wrap please")
    assert state_of(manager, cid) == "ask"
    sent = driver.send(manager, cid, "I want a person")
    assert (sent.state, sent.verdict) == ("ask", "stay_rejected")


def test_a_global_transition_says_its_approved_text_when_taken(driver: Driver) -> None:
    worded = {**PERSON, "say": "A colleague will take over now."}
    manager, cid, _ = start(driver, shop(global_transitions=[worded]), reply("UNAPPROVED", "person"))
    sent = driver.send(manager, cid, "a person please")
    assert (sent.state, sent.reply) == ("person", "A colleague will take over now.")


def test_a_global_transitions_refusal_is_said_when_the_move_along_it_is_refused(driver: Driver) -> None:
    guarded = {
        **to("person", logic={"==": [{"var": "verified"}, True]}),
        "refusal": "I can connect you once you are verified.",
    }
    manager, cid, _ = start(driver, shop(global_transitions=[guarded]), reply("UNAPPROVED", "person"))
    sent = driver.send(manager, cid, "a person please")
    assert (sent.state, sent.verdict, sent.reply) == (
        "browse",
        "stay_rejected",
        "I can connect you once you are verified.",
    )
