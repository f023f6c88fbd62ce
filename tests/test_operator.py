"""The operator API: force_state, push_flow, pop_flow and set_context from outside a turn.

Operators are trusted to put a conversation anywhere it is declared to go, and refused what would leave it
inconsistent; every change is in the trace with its actor and reason. The conversations run on
tests/data/operator/support.yaml (its ``check_refund`` sub-flow is refund.yaml beside it).
"""

from __future__ import annotations

import asyncio
import datetime
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from llm_fsm.engine._records import LLMRequest
from llm_fsm.errors import (
    ContextError,
    ContextValidationError,
    ConversationEndedError,
    OperatorError,
    OperatorFlowError,
    StateNotFoundError,
    UnknownStateError,
)
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager

SUPPORT = str(Path(__file__).parent / "data" / "operator" / "support.yaml")


class Model:
    """Turn calls answer from a queue (stay and say 'ok' when it is empty); other calls say what they are."""

    def __init__(self, *turns: dict[str, Any]) -> None:
        self.turns = deque(turns)
        self.requests: list[LLMRequest] = []

    def __call__(self, request: LLMRequest) -> dict[str, Any]:
        self.requests.append(request)
        if request.purpose == "turn" and self.turns:
            return self.turns.popleft()
        return {"message": f"{request.purpose} reply", "transition": {"target_state": "", "context_update": {}}}


def reply(message: str, target: str = "", intent: str = "continue", **update: Any) -> dict[str, Any]:
    return {"intent": intent, "transition": {"target_state": target, "context_update": update}, "message": message}


def start(*turns: dict[str, Any], store: str | None = None) -> tuple[FSMManager, str, Model]:
    model = Model(*turns)
    fsm = FSMManager(llm_interface=FunctionLLM(model), store=store)
    cid, _ = fsm.start_conversation(SUPPORT)
    return fsm, cid, model


def last_event(fsm: FSMManager, cid: str) -> Any:
    return fsm.get_trace(cid)[-1]


# --- force_state ---------------------------------------------------------------------------


def test_force_state_moves_to_a_declared_state_with_no_transition_to_it() -> None:
    fsm, cid, _ = start()
    fsm.force_state(cid, "confirm", "customer called in", actor="alice")
    assert fsm.get_current_state(cid) == "confirm"


def test_force_state_is_in_the_trace_with_actor_and_reason() -> None:
    fsm, cid, _ = start()
    fsm.force_state(cid, "collect_order", "customer called in", actor="alice")
    event = last_event(fsm, cid)
    assert event.event == "operator_force_state"
    assert event.data == {
        "actor": "alice",
        "reason": "customer called in",
        "source": "greeting",
        "target": "collect_order",
    }


def test_force_state_to_an_undeclared_state_is_refused_and_changes_nothing() -> None:
    fsm, cid, _ = start()
    version = fsm.get_instance(cid).version
    with pytest.raises(UnknownStateError, match="nowhere") as caught:
        fsm.force_state(cid, "nowhere", "typo", actor="alice")
    assert isinstance(caught.value, StateNotFoundError)
    assert fsm.get_instance(cid).version == version


def test_force_state_to_a_terminal_state_ends_the_conversation() -> None:
    fsm, cid, _ = start()
    fsm.force_state(cid, "resolved", "solved on the phone", actor="alice")
    assert fsm.is_conversation_ended(cid)
    assert [e.event for e in fsm.get_trace(cid)][-2:] == ["operator_force_state", "end"]


def test_force_state_on_an_ended_conversation_is_refused() -> None:
    fsm, cid, _ = start()
    fsm.end_conversation(cid)
    with pytest.raises(ConversationEndedError):
        fsm.force_state(cid, "greeting", "reopen", actor="alice")


@pytest.mark.parametrize("actor", ["", "   "])
def test_an_operator_change_without_an_actor_is_refused(actor: str) -> None:
    fsm, cid, _ = start()
    with pytest.raises(OperatorError, match="actor"):
        fsm.force_state(cid, "confirm", "who did this?", actor=actor)


def test_force_state_to_a_handoff_state_hands_off() -> None:
    fsm, cid, _ = start()
    fsm.force_state(cid, "escalate", "angry customer", actor="alice")
    instance = fsm.get_instance(cid)
    assert instance.mode == "human" and instance.handoff is not None
    assert instance.handoff.from_state == "escalate"


def test_the_next_turn_runs_in_the_forced_state() -> None:
    fsm, cid, model = start(reply("What is the order number?"))
    fsm.force_state(cid, "collect_order", "skip the greeting", actor="alice")
    fsm.process_message(cid, "hello")
    assert "collect_order" in model.requests[-1].system_prompt
    assert fsm.explain(cid).state_before == "collect_order"


# --- push_flow and pop_flow -----------------------------------------------------------------


def test_push_flow_starts_a_declared_sub_flow_without_its_conditions() -> None:
    fsm, cid, _ = start()
    fsm.force_state(cid, "collect_order", "setup", actor="alice")
    fsm.set_context(cid, {"order_id": "AB1234"}, actor="alice")
    fsm.push_flow(cid, "check_refund", actor="alice", reason="customer asked on the phone")
    instance = fsm.get_instance(cid)
    assert instance.stack == ["check_refund"]
    assert instance.current_state == "lookup"
    assert instance.context.data == {"order": "AB1234"}  # the declared input mapping
    assert last_event(fsm, cid).event == "operator_push_flow"
    assert last_event(fsm, cid).data["actor"] == "alice"


def test_push_flow_hands_the_given_inputs_to_the_sub_flow() -> None:
    fsm, cid, _ = start()
    fsm.force_state(cid, "collect_order", "setup", actor="alice")
    fsm.push_flow(cid, "check_refund", {"status": "pending"}, actor="alice")
    assert fsm.get_conversation_data(cid) == {"status": "pending"}


def test_push_flow_refuses_inputs_the_sub_flow_declaration_refuses() -> None:
    fsm, cid, _ = start()
    fsm.force_state(cid, "collect_order", "setup", actor="alice")
    with pytest.raises(ContextValidationError):
        fsm.push_flow(cid, "check_refund", {"status": "lost"}, actor="alice")
    assert fsm.get_instance(cid).stack == []


def test_push_flow_of_a_flow_not_declared_in_the_state_is_refused() -> None:
    fsm, cid, _ = start()  # greeting declares no sub-flow
    with pytest.raises(OperatorFlowError, match="check_refund"):
        fsm.push_flow(cid, "check_refund", actor="alice")


def test_pop_flow_hands_outputs_to_the_parent_through_the_declared_mapping() -> None:
    fsm, cid, _ = start()
    fsm.force_state(cid, "collect_order", "setup", actor="alice")
    fsm.push_flow(cid, "check_refund", actor="alice")
    fsm.pop_flow(cid, {"status": "paid"}, actor="alice", reason="looked it up")
    instance = fsm.get_instance(cid)
    assert instance.stack == [] and instance.current_state == "collect_order"
    assert instance.context.data["refund_status"] == "paid"
    assert instance.completed_flows[-1].status == "completed"
    assert last_event(fsm, cid).event == "operator_pop_flow"


def test_pop_flow_refuses_an_output_the_sub_flow_declaration_refuses() -> None:
    fsm, cid, _ = start()
    fsm.force_state(cid, "collect_order", "setup", actor="alice")
    fsm.push_flow(cid, "check_refund", actor="alice")
    with pytest.raises(ContextValidationError):
        fsm.pop_flow(cid, {"status": "lost"}, actor="alice")
    assert fsm.get_instance(cid).stack == ["check_refund"]


def test_pop_flow_at_the_root_is_refused() -> None:
    fsm, cid, _ = start()
    with pytest.raises(OperatorFlowError, match="root"):
        fsm.pop_flow(cid, actor="alice")


def test_force_state_to_a_terminal_state_of_a_sub_flow_is_refused() -> None:
    fsm, cid, _ = start()
    fsm.force_state(cid, "collect_order", "setup", actor="alice")
    fsm.push_flow(cid, "check_refund", actor="alice")
    with pytest.raises(OperatorFlowError, match="pop_flow"):
        fsm.force_state(cid, "done", "finish it", actor="alice")


# --- set_context ------------------------------------------------------------------------------


def test_set_context_writes_protected_keys_and_is_traced() -> None:
    fsm, cid, _ = start()
    data = fsm.set_context(cid, {"customer_tier": "gold"}, actor="crm-sync", reason="tier looked up")
    assert data["customer_tier"] == "gold"
    event = last_event(fsm, cid)
    assert (event.event, event.data["actor"], event.data["keys"]) == (
        "operator_set_context",
        "crm-sync",
        ["customer_tier"],
    )


def test_set_context_refuses_a_value_its_declaration_refuses_and_keeps_nothing() -> None:
    fsm, cid, _ = start()
    with pytest.raises(ContextValidationError):
        fsm.set_context(cid, {"customer_tier": "gold", "email": "not an email"}, actor="alice")
    assert fsm.get_conversation_data(cid) == {}


def test_set_context_refuses_a_value_no_store_could_save_and_keeps_nothing() -> None:
    fsm, cid, _ = start()
    with pytest.raises(ContextError, match="not JSON"):
        fsm.set_context(cid, {"customer_tier": "gold", "since": datetime.date(2026, 1, 1)}, actor="alice")
    assert fsm.get_conversation_data(cid) == {}


# --- async twins --------------------------------------------------------------------------------


def test_the_async_operator_methods_do_what_the_sync_ones_do() -> None:
    fsm, cid, _ = start()

    async def operate() -> None:
        await fsm.aforce_state(cid, "collect_order", "setup", actor="alice")
        await fsm.apush_flow(cid, "check_refund", actor="alice")
        await fsm.apop_flow(cid, {"status": "paid"}, actor="alice")
        await fsm.aset_context(cid, {"customer_tier": "gold"}, actor="alice")
        await fsm.ahand_off(cid, "needs a person", actor="alice")
        await fsm.apost_operator_message(cid, "Hi, Alice here.", actor="alice")
        await fsm.aresume_bot(cid, actor="alice", state="confirm")

    asyncio.run(operate())
    events = [e.event for e in fsm.get_trace(cid)]
    assert events[-7:] == [
        "operator_force_state",
        "operator_push_flow",
        "operator_pop_flow",
        "operator_set_context",
        "handoff",
        "operator_message",
        "resume_bot",
    ]
    assert fsm.get_current_state(cid) == "confirm"


def test_a_forced_move_forgets_the_collected_actions_run_in_the_state_left() -> None:
    from llm_fsm.engine import _operator as ops
    from llm_fsm.engine._instance import FSMInstance
    from llm_fsm.engine._turn import EngineConfig
    from llm_fsm.loading import load_fsm_definition

    instance = FSMInstance(
        fsm_id=SUPPORT, current_state="collect_order", action_runs={"root/collect_order#0:lookup": "f"}
    )
    ops.force_state(load_fsm_definition(SUPPORT), instance, "greeting", "back", "alice", EngineConfig())
    assert instance.action_runs == {}
