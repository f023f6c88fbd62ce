"""A cancel at the root flow (confirmed first, or a restart) and a plain "no" at a confirmation step."""

from __future__ import annotations

from typing import Any

import pytest

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager
from tests.test_operator import Model, reply, start


def order(**options: Any) -> FSMDefinition:
    return FSMDefinition.model_validate(
        {
            "name": "order",
            "description": "Take a coffee order.",
            "initial_state": "drink",
            "protected_context_keys": ["store_id"],
            "states": {
                "drink": {
                    "id": "drink",
                    "description": "d",
                    "purpose": "Ask which drink",
                    "required_context_keys": ["drink"],
                    "transitions": [{"target_state": "size", "description": "drink known"}],
                },
                "size": {
                    "id": "size",
                    "description": "s",
                    "purpose": "Ask which size",
                    "transitions": [{"target_state": "done", "description": "size known"}],
                },
                "done": {"id": "done", "description": "e", "purpose": "Thank", "transitions": []},
            },
            **options,
        }
    )


def ordering(*turns: dict[str, Any], **options: Any) -> tuple[FSMManager, str, Model]:
    model = Model(*turns)
    fsm = FSMManager(llm_interface=FunctionLLM(model))
    cid, _ = fsm.start_conversation(order(**options), {"store_id": "S1"})
    return fsm, cid, model


def test_a_cancel_at_the_root_is_confirmed_before_the_conversation_ends() -> None:
    fsm, cid, model = ordering(reply("Bye.", intent="cancel"))
    fsm.process_message(cid, "cancel")
    instance = fsm.get_instance(cid)
    assert not instance.ended and instance.pending_cancel
    assert fsm.explain(cid).verdict.kind == "cancel_pending"
    assert model.requests[-1].purpose == "regenerate"
    assert "really want to cancel" in model.requests[-1].system_prompt


def test_a_confirm_after_the_question_ends_the_conversation_as_cancelled() -> None:
    fsm, cid, _ = ordering(reply("Bye.", intent="cancel"), reply("Cancelled, bye.", intent="confirm"))
    fsm.process_message(cid, "cancel")
    fsm.process_message(cid, "yes")
    assert fsm.get_instance(cid).status == "cancelled"
    assert fsm.explain(cid).verdict.kind == "conversation_cancelled"


def test_while_a_cancel_waits_the_model_is_offered_confirm_and_deny() -> None:
    fsm, cid, model = ordering(reply("Bye.", intent="cancel"), reply("Sure.", intent="deny"))
    fsm.process_message(cid, "cancel")
    fsm.process_message(cid, "no no")
    turn = [r for r in model.requests if r.purpose == "turn"][-1]
    assert "the user answers yes to your question whether they want to cancel" in turn.system_prompt


@pytest.mark.parametrize("intent", ["continue", "deny"])
def test_anything_but_confirm_clears_the_pending_cancel_and_carries_on(intent: str) -> None:
    fsm, cid, _ = ordering(reply("Bye.", intent="cancel"), reply("Which size?", "size", intent=intent, drink="latte"))
    fsm.process_message(cid, "cancel")
    fsm.process_message(cid, "no, a latte please")
    instance = fsm.get_instance(cid)
    assert not instance.ended and not instance.pending_cancel
    assert instance.current_state == "size"
    assert "cancel_declined" in [e.event for e in instance.trace]


def test_confirm_cancel_false_ends_at_once() -> None:
    fsm, cid, _ = ordering(reply("Bye.", intent="cancel"), confirm_cancel=False)
    fsm.process_message(cid, "cancel")
    assert fsm.get_instance(cid).status == "cancelled"


def test_on_cancel_restart_goes_back_to_the_start_with_the_users_data_cleared() -> None:
    fsm, cid, model = ordering(
        reply("Which size?", "size", drink="latte"), reply("ok", intent="cancel"), on_cancel="restart"
    )
    fsm.process_message(cid, "a latte")
    fsm.process_message(cid, "cancel that")
    instance = fsm.get_instance(cid)
    assert instance.current_state == "drink" and not instance.ended
    assert instance.context.data == {"store_id": "S1"}  # what the application provided is kept
    assert fsm.explain(cid).verdict.kind == "conversation_restarted"
    assert "Cancelled. How else can I help?" in model.requests[-1].system_prompt


# --- "no" at a confirmation ------------------------------------------------------------------


def at_confirm(*turns: dict[str, Any]) -> tuple[FSMManager, str, Model]:
    fsm, cid, model = start(*turns)
    fsm.set_context(cid, {"order_id": "AB1234", "email": "a@example.com"}, actor="setup")
    fsm.force_state(cid, "confirm", "setup", actor="setup")
    return fsm, cid, model


def test_a_plain_no_stays_and_asks_what_to_change_naming_the_changeable_keys() -> None:
    fsm, cid, model = at_confirm(reply("Okay.", intent="deny"))
    fsm.process_message(cid, "no")
    assert fsm.get_current_state(cid) == "confirm"
    assert model.requests[-1].purpose == "regenerate"
    assert "Ask in one short sentence what they would like to change. They may change: email." in (
        model.requests[-1].system_prompt
    )


def test_a_value_outside_the_changeable_keys_is_refused_and_recorded() -> None:
    fsm, cid, _ = at_confirm(reply("Okay.", intent="deny", order_id="CD9999"))
    fsm.process_message(cid, "no, the order is CD9999")
    assert fsm.get_conversation_data(cid)["order_id"] == "AB1234"
    change = next(c for c in fsm.explain(cid).context_changes if c.key == "order_id")
    assert (change.applied, change.rule) == (False, "not_changeable")


def test_a_changeable_value_is_changed_and_confirmed_again() -> None:
    fsm, cid, _ = at_confirm(reply("So b@example.com?", intent="deny", email="b@example.com"))
    fsm.process_message(cid, "no, my email is b@example.com")
    assert fsm.get_conversation_data(cid)["email"] == "b@example.com"
    assert fsm.get_current_state(cid) == "confirm"
