"""Arbitrary sequences of push, pop, cancel, resume and digression keep the flow stack consistent.

A hypothesis state machine drives the pure operations of ``llm_fsm.engine._flows`` on one
instance and checks after every step: flow ids are unique, every paused flow's
data and state are exactly what they were when it was paused, the depth limit
holds, the archive is bounded and holds no data, and a completed flow hands back
only its declared outputs.
"""

from __future__ import annotations

import copy

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from llm_fsm.definition._model import FlowDeclaration, FSMDefinition
from llm_fsm.engine._context import is_empty
from llm_fsm.engine._flows import depth, find_paused, pop_flow, push_flow, resume_flow
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import FlowError

MAX_DEPTH = 4
MAX_COMPLETED = 3

CHILD = FSMDefinition.model_validate(
    {
        "name": "child",
        "description": "a sub-flow",
        "initial_state": "ask",
        "states": {
            "ask": {
                "id": "ask",
                "description": "d",
                "purpose": "p",
                "transitions": [{"target_state": "done", "description": "t"}],
            },
            "done": {"id": "done", "description": "d", "purpose": "p", "transitions": []},
        },
    }
)

keys = st.sampled_from(["a", "b", "c"])
values = st.one_of(st.integers(), st.text(min_size=1, max_size=5))


class FlowStack(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.instance = FSMInstance(fsm_id="root", current_state="start", flow_name="root")
        self.paused_snapshots: dict[str, tuple[str, dict]] = {}
        self.last_outputs: dict | None = None

    @rule(key=keys, value=values)
    def collect(self, key, value):
        """A turn in the active flow collects a value (only the active flow's data changes)."""
        self.instance.context.data[key] = value

    @rule(name=st.sampled_from(["check", "pay"]), mode=st.sampled_from(["call", "link"]), inputs=st.booleans())
    def push(self, name, mode, inputs):
        declaration = FlowDeclaration(
            name=name,
            definition="child",
            mode=mode,
            description="d",
            inputs={"a": "a"} if inputs else None,
            outputs={"result": "b"},
        )
        before_id, before_state, before_data = (
            self.instance.flow_id,
            self.instance.current_state,
            copy.deepcopy(self.instance.context.data),
        )
        try:
            push_flow(
                self.instance,
                declaration,
                CHILD,
                "child",
                max_depth=MAX_DEPTH,
                reason="test",
                max_completed=MAX_COMPLETED,
            )
        except FlowError:
            assert mode == "call" and depth(self.instance) >= MAX_DEPTH
            return
        if mode == "call":
            self.paused_snapshots[before_id] = (before_state, before_data)
        assert self.instance.current_state == "ask" and self.instance.flow_name == name
        expected_inputs = {"a": before_data["a"]} if inputs and not is_empty(before_data.get("a")) else {}
        assert self.instance.context.data == expected_inputs, "a sub-flow sees only its inputs"

    @precondition(lambda self: self.instance.flow_stack)
    @rule(status=st.sampled_from(["completed", "cancelled"]))
    def pop(self, status):
        child_data = copy.deepcopy(self.instance.context.data)
        mapping = dict(self.instance.flow_output_mapping)
        finished, _ = pop_flow(self.instance, status, reason="test", max_completed=MAX_COMPLETED)
        state, data = self.paused_snapshots.pop(self.instance.flow_id)
        expected = dict(data)
        if status == "completed":
            outputs = {
                parent: child_data[child] for parent, child in mapping.items() if not is_empty(child_data.get(child))
            }
            assert finished.outputs == outputs
            expected.update(outputs)
        else:
            assert finished.outputs == {}
        assert self.instance.current_state == state
        assert self.instance.context.data == expected, "the parent resumes with its data intact (plus declared outputs)"

    @precondition(lambda self: self.instance.flow_stack)
    @rule(data=st.data())
    def resume(self, data):
        index = data.draw(st.integers(0, len(self.instance.flow_stack) - 1))
        frame = self.instance.flow_stack[index]
        assert find_paused(self.instance, frame.flow_id) == index
        above = [f.flow_id for f in self.instance.flow_stack[index + 1 :]]
        resume_flow(self.instance, index, reason="test", max_completed=MAX_COMPLETED)
        state, snapshot = self.paused_snapshots.pop(frame.flow_id)
        for flow_id in above:
            self.paused_snapshots.pop(flow_id)
        assert (self.instance.flow_id, self.instance.current_state, self.instance.context.data) == (
            frame.flow_id,
            state,
            snapshot,
        )

    @rule()
    def digression(self):
        """A side question changes neither state nor stack."""
        before = (self.instance.current_state, [f.flow_id for f in self.instance.flow_stack])
        self.instance.consecutive_digressions += 1
        assert before == (self.instance.current_state, [f.flow_id for f in self.instance.flow_stack])

    @invariant()
    def stack_is_consistent(self):
        ids = [f.flow_id for f in self.instance.flow_stack] + [self.instance.flow_id]
        assert len(ids) == len(set(ids))
        assert depth(self.instance) <= MAX_DEPTH
        assert all(f.status == "paused" for f in self.instance.flow_stack)
        for frame in self.instance.flow_stack:
            state, data = self.paused_snapshots[frame.flow_id]
            assert (frame.current_state, frame.data) == (state, data), "a paused flow's data is intact"

    @invariant()
    def archive_is_bounded_and_pruned(self):
        assert len(self.instance.completed_flows) <= MAX_COMPLETED
        assert all(f.data == {} and f.completed_at is not None for f in self.instance.completed_flows)


TestFlowStack = FlowStack.TestCase
TestFlowStack.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
