"""Sub-flows, digressions, cancellation, corrections and confirmation (the Soni seed's patterns).

Each test plays a scripted conversation on definitions/flight_booking.yaml, whose
``check_booking`` sub-flow lives in definitions/flows/, and asserts the state, the
stack, the data and the trace.
"""

from pathlib import Path

import pytest

from llm_fsm.llm.fakes import ScriptedLLM
from llm_fsm.manager import FSMManager

BOOKING = str(Path(__file__).resolve().parents[1] / "definitions" / "flight_booking.yaml")


def say(message, target="", intent="continue", flow=None, **update):
    reply = {"intent": intent, "transition": {"target_state": target, "context_update": update}, "message": message}
    if flow:
        reply["flow"] = flow
    return reply


def start(*replies, **kwargs):
    llm = ScriptedLLM([say("Where do you fly from?"), *replies])
    fsm = FSMManager(llm_interface=llm, **kwargs)
    cid, _ = fsm.start_conversation(BOOKING)
    return fsm, cid, llm


def events(fsm, cid):
    return [e.event for e in fsm.get_trace(cid)]


def test_slot_value_moves_the_flow_on():
    fsm, cid, _ = start(say("And where to?", "collect_destination", origin="Oslo"))
    fsm.process_message(cid, "Oslo")
    assert fsm.get_current_state(cid) == "collect_destination"
    assert fsm.get_instance(cid).stack == []


@pytest.mark.parametrize("question", ["What cities do you fly to?", "help", "Why do you need my city?"])
def test_a_digression_is_answered_without_changing_state_or_stack(question):
    fsm, cid, llm = start(
        say("Oslo, London, Paris, New York. Where do you fly from?", "collect_destination", intent="digression")
    )
    reply = fsm.process_message(cid, question)
    assert reply.startswith("Oslo, London")
    assert fsm.get_current_state(cid) == "collect_origin"
    assert fsm.explain(cid).verdict.kind == "digression"
    assert "digression" in events(fsm, cid)
    assert "We fly between Oslo" in llm.requests[-1].system_prompt  # the definition's knowledge is offered


def test_too_many_digressions_in_a_row_steer_back():
    fsm, cid, llm = start(
        say("a", intent="digression"),
        say("b", intent="digression"),
        say("c", intent="digression"),
        say("Let's get back to it: where do you fly from?"),
    )
    for q in ["q1", "q2", "q3"]:
        reply = fsm.process_message(cid, q)
    assert reply == "Let's get back to it: where do you fly from?"
    assert "3 side questions in a row" in llm.requests[-1].system_prompt


def test_intent_change_starts_the_declared_sub_flow_and_pauses_the_parent():
    fsm, cid, llm = start(
        say("Sure.", intent="start_flow", flow="check_booking"),
        say("What is your booking reference?"),
    )
    reply = fsm.process_message(cid, "Actually, can I check my booking first?")
    instance = fsm.get_instance(cid)
    assert reply == "What is your booking reference?"
    assert instance.stack == ["check_booking"]
    assert instance.current_state == "ask_reference"
    assert instance.flow_stack[0].current_state == "collect_origin" and instance.flow_stack[0].status == "paused"
    assert "push" in events(fsm, cid)


def test_a_completed_sub_flow_hands_its_outputs_back_and_the_parent_resumes_where_it_was():
    fsm, cid, _ = start(
        say("Sure, where to?", "collect_destination", origin="Oslo"),
        say("ok", intent="start_flow", flow="check_booking"),
        say("Reference?"),
        say("Booking BK-1 is confirmed.", "reported", booking_ref="BK-1"),
        say("BK-1 is on time. Now, where do you fly to?"),
    )
    fsm.process_message(cid, "Oslo")
    fsm.process_message(cid, "check my booking")
    reply = fsm.process_message(cid, "BK-1")
    instance = fsm.get_instance(cid)
    assert instance.stack == []
    assert instance.current_state == "collect_destination"
    assert instance.context.data == {"origin": "Oslo", "last_checked_booking": "BK-1"}
    assert reply == "BK-1 is on time. Now, where do you fly to?"
    archived = instance.completed_flows[-1]
    assert (archived.flow_name, archived.status, archived.outputs, archived.data) == (
        "check_booking",
        "completed",
        {"last_checked_booking": "BK-1"},
        {},
    )


def test_sub_flow_data_is_its_own_and_the_parents_data_stays_intact():
    fsm, cid, _ = start(
        say("Sure, where to?", "collect_destination", origin="Oslo"),
        say("ok", intent="start_flow", flow="check_booking"),
        say("Reference?"),
    )
    fsm.process_message(cid, "Oslo")
    fsm.process_message(cid, "check my booking")
    instance = fsm.get_instance(cid)
    assert instance.context.data == {}
    assert instance.flow_stack[0].data == {"origin": "Oslo"}


def test_cancel_pops_the_sub_flow_and_the_parent_repeats_its_question():
    fsm, cid, _ = start(
        say("ok", intent="start_flow", flow="check_booking"),
        say("Reference?"),
        say("Cancelled.", intent="cancel"),
        say("No problem. Where do you fly from?"),
    )
    fsm.process_message(cid, "check my booking")
    reply = fsm.process_message(cid, "never mind")
    instance = fsm.get_instance(cid)
    assert reply == "No problem. Where do you fly from?"
    assert instance.stack == [] and instance.current_state == "collect_origin"
    assert instance.completed_flows[-1].status == "cancelled"
    assert fsm.explain(cid).verdict.kind == "flow_cancelled"


def test_cancel_at_the_bottom_ends_the_conversation_as_cancelled_once_confirmed():
    fsm, cid, _ = start(
        say("Okay, cancelled.", intent="cancel"),
        say("Do you really want to cancel the booking?"),
        say("Okay, cancelled.", intent="confirm"),
    )
    fsm.process_message(cid, "I want to cancel")
    assert not fsm.is_conversation_ended(cid)  # confirm_cancel (the default) asks first
    fsm.process_message(cid, "yes")
    instance = fsm.get_instance(cid)
    assert instance.status == "cancelled" and fsm.is_conversation_ended(cid)


def test_resume_goes_back_to_a_paused_flow_cancelling_what_is_above():
    fsm, cid, _ = start(
        say("ok", intent="start_flow", flow="check_booking"),
        say("Reference?"),
        say("Back to booking.", intent="resume_flow", flow="Flight Booking"),
        say("Where do you fly from?"),
    )
    fsm.process_message(cid, "check my booking")
    fsm.process_message(cid, "go back to booking")
    instance = fsm.get_instance(cid)
    assert instance.stack == [] and instance.current_state == "collect_origin"
    assert fsm.explain(cid).verdict.kind == "flow_resumed"


def test_the_model_cannot_start_an_undeclared_sub_flow():
    fsm, cid, _ = start(say("ok", intent="start_flow", flow="transfer_money"), say("Where do you fly from?"))
    fsm.process_message(cid, "send money")
    assert fsm.get_instance(cid).stack == []
    assert fsm.explain(cid).verdict.kind == "stay_rejected"


def test_the_flow_depth_limit_refuses_another_push():
    fsm, cid, _ = start(
        say("ok", intent="start_flow", flow="check_booking"), say("Where do you fly from?"), max_context_bytes=10_000
    )
    fsm.config = fsm.config.__class__(max_flow_depth=1)
    fsm.process_message(cid, "check my booking")
    assert fsm.get_instance(cid).stack == []
    assert "max_flow_depth" in fsm.explain(cid).verdict.reason


def _to_confirmation(*more):
    return start(
        say("To?", "collect_destination", origin="Oslo"),
        say("Date?", "collect_date", destination="Paris"),
        say("Oslo to Paris on May 3, right?", "confirm", date="2027-05-03"),
        *more,
    )


def _play_to_confirmation(fsm, cid):
    for text in ["Oslo", "Paris", "May 3"]:
        fsm.process_message(cid, text)
    assert fsm.get_current_state(cid) == "confirm"


def test_confirmation_yes_takes_the_on_yes_transition():
    fsm, cid, _ = _to_confirmation(say("Booked!", "confirm", intent="confirm"), say("Your flight is booked. Goodbye!"))
    _play_to_confirmation(fsm, cid)
    fsm.process_message(cid, "yes")
    assert fsm.get_current_state(cid) == "booked" and fsm.is_conversation_ended(cid)


def test_confirmation_no_cancels_as_declared_once_the_cancel_is_confirmed():
    fsm, cid, _ = _to_confirmation(
        say("Okay, I cancelled it.", intent="deny"),
        say("Do you want to cancel the booking?"),
        say("Cancelled.", intent="confirm"),
    )
    _play_to_confirmation(fsm, cid)
    fsm.process_message(cid, "no")
    assert fsm.get_instance(cid).pending_cancel
    fsm.process_message(cid, "yes, cancel it")
    assert fsm.get_instance(cid).status == "cancelled"


def test_confirmation_change_overwrites_the_value_and_confirms_again():
    fsm, cid, _ = _to_confirmation(
        say("Oslo to London on May 3, right?", "confirm", intent="deny", destination="London")
    )
    _play_to_confirmation(fsm, cid)
    reply = fsm.process_message(cid, "change the destination to London")
    assert fsm.get_current_state(cid) == "confirm"
    assert fsm.get_conversation_data(cid)["destination"] == "London"
    assert reply == "Oslo to London on May 3, right?"
    change = [c for c in fsm.explain(cid).context_changes if c.key == "destination"][0]
    assert (change.reason, change.previous) == ("corrected", "Paris")


def test_a_correction_in_a_later_state_overwrites_the_earlier_value():
    fsm, cid, _ = start(
        say("To?", "collect_destination", origin="Oslo"),
        say("Got it, from London. Where to?", "collect_destination", origin="London"),
    )
    fsm.process_message(cid, "Oslo")
    fsm.process_message(cid, "Sorry, I meant London")
    assert fsm.get_conversation_data(cid)["origin"] == "London"
    assert fsm.get_current_state(cid) == "collect_destination"


def test_every_event_is_in_the_trace_with_a_timestamp():
    fsm, cid, _ = start(
        say("q", intent="digression"),
        say("ok", intent="start_flow", flow="check_booking"),
        say("Reference?"),
        say("Cancelled.", intent="cancel"),
        say("Where do you fly from?"),
    )
    for text in ["what cities?", "check booking", "never mind"]:
        fsm.process_message(cid, text)
    trace = fsm.get_trace(cid)
    assert [e.event for e in trace] == ["start", "digression", "push", "cancel"]
    assert all(e.timestamp > 0 for e in trace)


def test_the_trace_is_bounded():
    replies = [say("q", intent="digression") for _ in range(30)]
    fsm, cid, _ = start(*replies)
    fsm.config = fsm.config.__class__(max_trace_events=5)
    for i in range(30):
        try:
            fsm.process_message(cid, f"q{i}")
        except Exception:
            break
    assert len(fsm.get_trace(cid)) <= 5


def test_the_engine_resolves_a_sub_flow_where_lint_looks(tmp_path: Path) -> None:
    """A directory named like the reference next to the parent is not the sub-flow: both fall back to the id."""
    from llm_fsm.definition import FlowDeclaration, FSMDefinition
    from llm_fsm.loading import attach_source, resolve_flow_reference

    (tmp_path / "child").mkdir()
    parent_file = tmp_path / "parent.yaml"
    parent = attach_source(
        FSMDefinition.model_validate(
            {
                "name": "p",
                "description": "d",
                "initial_state": "a",
                "states": {"a": {"id": "a", "description": "d", "purpose": "p", "transitions": []}},
            }
        ),
        str(parent_file),
    )
    asked: list[str] = []

    def loader(reference: str) -> FSMDefinition:
        asked.append(reference)
        return parent

    manager = FSMManager(fsm_loader=loader, llm_interface=ScriptedLLM([]))
    declaration = FlowDeclaration.model_validate({"name": "c", "definition": "child", "description": "start c"})
    reference, _ = manager._resolve_flow(declaration, parent)
    assert reference == resolve_flow_reference("child", str(parent_file)) == "child"
    assert asked == ["child"]
