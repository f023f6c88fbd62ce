"""Human handoff: a person takes the conversation, the engine only records, the bot resumes.

Handed off by the operator API or by reaching a state declared ``handoff: true``; while a person has it,
a turn records the user's message, calls no model and no hook, and answers ``""``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from llm_fsm.errors import HandoffError
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager
from tests.test_operator import SUPPORT, Model, reply, start


def said(fsm: FSMManager, cid: str) -> list[tuple[str, str]]:
    """The transcript as (role, text)."""
    return [(m["role"], m["text"]) for m in fsm.get_conversation_history(cid)]


def handed_off(*turns: dict[str, Any], store: str | None = None) -> tuple[FSMManager, str, Model]:
    fsm, cid, model = start(*turns, store=store)
    fsm.hand_off(cid, "customer asked for a person", actor="alice")
    return fsm, cid, model


def test_hand_off_puts_a_person_in_charge_and_says_who_and_why() -> None:
    fsm, cid, _ = handed_off()
    instance = fsm.get_instance(cid)
    assert instance.mode == "human"
    assert instance.handoff is not None
    assert (instance.handoff.actor, instance.handoff.reason, instance.handoff.from_state) == (
        "alice",
        "customer asked for a person",
        "greeting",
    )
    assert fsm.get_trace(cid)[-1].event == "handoff"


def test_a_message_in_human_mode_calls_no_model_and_returns_an_empty_reply() -> None:
    fsm, cid, model = handed_off()
    calls = len(model.requests)
    assert fsm.process_message(cid, "hello?") == ""
    assert len(model.requests) == calls


def test_a_message_in_human_mode_is_recorded_in_the_transcript() -> None:
    fsm, cid, _ = handed_off()
    fsm.process_message(cid, "is anyone there?")
    assert said(fsm, cid)[-1] == ("user", "is anyone there?")


def test_a_message_in_human_mode_has_a_turn_record_without_model_calls() -> None:
    fsm, cid, _ = handed_off()
    fsm.process_message(cid, "hello?")
    record = fsm.explain(cid)
    assert record.verdict.kind == "human_mode"
    assert record.llm_calls == [] and record.reply == ""
    assert "alice" in record.verdict.reason


def test_the_turn_outcome_says_a_person_has_the_conversation() -> None:
    fsm, cid, _ = handed_off()
    outcome = fsm.process_turn(cid, "hello?")
    assert outcome.mode == "human" and outcome.reply == ""


def test_a_retried_message_id_in_human_mode_is_recorded_once() -> None:
    fsm, cid, _ = handed_off()
    fsm.process_message(cid, "hello?", message_id="m1")
    fsm.process_message(cid, "hello?", message_id="m1")
    assert said(fsm, cid).count(("user", "hello?")) == 1
    assert fsm.get_conversation_history(cid)[-1]["id"] == "m1"


def test_no_hook_runs_in_human_mode() -> None:
    called: list[str] = []
    model = Model()
    fsm = FSMManager(
        llm_interface=FunctionLLM(model),
        hooks={name: lambda event, name=name: called.append(name) for name in ("before_llm", "after_context_update")},
    )
    cid, _ = fsm.start_conversation(SUPPORT)
    fsm.hand_off(cid, "person", actor="alice")
    fsm.process_message(cid, "hello?")
    assert called == []


def test_a_second_hand_off_is_refused() -> None:
    fsm, cid, _ = handed_off()
    with pytest.raises(HandoffError, match="already with a person"):
        fsm.hand_off(cid, "again", actor="bob")


def test_an_operator_message_is_recorded_with_its_own_role() -> None:
    fsm, cid, _ = handed_off()
    fsm.post_operator_message(cid, "Hi, Alice here. Let me look.", actor="alice")
    assert said(fsm, cid)[-1] == ("operator", "Hi, Alice here. Let me look.")
    assert fsm.get_trace(cid)[-1].event == "operator_message"


def test_an_operator_message_while_the_bot_has_the_conversation_is_refused() -> None:
    fsm, cid, _ = start()
    with pytest.raises(HandoffError, match="hand it off"):
        fsm.post_operator_message(cid, "hello", actor="alice")


def test_a_retried_operator_message_id_is_recorded_once() -> None:
    fsm, cid, _ = handed_off()
    fsm.post_operator_message(cid, "One moment.", actor="alice", message_id="op-1")
    fsm.post_operator_message(cid, "One moment.", actor="alice", message_id="op-1")
    assert said(fsm, cid).count(("operator", "One moment.")) == 1
    assert fsm.get_conversation_history(cid)[-1]["id"] == "op-1"


def test_a_user_message_with_the_id_of_an_operator_message_is_not_taken_for_a_retry() -> None:
    # the desk and the user's channel number their messages independently: "42" on each side are two messages
    fsm, cid, _ = handed_off()
    fsm.post_operator_message(cid, "Hi, Alice here.", actor="alice", message_id="42")
    fsm.resume_bot(cid, actor="alice")
    assert fsm.process_message(cid, "thanks, my order is 17", message_id="42") == "turn reply"
    assert said(fsm, cid)[-2:] == [("user", "thanks, my order is 17"), ("assistant", "turn reply")]


def test_resume_bot_hands_the_conversation_back() -> None:
    fsm, cid, _ = handed_off()
    fsm.resume_bot(cid, actor="alice", reason="solved")
    instance = fsm.get_instance(cid)
    assert instance.mode == "bot" and instance.handoff is None
    assert fsm.get_trace(cid)[-1].event == "resume_bot"


def test_resume_bot_in_a_given_state() -> None:
    fsm, cid, _ = handed_off()
    fsm.resume_bot(cid, actor="alice", state="collect_order")
    assert fsm.get_current_state(cid) == "collect_order"


def test_resume_bot_when_no_person_has_the_conversation_is_refused() -> None:
    fsm, cid, _ = start()
    with pytest.raises(HandoffError, match="not handed off"):
        fsm.resume_bot(cid, actor="alice")


def test_after_resume_the_model_sees_the_persons_messages_as_a_human_agents() -> None:
    fsm, cid, model = handed_off(reply("Anything else?"))
    fsm.post_operator_message(cid, "Your refund is on its way.", actor="alice")
    fsm.resume_bot(cid, actor="alice")
    fsm.process_message(cid, "thanks")
    prompt = model.requests[-1].system_prompt
    assert '{"human_agent":"Your refund is on its way."}' in prompt


def test_reaching_a_handoff_state_gives_the_bots_reply_then_a_person_has_it() -> None:
    fsm, cid, model = start(reply("I am connecting you with a colleague.", "escalate"))
    outcome = fsm.process_turn(cid, "I want a human")
    assert outcome.reply == "I am connecting you with a colleague."
    assert outcome.mode == "human"
    instance = fsm.get_instance(cid)
    assert instance.handoff is not None and instance.handoff.actor == "definition"
    calls = len(model.requests)
    assert fsm.process_message(cid, "hello?") == ""
    assert len(model.requests) == calls


def test_streaming_in_human_mode_calls_no_model_and_ends_with_an_empty_reply() -> None:
    fsm, cid, model = handed_off()
    calls = len(model.requests)

    async def stream() -> list[Any]:
        return [event async for event in fsm.astream_message(cid, "hello?")]

    events = asyncio.run(stream())
    assert len(model.requests) == calls
    assert [e.event for e in events] == ["state", "done"]
    assert events[-1].data["reply"] == "" and events[-1].data["mode"] == "human"
    assert events[-1].data["verdict"] == "human_mode"


@pytest.mark.parametrize("kind", ["sqlite", "files"])
def test_durable_stores_keep_the_mode_and_the_handoff(kind: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}" if kind == "sqlite" else f"file://{tmp_path}"
    fsm, cid, _ = handed_off(store=url)
    fsm.process_message(cid, "hello?", message_id="m1")
    fsm.post_operator_message(cid, "Hi.", actor="alice", message_id="op-1")
    again = FSMManager(llm_interface=FunctionLLM(Model()), store=url)
    instance = again.get_instance(cid)
    assert instance.mode == "human" and instance.handoff is not None and instance.handoff.actor == "alice"
    again.post_operator_message(cid, "Hi.", actor="alice", message_id="op-1")  # a retry, from another process
    assert again.process_message(cid, "hello?", message_id="m1") == ""
    assert said(again, cid).count(("user", "hello?")) == 1
    assert said(again, cid).count(("operator", "Hi.")) == 1


def test_a_chain_stops_at_a_handoff_state_even_when_a_guarded_transition_out_of_it_holds() -> None:
    from llm_fsm.definition._model import FSMDefinition

    definition = FSMDefinition.model_validate(
        {
            "name": "chain",
            "description": "d",
            "initial_state": "ask",
            "states": {
                "ask": {
                    "id": "ask",
                    "description": "d",
                    "purpose": "p",
                    "transitions": [
                        {
                            "target_state": "person",
                            "description": "a problem is known",
                            "conditions": [{"description": "known", "requires_context_keys": ["problem"]}],
                        }
                    ],
                },
                "person": {
                    "id": "person",
                    "description": "d",
                    "purpose": "p",
                    "handoff": True,
                    "transitions": [
                        {
                            "target_state": "done",
                            "description": "still known",
                            "conditions": [{"description": "known", "requires_context_keys": ["problem"]}],
                        }
                    ],
                },
                "done": {"id": "done", "description": "d", "purpose": "p", "transitions": []},
            },
        }
    )
    fsm = FSMManager(llm_interface=FunctionLLM(Model(reply("A colleague will help.", "person", problem="leak"))))
    cid, _ = fsm.start_conversation(definition)
    outcome = fsm.process_turn(cid, "my roof leaks")
    assert (outcome.state, outcome.mode) == ("person", "human")
    assert fsm.explain(cid).chained == []


def test_a_value_the_person_offered_and_the_user_accepted_is_grounded_after_resume() -> None:
    fsm, cid, _ = handed_off(reply("Thanks, noted.", order_id="AB1234"))
    fsm.post_operator_message(cid, "I found your order AB1234. Is that the one?", actor="alice")
    fsm.resume_bot(cid, actor="alice")
    fsm.process_message(cid, "yes, that one")
    assert fsm.get_conversation_data(cid).get("order_id") == "AB1234"
