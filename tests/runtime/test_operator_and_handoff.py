"""Operators and people: changes from outside a turn, and the conversation a person has, through every driver.

Over HTTP an operator's actor is recorded as ``desk/<actor>`` (the key's name first), so actors are checked by
the person's name being in it.
"""

from __future__ import annotations

import pytest

from llm_fsm.errors import ContextError, HandoffError, UnknownStateError

from .drivers import Driver, data_of, instance_of, last_record, said, state_of, trace_of
from .models import SUPPORT, Metered, Model, manager_for, reply

# --- operator changes -----------------------------------------------------------------------------------------


def test_force_state_puts_the_conversation_in_any_declared_state_and_records_who(driver: Driver) -> None:
    manager = manager_for()
    cid, _ = driver.start(manager, SUPPORT)
    driver.force_state(manager, cid, "confirm", "customer called in", actor="alice")
    assert state_of(manager, cid) == "confirm"
    event = trace_of(manager, cid)[-1]
    assert event.event == "operator_force_state" and "alice" in event.data["actor"]


def test_force_state_to_an_undeclared_state_is_refused_and_changes_nothing(driver: Driver) -> None:
    manager = manager_for()
    cid, _ = driver.start(manager, SUPPORT)
    version = instance_of(manager, cid).version
    with pytest.raises(UnknownStateError):
        driver.force_state(manager, cid, "nowhere", "a typo", actor="alice")
    assert instance_of(manager, cid).version == version


def test_force_state_to_a_terminal_state_ends_the_conversation(driver: Driver) -> None:
    manager = manager_for()
    cid, _ = driver.start(manager, SUPPORT)
    driver.force_state(manager, cid, "resolved", "solved on the phone", actor="alice")
    assert instance_of(manager, cid).ended


def test_set_context_writes_a_protected_key_and_records_who(driver: Driver) -> None:
    manager = manager_for()
    cid, _ = driver.start(manager, SUPPORT)
    driver.set_context(manager, cid, {"customer_tier": "gold"}, actor="alice", reason="from the CRM")
    assert data_of(manager, cid)["customer_tier"] == "gold"
    assert "alice" in trace_of(manager, cid)[-1].data["actor"]


def test_set_context_refuses_a_value_that_breaks_its_declaration(driver: Driver) -> None:
    manager = manager_for()
    cid, _ = driver.start(manager, SUPPORT)
    with pytest.raises(ContextError):
        driver.set_context(manager, cid, {"email": "not an email"}, actor="alice")
    assert "email" not in data_of(manager, cid)


def test_an_application_update_writes_a_protected_key(driver: Driver) -> None:
    manager = manager_for()
    cid, _ = driver.start(manager, SUPPORT)
    driver.update_context(manager, cid, {"customer_tier": "gold"})
    assert data_of(manager, cid)["customer_tier"] == "gold"


def test_an_ended_conversation_can_still_be_read(driver: Driver) -> None:
    manager = manager_for()
    cid, opening = driver.start(manager, SUPPORT)
    driver.end(manager, cid)
    assert instance_of(manager, cid).ended and said(manager, cid) == [("assistant", opening)]


# --- a person has the conversation -------------------------------------------------------------------------


def test_hand_off_gives_the_conversation_to_a_person(driver: Driver) -> None:
    manager = manager_for()
    cid, _ = driver.start(manager, SUPPORT)
    driver.hand_off(manager, cid, "the customer asked for a person", actor="alice")
    instance = instance_of(manager, cid)
    assert instance.mode == "human" and instance.handoff is not None
    assert "alice" in instance.handoff.actor and instance.handoff.from_state == "greeting"


def test_a_message_while_a_person_has_it_is_recorded_answers_nothing_and_calls_no_model(driver: Driver) -> None:
    model = Metered(Model())
    manager = manager_for(model)
    cid, _ = driver.start(manager, SUPPORT)
    driver.hand_off(manager, cid, "the customer asked for a person", actor="alice")
    sent = driver.send(manager, cid, "is anyone there?")
    assert (sent.reply, sent.mode, sent.verdict) == ("", "human", "human_mode")
    assert model.calls("turn") == 0
    assert said(manager, cid)[-1] == ("user", "is anyone there?")
    assert last_record(manager, cid).llm_calls == []


def test_a_second_hand_off_is_refused(driver: Driver) -> None:
    manager = manager_for()
    cid, _ = driver.start(manager, SUPPORT)
    driver.hand_off(manager, cid, "the customer asked for a person", actor="alice")
    with pytest.raises(HandoffError):
        driver.hand_off(manager, cid, "again", actor="bob")


def test_the_persons_reply_is_recorded_as_the_operators(driver: Driver) -> None:
    manager = manager_for()
    cid, _ = driver.start(manager, SUPPORT)
    driver.hand_off(manager, cid, "the customer asked for a person", actor="alice")
    driver.post_operator_message(manager, cid, "Hi, Alice here.", actor="alice", message_id="op-1")
    driver.post_operator_message(manager, cid, "Hi, Alice here.", actor="alice", message_id="op-1")  # a retry
    assert said(manager, cid)[-1] == ("operator", "Hi, Alice here.")
    assert said(manager, cid).count(("operator", "Hi, Alice here.")) == 1


def test_resume_bot_gives_the_conversation_back_and_the_model_answers_again(driver: Driver) -> None:
    model = Metered(Model(reply("Back with you.")))
    manager = manager_for(model)
    cid, _ = driver.start(manager, SUPPORT)
    driver.hand_off(manager, cid, "the customer asked for a person", actor="alice")
    driver.resume_bot(manager, cid, actor="alice")
    sent = driver.send(manager, cid, "hello?")
    assert (sent.reply, sent.mode) == ("Back with you.", "bot") and model.calls("turn") == 1


def test_resume_bot_when_no_person_has_it_is_refused(driver: Driver) -> None:
    manager = manager_for()
    cid, _ = driver.start(manager, SUPPORT)
    with pytest.raises(HandoffError):
        driver.resume_bot(manager, cid, actor="alice")


def test_a_turn_that_reaches_a_handoff_state_answers_and_then_a_person_has_it(driver: Driver) -> None:
    model = Metered(Model(reply("A colleague will take over.", "escalate")))
    manager = manager_for(model)
    cid, _ = driver.start(manager, SUPPORT)
    sent = driver.send(manager, cid, "I want a person")
    assert (sent.state, sent.reply, sent.mode) == ("escalate", "A colleague will take over.", "human")
    assert driver.send(manager, cid, "hello?").reply == "" and model.calls("turn") == 1
