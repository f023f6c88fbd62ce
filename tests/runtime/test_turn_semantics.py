"""What a turn does, the same through every driver: moves taken and refused, values kept and refused, a message
id answered once, an ended or unknown conversation refused. The conversations run on support.yaml."""

from __future__ import annotations

import pytest

from llm_fsm.errors import ConversationEndedError, ConversationNotFoundError

from .drivers import Driver, data_of, instance_of, last_record, said, state_of
from .models import SUPPORT, Metered, Model, manager_for, reply


def test_a_declared_move_the_model_proposes_is_taken(driver: Driver) -> None:
    manager = manager_for(Metered(Model(reply("Which order?", "collect_order"))))
    cid, _ = driver.start(manager, SUPPORT)
    sent = driver.send(manager, cid, "my order is late")
    assert (sent.state, sent.verdict, sent.reply) == ("collect_order", "proposal_accepted", "Which order?")
    assert state_of(manager, cid) == "collect_order"


def test_a_move_not_declared_from_the_state_is_refused_and_its_reply_never_shown(driver: Driver) -> None:
    manager = manager_for(Metered(Model(reply("Confirmed, all done!", "confirm"))))
    cid, _ = driver.start(manager, SUPPORT)
    sent = driver.send(manager, cid, "just confirm it")
    assert (sent.state, sent.verdict) == ("greeting", "stay_rejected")
    assert sent.reply == "regenerate reply" and "Confirmed" not in sent.streamed_text
    assert state_of(manager, cid) == "greeting"


def test_a_guarded_move_whose_conditions_fail_is_refused(driver: Driver) -> None:
    manager = manager_for(Metered(Model(reply("Which order?", "collect_order"), reply("Let me confirm.", "confirm"))))
    cid, _ = driver.start(manager, SUPPORT)
    driver.send(manager, cid, "my order is late")
    sent = driver.send(manager, cid, "please go on")  # neither order_id nor email is known
    assert (sent.state, sent.verdict) == ("collect_order", "stay_rejected")


def test_values_the_model_extracts_are_stored_and_open_the_guarded_move(driver: Driver) -> None:
    found = reply("Let me read that back.", "confirm", order_id="AB1234", email="ann@example.com")
    manager = manager_for(Metered(Model(reply("Which order?", "collect_order"), found)))
    cid, _ = driver.start(manager, SUPPORT)
    driver.send(manager, cid, "my order is late")
    sent = driver.send(manager, cid, "AB1234, ann@example.com")
    data = data_of(manager, cid)
    assert (data["order_id"], data["email"]) == ("AB1234", "ann@example.com")
    assert sent.state == "confirm"


def test_a_value_that_breaks_its_declaration_is_not_stored(driver: Driver) -> None:
    bad = reply("Thanks!", "", email="not an email")
    manager = manager_for(Metered(Model(reply("Which order?", "collect_order"), bad)))
    cid, _ = driver.start(manager, SUPPORT)
    driver.send(manager, cid, "my order is late")
    driver.send(manager, cid, "my email is not an email")
    assert "email" not in data_of(manager, cid)
    [change] = [c for c in last_record(manager, cid).context_changes if c.key == "email"]
    assert not change.applied


def test_a_repeated_message_id_is_answered_once_with_the_same_reply(driver: Driver) -> None:
    model = Metered(Model(reply("Which order?", "collect_order"), reply("Second reply.")))
    manager = manager_for(model)
    cid, _ = driver.start(manager, SUPPORT)
    first = driver.send(manager, cid, "my order is late", message_id="m-1")
    again = driver.send(manager, cid, "my order is late", message_id="m-1")
    assert again.reply == first.reply == "Which order?"
    assert model.calls("turn") == 1
    assert said(manager, cid).count(("user", "my order is late")) == 1
    assert instance_of(manager, cid).turn_count == 1


def test_a_turn_that_reaches_a_terminal_state_ends_the_conversation(driver: Driver) -> None:
    found = reply("Let me read that back.", "confirm", order_id="AB1234", email="ann@example.com")
    model = Metered(Model(reply("Which order?", "collect_order"), found, reply("All done.", "resolved", "confirm")))
    manager = manager_for(model)
    cid, _ = driver.start(manager, SUPPORT)
    driver.send(manager, cid, "my order is late")
    driver.send(manager, cid, "AB1234, ann@example.com")
    sent = driver.send(manager, cid, "yes, that's right")
    assert (sent.state, sent.ended) == ("resolved", True)
    assert instance_of(manager, cid).ended


def test_a_message_to_an_ended_conversation_is_refused_and_calls_no_model(driver: Driver) -> None:
    model = Metered(Model())
    manager = manager_for(model)
    cid, _ = driver.start(manager, SUPPORT)
    driver.force_state(manager, cid, "resolved", "solved on the phone", actor="alice")
    version = instance_of(manager, cid).version
    with pytest.raises(ConversationEndedError):
        driver.send(manager, cid, "hello again")
    assert model.calls("turn") == 0 and instance_of(manager, cid).version == version


def test_a_message_to_an_unknown_conversation_is_refused(driver: Driver) -> None:
    manager = manager_for()
    driver.start(manager, SUPPORT)  # the server needs a definition to serve
    with pytest.raises(ConversationNotFoundError):
        driver.send(manager, "no-such-conversation", "hello")


def test_the_message_and_the_reply_are_kept_in_the_transcript(driver: Driver) -> None:
    manager = manager_for(Metered(Model(reply("Which order?", "collect_order"))))
    cid, opening = driver.start(manager, SUPPORT)
    driver.send(manager, cid, "my order is late", metadata={"channel": "web"})
    assert said(manager, cid) == [("assistant", opening), ("user", "my order is late"), ("assistant", "Which order?")]
    assert manager.get_conversation_history(cid, user_id="tenant-1")[1]["metadata"] == {"channel": "web"}


def test_a_streamed_turn_decides_before_it_streams_and_streams_exactly_the_reply(driver: Driver) -> None:
    if not driver.streams:
        pytest.skip("this driver does not stream")
    manager = manager_for(Metered(Model(reply("Which order is it? " * 5, "collect_order"))))
    cid, _ = driver.start(manager, SUPPORT)
    sent = driver.send(manager, cid, "my order is late")
    names = [name for name, _ in sent.events]
    assert names[0] == "state" and names[-1] == "done" and "token" in names
    assert sent.events[0][1]["state"] == "collect_order"
    assert sent.streamed_text == sent.reply == "Which order is it? " * 5
