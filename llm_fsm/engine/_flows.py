"""The flow stack: sub-flows pushed, paused, resumed, completed and cancelled.

Pure operations on an ``FSMInstance``. The active flow lives in the instance's
own fields (``fsm_id``, ``current_state``, ``context.data``, ``flow_*``), so the
rest of the engine never needs to know whether it runs a root or a sub-flow;
paused flows wait in ``flow_stack`` (bottom = root) with their own data, and
finished ones are archived in ``completed_flows`` with their outputs — their
data pruned, the archive bounded.

Each flow instance has its own id and its own data: two instances of the same
definition never share keys, and a sub-flow sees only what its ``inputs``
mapping hands it.
"""

from __future__ import annotations

from typing import Any, Literal

from llm_fsm.definition._model import FlowDeclaration, FSMDefinition
from llm_fsm.engine._context import _MISSING, apply_update, get_path, is_empty
from llm_fsm.engine._data import DEFAULT_MAX_COMPLETED_FLOWS, now
from llm_fsm.engine._instance import FlowFrame, FSMInstance, new_flow_id
from llm_fsm.engine._provenance import Origin, in_turn, leave, note, pause, resume
from llm_fsm.engine._records import ContextChange
from llm_fsm.engine._values import MASK, KeyPolicy
from llm_fsm.errors import FlowError


def depth(instance: FSMInstance) -> int:
    """Flows on the stack, the active one included."""
    return len(instance.flow_stack) + 1


def _active_frame(instance: FSMInstance, status: str, reason: str | None) -> FlowFrame:
    return FlowFrame(
        flow_id=instance.flow_id,
        flow_name=instance.flow_name or instance.fsm_id,
        fsm_id=instance.fsm_id,
        definition_hash=instance.definition_hash,
        current_state=instance.current_state,
        data=instance.context.data,
        status=status,  # type: ignore[arg-type]
        mode=instance.flow_mode,
        output_mapping=dict(instance.flow_output_mapping),
        started_at=instance.flow_started_at,
        reason=reason,
    )


def _activate(instance: FSMInstance, frame: FlowFrame) -> None:
    instance.flow_id = frame.flow_id
    instance.flow_name = frame.flow_name
    instance.flow_mode = frame.mode
    instance.flow_started_at = frame.started_at
    instance.flow_output_mapping = dict(frame.output_mapping)
    instance.fsm_id = frame.fsm_id
    instance.definition_hash = frame.definition_hash
    instance.current_state = frame.current_state
    instance.context.data = frame.data


def _archive(instance: FSMInstance, frame: FlowFrame, max_completed: int) -> None:
    frame.data = {}  # pruned: only outputs outlive a flow
    frame.completed_at = now()
    instance.completed_flows.append(frame)
    if len(instance.completed_flows) > max_completed:
        del instance.completed_flows[: len(instance.completed_flows) - max_completed]


def map_keys(source: dict[str, Any], mapping: dict[str, str] | None) -> dict[str, Any]:
    """``{target_key: source[source_key]}`` for every mapped key the source has a value for."""
    out: dict[str, Any] = {}
    for target, origin in (mapping or {}).items():
        value = get_path(source, origin)
        if value is not _MISSING and not is_empty(value):
            out[target] = value
    return out


def push_flow(
    instance: FSMInstance,
    declaration: FlowDeclaration,
    child: FSMDefinition,
    child_fsm_id: str,
    *,
    max_depth: int,
    reason: str,
    max_completed: int = DEFAULT_MAX_COMPLETED_FLOWS,
    policy: KeyPolicy | None = None,
) -> list[ContextChange]:
    """Start ``child``: ``call`` pauses the active flow, ``link`` archives it. Returns the inputs handed over."""
    if declaration.mode == "call" and depth(instance) >= max_depth:
        raise FlowError(
            f"cannot start {declaration.name!r}: {depth(instance)} flows are stacked (max_flow_depth={max_depth})"
        )
    inputs = map_keys(instance.context.data, declaration.inputs)
    parent = _active_frame(instance, "paused" if declaration.mode == "call" else "linked", reason)
    if declaration.mode == "call":
        parent.paused_at = now()
        instance.flow_stack.append(parent)
        pause(instance, parent.flow_id)
    else:
        _archive(instance, parent, max_completed)
        leave(instance)
    data: dict[str, Any] = {}
    changes = _handed_over(data, inputs, policy)
    _activate(
        instance,
        FlowFrame(
            flow_id=new_flow_id(declaration.name),
            flow_name=declaration.name,
            fsm_id=child_fsm_id,
            definition_hash=child.content_hash,
            current_state=child.initial_state,
            data=data,
            status="active",
            mode=declaration.mode,
            output_mapping=dict(declaration.outputs or {}),
        ),
    )
    note(instance, changes, Origin(by="flow", flow=parent.flow_name, turn=in_turn(instance)))
    return changes


def _handed_over(data: dict[str, Any], values: dict[str, Any], policy: KeyPolicy | None) -> list[ContextChange]:
    """Apply values one flow hands another, checked against the receiving flow's declarations.

    Like the model's values they come from the conversation, so a value the receiver's declaration
    refuses is dropped and recorded, not raised: raising would fail every retry of the turn.
    """
    if policy is None:
        return apply_update(data, values, source="application")
    changes: list[ContextChange] = []
    accepted: dict[str, Any] = {}
    for key, value in values.items():
        normalised, refusal = policy.vet(key, value, model=False)
        if refusal is None:
            accepted[key] = normalised
        else:
            shown = MASK if policy.is_sensitive(key) else value
            changes.append(ContextChange(key=key, value=shown, applied=False, reason=refusal.reason, rule=refusal.rule))
    return apply_update(data, accepted, source="application", policy=policy) + changes


def pop_flow(
    instance: FSMInstance,
    status: Literal["completed", "cancelled"],
    *,
    reason: str,
    max_completed: int = DEFAULT_MAX_COMPLETED_FLOWS,
    policy: KeyPolicy | None = None,
) -> tuple[FlowFrame, list[ContextChange]]:
    """Finish the active sub-flow and resume the one below; completed flows hand their outputs back."""
    if not instance.flow_stack:
        raise FlowError("the root flow cannot be popped")
    finished = _active_frame(instance, status, reason)
    outputs = map_keys(finished.data, finished.output_mapping) if status == "completed" else {}
    finished.outputs = outputs
    _archive(instance, finished, max_completed)
    parent = instance.flow_stack.pop()
    parent.status = "active"
    parent.paused_at = None
    _activate(instance, parent)
    leave(instance)
    resume(instance, parent.flow_id)
    changes = _handed_over(instance.context.data, outputs, policy) if outputs else []
    note(instance, changes, Origin(by="flow", flow=finished.flow_name, turn=in_turn(instance)))
    return finished, changes


def find_paused(instance: FSMInstance, name_or_id: str | None) -> int | None:
    """Index in ``flow_stack`` of the most recent paused flow with this name or id."""
    if not name_or_id:
        return None
    for index in range(len(instance.flow_stack) - 1, -1, -1):
        frame = instance.flow_stack[index]
        if name_or_id in (frame.flow_name, frame.flow_id, frame.fsm_id):
            return index
    return None


def resume_flow(
    instance: FSMInstance, index: int, *, reason: str, max_completed: int = DEFAULT_MAX_COMPLETED_FLOWS
) -> list[FlowFrame]:
    """Bring the paused flow at ``index`` back on top; every flow above it is cancelled. Returns those."""
    cancelled: list[FlowFrame] = []
    while len(instance.flow_stack) > index + 1:
        frame, _ = pop_flow(instance, "cancelled", reason=reason, max_completed=max_completed)
        cancelled.append(frame)
    frame, _ = pop_flow(instance, "cancelled", reason=reason, max_completed=max_completed)
    cancelled.append(frame)
    return cancelled


__all__ = ["depth", "find_paused", "map_keys", "pop_flow", "push_flow", "resume_flow"]
