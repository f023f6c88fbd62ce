"""Approved wording on transitions and refusals, the same through every driver: the text the user reads (and, when
streamed, the only text that streams) is the transition's or the refusal's, filled from the context."""

from __future__ import annotations

from typing import Any

from llm_fsm.definition import FSMDefinition
from tests.test_approved_wording import Model, move
from tests.test_transition_wording import CHAIN, NEED_DATE, TRIP

from .drivers import Driver, said, state_of
from .models import Metered, manager_for


def conversation(driver: Driver, definition: dict[str, Any], *turns: dict[str, Any]) -> tuple[Any, str, Metered]:
    model = Metered(Model(list(turns), ["hi", "UNAPPROVED rewrite"]))
    manager = manager_for(model, definition=FSMDefinition.model_validate(definition))
    cid, _ = driver.start(manager, str(definition["name"]))
    return manager, cid, model


def test_a_transitions_text_is_the_reply_when_it_is_taken(driver: Driver) -> None:
    manager, cid, _ = conversation(driver, TRIP, move("UNAPPROVED", "done", date="2027-05-03", seats=2))
    sent = driver.send(manager, cid, "2 seats on the 3rd of May")
    assert sent.reply == "Booked 2 seats on 2027-05-03." and sent.state == "done"
    if driver.streams:
        assert sent.streamed_text == sent.reply
    assert said(manager, cid)[-1] == ("assistant", sent.reply)


def test_a_refusal_is_the_reply_when_the_move_is_refused(driver: Driver) -> None:
    manager, cid, model = conversation(driver, TRIP, move("UNAPPROVED", "done", seats=2))
    sent = driver.send(manager, cid, "2 seats")
    assert sent.reply == NEED_DATE and sent.verdict == "stay_rejected"
    assert state_of(manager, cid) == "ask" and model.calls("regenerate") == 0
    if driver.streams:
        assert sent.streamed_text == NEED_DATE


def test_after_chaining_the_last_steps_text_is_the_reply(driver: Driver) -> None:
    manager, cid, _ = conversation(driver, CHAIN, move("UNAPPROVED", "b", x="X", y="Y"))
    sent = driver.send(manager, cid, "X and Y")
    assert (sent.reply, sent.state) == ("Into c with Y.", "c")
