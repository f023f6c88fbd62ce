"""Runtime models: copies a turn can change freely, and JSON round trips."""

from llm_fsm.engine._data import copy_json
from llm_fsm.engine._instance import Conversation, FlowFrame, FSMContext, FSMInstance
from llm_fsm.engine._records import TraceEvent


def instance() -> FSMInstance:
    return FSMInstance(
        fsm_id="form",
        current_state="ask",
        context=FSMContext(
            data={"name": "Ann", "address": {"city": "Oslo"}, "tags": ["a"]},
            conversation=Conversation(exchanges=[{"user": "hi"}, {"assistant": "hello"}]),
            metadata={"source": {"channel": "web"}},
        ),
        flow_stack=[FlowFrame(flow_id="root", flow_name="form", fsm_id="form", current_state="ask", data={"k": [1]})],
        trace=[TraceEvent(event="start")],
        processed_messages={"m1": "r1"},
    )


def test_a_copy_for_a_turn_equals_the_original():
    original = instance()
    assert original.copy_for_turn().model_dump() == original.model_dump()


def test_changing_a_copy_for_a_turn_never_changes_the_original():
    original = instance()
    before = original.model_dump()
    copy = original.copy_for_turn()
    copy.current_state = "done"
    copy.context.data["name"] = "Bob"
    copy.context.data["address"]["city"] = "Bergen"
    copy.context.data["tags"].append("b")
    copy.context.metadata["source"]["channel"] = "sms"
    copy.context.conversation.exchanges.append({"user": "more"})
    copy.context.conversation.archived_messages = 5
    copy.trace.append(TraceEvent(event="end"))
    copy.turns.append(None)  # type: ignore[arg-type]
    copy.processed_messages["m2"] = "r2"
    copy.flow_stack[0].data["k"].append(2)
    copy.flow_stack[0].status = "active"
    copy.completed_flows.append(copy.flow_stack.pop())
    copy.archive_outbox.append({"user": "old"})
    assert original.model_dump() == before


def test_a_copy_for_a_turn_is_a_valid_model_that_serialises():
    copy = instance().copy_for_turn()
    assert FSMInstance.model_validate_json(copy.model_dump_json()).model_dump() == copy.model_dump()


def test_copy_json_copies_containers_and_shares_leaves():
    value = {"a": [1, {"b": "c"}]}
    copied = copy_json(value)
    assert (
        copied == value
        and copied is not value
        and copied["a"] is not value["a"]
        and copied["a"][1] is not value["a"][1]
    )
