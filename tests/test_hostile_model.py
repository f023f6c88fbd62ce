"""No model output, however broken or hostile, can move a conversation where the definition forbids.

For generated definitions and arbitrary model outputs (random targets, random
updates, garbage text, injection strings, exceptions), after every turn the
conversation is in the state it was in, or in a state reached by a transition
declared from that state (its own, or a global transition that applies to it) whose conditions hold against the
context after the turn. Only ``LLMResponseError`` may escape. (``benchmarks/hostile_model.py``
runs the same property with 10,000 examples.) The strategies live in
``tests/hostile_strategies.py``, shared with ``tests/test_prove_hostile.py``.
"""

from __future__ import annotations

import os
from typing import Any

from hostile_strategies import definitions, hostile_replies, model_outputs, user_messages
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_fsm.definition._model import FSMDefinition, Transition
from llm_fsm.engine._context import has_value
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import LLMResponseError
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager


def conditions_hold(transition: Transition, data: dict[str, Any]) -> bool:
    for condition in transition.conditions or ():
        if not all(has_value(data, key) for key in condition.requires_context_keys or ()):
            return False
        if condition.compiled is not None and not condition.compiled.evaluate_guard(data).holds:
            return False
    return True


def allowed(definition: FSMDefinition, before: str, after: str, data: dict[str, Any]) -> bool:
    if before == after:
        return True
    # its own transitions and the global transitions that apply to it alike
    return any(t.target_state == after and conditions_hold(t, data) for t in definition.transitions_from(before))


@settings(
    max_examples=int(os.environ.get("HOSTILE_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(definition=definitions(), data=st.data())
def test_no_model_output_breaks_the_invariant(definition: FSMDefinition, data: st.DataObject) -> None:
    outputs = model_outputs(list(definition.states))
    as_reply = hostile_replies(data.draw, outputs)

    manager = FSMManager(fsm_loader=lambda _: definition, llm_interface=FunctionLLM(as_reply))
    try:
        cid, _ = manager.start_conversation("gen", {"account": "acc-1"})
    except LLMResponseError:
        return
    for _ in range(6):
        before = manager.get_instance(cid)
        if before.ended:
            break
        try:
            manager.process_message(cid, data.draw(user_messages()))
        except LLMResponseError:
            after = manager.get_instance(cid)
            assert after.model_dump() == before.model_dump(), "a failed turn must change nothing"
            continue
        after = manager.get_instance(cid)
        assert after.current_state in definition.states
        assert "_secret" not in after.context.data
        assert len(after.flow_stack) < manager.config.max_flow_depth
        if after.flow_id == before.flow_id:
            assert allowed(definition, before.current_state, after.current_state, after.context.data)
            if not after.flow_stack:
                assert after.context.data.get("account") == "acc-1"
        check_stack(definition, before, after)


def check_stack(definition: FSMDefinition, before: FSMInstance, after: FSMInstance) -> None:
    """Flow operations keep the stack consistent and every paused flow's data intact."""
    paused_before = {f.flow_id: f for f in before.flow_stack}
    for frame in after.flow_stack:
        assert frame.status == "paused"
        if frame.flow_id in paused_before:
            assert (
                frame.data == paused_before[frame.flow_id].data
                and frame.current_state == paused_before[frame.flow_id].current_state
            )
        else:  # pushed this turn: it is the flow that was active, paused where it was
            assert frame.flow_id == before.flow_id and frame.current_state == before.current_state
    if after.flow_id != before.flow_id and after.flow_id in paused_before:
        resumed = paused_before[after.flow_id]
        # a resumed flow keeps its data (a completed child may only add its declared outputs)
        assert all(after.context.data.get(k) == v for k, v in resumed.data.items() if k != "name")
        assert allowed(definition, resumed.current_state, after.current_state, after.context.data)
    ids = [f.flow_id for f in after.flow_stack] + [after.flow_id]
    assert len(ids) == len(set(ids))
