"""No sequence of operator operations (mixed with turns) leaves a conversation the engine cannot run.

Hypothesis plays random operations, valid and not, on tests/data/operator/support.yaml over a SQLite store:
a refusal must be one of our typed errors and change nothing; after every step the stored conversation must
load, point at a declared state of the definition of each flow on its stack, and have a consistent mode.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import FSMError
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.loading import load_fsm_definition
from llm_fsm.manager import FSMManager
from tests.test_operator import SUPPORT

STATES = ["greeting", "collect_order", "confirm", "escalate", "resolved", "lookup", "done", "nowhere", ""]
FLOWS = ["check_refund", "nope"]
VALUES = st.one_of(st.none(), st.sampled_from(["AB1234", "a@example.com", "paid", "lost", "gold"]), st.integers())
KEYS = st.sampled_from(["order_id", "email", "status", "customer_tier", "_private", "a.b"])
UPDATES = st.dictionaries(KEYS, VALUES, max_size=3)
ACTORS = st.sampled_from(["alice", "alice", "alice", "", "bot-7"])
FORCED = st.sampled_from(["collect_order"] * 6 + STATES)  # where the sub-flow is declared, so pushes happen

OPERATIONS = st.one_of(
    st.tuples(st.just("force_state"), FORCED, ACTORS),
    st.tuples(st.just("push_flow"), st.sampled_from(FLOWS[:1] * 3 + FLOWS), UPDATES),
    st.tuples(st.just("enter_flow"), UPDATES),  # force collect_order, then push check_refund: two steps
    st.tuples(st.just("pop_flow"), UPDATES),
    st.tuples(st.just("set_context"), UPDATES),
    st.tuples(st.just("hand_off"), ACTORS),
    st.tuples(st.just("resume_bot"), st.one_of(st.none(), st.sampled_from(STATES))),
    st.tuples(st.just("post_operator_message"), st.text(max_size=20)),
    st.tuples(
        st.just("message"),
        st.sampled_from(STATES),
        st.sampled_from(["continue", "cancel", "confirm", "deny", "digression", "start_flow"]),
    ),
)


def model(turns: list[tuple[str, str]]) -> FunctionLLM:
    def answer(request: Any) -> dict[str, Any]:
        target, intent = turns.pop(0) if request.purpose == "turn" and turns else ("", "continue")
        return {
            "intent": intent,
            "flow": "check_refund",
            "transition": {"target_state": target, "context_update": {}},
            "message": "ok",
        }

    return FunctionLLM(answer)


def perform(fsm: FSMManager, cid: str, operation: tuple[Any, ...], turns: list[tuple[str, str]]) -> None:
    name, *args = operation
    if name == "force_state":
        fsm.force_state(cid, args[0], "property", actor=args[1])
    elif name == "push_flow":
        fsm.push_flow(cid, args[0], args[1], actor="alice")
    elif name == "pop_flow":
        fsm.pop_flow(cid, args[0], actor="alice")
    elif name == "set_context":
        fsm.set_context(cid, args[0], actor="alice")
    elif name == "hand_off":
        fsm.hand_off(cid, "property", actor=args[0])
    elif name == "resume_bot":
        fsm.resume_bot(cid, actor="alice", state=args[0])
    elif name == "post_operator_message":
        fsm.post_operator_message(cid, args[0], actor="alice")
    else:
        turns.append((args[0], args[1]))
        fsm.process_message(cid, "hello")


def consistent(instance: FSMInstance) -> None:
    definition = load_fsm_definition(instance.fsm_id)
    assert instance.current_state in definition.states
    for frame in instance.flow_stack:
        assert frame.current_state in load_fsm_definition(frame.fsm_id).states
    assert (instance.mode == "human") == (instance.handoff is not None)
    assert not (instance.mode == "human" and instance.pending_cancel)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPERATIONS, max_size=12))
def test_operator_operations_never_leave_an_inconsistent_conversation(operations: list[tuple[Any, ...]]) -> None:
    turns: list[tuple[str, str]] = []
    fsm = FSMManager(llm_interface=model(turns), store="sqlite:///:memory:")
    cid, _ = fsm.start_conversation(SUPPORT)
    steps = [
        step
        for operation in operations
        for step in (
            [("force_state", "collect_order", "alice"), ("push_flow", "check_refund", operation[1])]
            if operation[0] == "enter_flow"
            else [operation]
        )
    ]
    for operation in steps:
        before = fsm.get_instance(cid)
        try:
            perform(fsm, cid, operation, turns)
        except FSMError:
            after = fsm.get_instance(cid)
            assert after.version == before.version, f"{operation} was refused but changed the conversation"
        turns.clear()
        stored = fsm.get_instance(cid)
        FSMInstance.model_validate_json(stored.model_dump_json())  # what any store writes, read back
        consistent(stored)
