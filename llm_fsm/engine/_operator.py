"""What an operator may do to a conversation from outside a turn, as pure functions on an ``FSMInstance``.

Operators (a person at a support desk, a program repairing a conversation) are trusted: they may put a
conversation in any declared state, start any declared sub-flow without its conditions, finish one with
outputs of their choosing, and hand the conversation to a person and back. What they are refused is what
would leave a conversation the engine cannot run afterwards (an undeclared state or flow, the root popped,
an ended conversation changed) or a change no one can account for later (no actor). Every operation is
recorded in the trace with its actor and reason.

Like the turn, nothing here does I/O: the runtime loads the conversation and the definitions these
functions need, calls one on a private copy, and saves it with compare-and-set
(``runtime._operations.compare_and_set``).
A function that raises leaves the copy to be thrown away, so nothing of a refused change is saved.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llm_fsm.definition._model import FlowDeclaration, FSMDefinition
from llm_fsm.engine._actions import forget_visit
from llm_fsm.engine._context import apply_update
from llm_fsm.engine._data import now
from llm_fsm.engine._effects import EngineConfig, TurnOutcome, _policy, _trace
from llm_fsm.engine._flows import map_keys
from llm_fsm.engine._flows import pop_flow as _pop
from llm_fsm.engine._flows import push_flow as _push
from llm_fsm.engine._handoff import conversation_ended, hand_off, hand_off_declared
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._languages import follow_language
from llm_fsm.engine._messages import UserMessage, timestamp
from llm_fsm.engine._provenance import between_turns, note, settle_between_turns
from llm_fsm.engine._records import ContextChange, TurnRecord, Verdict
from llm_fsm.engine._timers import instant, settle
from llm_fsm.engine._turn import _prune_transcript, _redact
from llm_fsm.errors import (
    ContextValidationError,
    FlowError,
    HandoffError,
    OperatorError,
    OperatorFlowError,
    UnknownStateError,
)


def check(instance: FSMInstance, actor: str) -> None:
    """What every operation requires: someone to account for it, and a conversation still running."""
    if not isinstance(actor, str) or not actor.strip():
        raise OperatorError("an operator change needs an actor: who is making it (a name, a service, a key)")
    if instance.ended:
        raise conversation_ended(instance, "; operators cannot change it")


def _state(definition: FSMDefinition, state: str) -> None:
    if not isinstance(state, str) or state not in definition.states:
        raise UnknownStateError(
            f"state {state!r} is not declared in FSM {definition.name!r} "
            f"(declared: {', '.join(sorted(definition.states))})"
        )


def _leave(instance: FSMInstance, state: str) -> None:
    """Leaving ``state`` by an operator's move: its ``collected`` actions run anew on a return visit, as after any
    move. No action is *called* by an operator's change: it repairs a conversation, and a backend call (a booking
    placed on ``enter``) is not a side effect a repair should have; the next turn runs what the state declares."""
    forget_visit(instance, state)


def _enter(definition: FSMDefinition, instance: FSMInstance, config: EngineConfig, state: str, actor: str) -> None:
    """Arrive in ``state`` as a turn would: a declared handoff hands off, a terminal state of the root ends.

    (A sub-flow whose initial state is terminal completes on its next turn, as one started by the user does.)
    """
    instance.current_state = state
    instance.consecutive_digressions = 0
    instance.pending_cancel = False
    hand_off_declared(definition, instance, config)
    if definition.get_state(state).is_terminal and not instance.flow_stack:
        instance.status = "ended"
        _trace(instance, config, "end", state=state, reason=f"{actor} moved the conversation to a terminal state")
    instance.updated_at = now()
    settle(definition, instance, lambda: instant(config, instance.updated_at), entered=True)


def force_state(
    definition: FSMDefinition, instance: FSMInstance, state: str, reason: str, actor: str, config: EngineConfig
) -> None:
    """Put the active flow in any state its definition declares, transitions or not (that is the point).

    A terminal state ends the conversation as a turn reaching it would; in a sub-flow that is refused,
    because finishing a sub-flow hands outputs to its parent: ``pop_flow`` says which.
    """
    check(instance, actor)
    _state(definition, state)
    if instance.flow_stack and definition.get_state(state).is_terminal:
        raise OperatorFlowError(
            f"state {state!r} is terminal in sub-flow {instance.flow_name!r}; finish the sub-flow with pop_flow "
            "(its outputs go to the parent) instead"
        )
    source = instance.current_state
    _trace(instance, config, "operator_force_state", actor=actor, reason=reason, source=source, target=state)
    _leave(instance, source)
    _enter(definition, instance, config, state, actor)


def find_flow(definition: FSMDefinition, state: str, name: str) -> FlowDeclaration:
    """The sub-flow ``name`` declared for ``state`` (its own first, then the definition's), or a refusal."""
    for declaration in definition.flows_for(state):
        if declaration.name == name:
            return declaration
    declared = [d.name for d in definition.flows_for(state)]
    raise OperatorFlowError(
        f"no sub-flow named {name!r} is declared in state {state!r} of {definition.name!r}"
        + (f" (declared: {', '.join(declared)})" if declared else " (it declares none)")
    )


def push_flow(
    definition: FSMDefinition,
    instance: FSMInstance,
    declaration: FlowDeclaration,
    child: FSMDefinition,
    child_fsm_id: str,
    inputs: Mapping[str, Any] | None,
    actor: str,
    reason: str | None,
    config: EngineConfig,
) -> list[ContextChange]:
    """Start a declared sub-flow as a turn would, its conditions aside (operators are trusted).

    The sub-flow starts with its declared ``inputs`` mapping plus ``inputs`` given here (its own keys,
    written as the application: a value its declaration refuses raises ``ContextValidationError``).
    """
    check(instance, actor)
    if declaration not in definition.flows_for(instance.current_state):
        find_flow(definition, instance.current_state, declaration.name)  # raises with the declared names
    if inputs is not None and not isinstance(inputs, Mapping):
        raise OperatorError(f"inputs must be a mapping of the sub-flow's keys, not {type(inputs).__name__}")
    parent_flow = instance.flow_id
    follow_language(definition, instance)  # the parent's language_key goes out of sight in the sub-flow
    try:
        handed = _push(
            instance,
            declaration,
            child,
            child_fsm_id,
            max_depth=config.max_flow_depth,
            reason=f"{actor}: {reason or 'operator started ' + declaration.name}",
            max_completed=config.max_completed_flows,
            policy=_policy(child),
        )
    except FlowError as exc:
        raise OperatorFlowError(str(exc)) from exc
    given = _application_write(child, instance, inputs or {}, config, actor)
    _trace(
        instance,
        config,
        "operator_push_flow",
        actor=actor,
        reason=reason,
        flow=instance.flow_id,
        name=declaration.name,
        mode=declaration.mode,
        parent=parent_flow,
        inputs=[c.key for c in handed + given if c.applied],
    )
    _enter(child, instance, config, instance.current_state, actor)
    settle_between_turns(instance)
    return handed + given


def pop_flow(
    child: FSMDefinition,
    parent: FSMDefinition,
    instance: FSMInstance,
    outputs: Mapping[str, Any] | None,
    actor: str,
    reason: str | None,
    config: EngineConfig,
) -> list[ContextChange]:
    """Finish the active sub-flow as completed and resume its parent where it paused.

    ``outputs`` are the sub-flow's own keys, written first (checked by its declarations); the declared
    output mapping then hands the parent its keys, each checked by the parent's declarations: a value the
    parent would refuse raises ``ContextValidationError`` and nothing changes. The parent is not moved:
    its next turn decides, with the outputs in its context, as after any sub-flow.
    """
    check(instance, actor)
    if not instance.flow_stack:
        raise OperatorFlowError(f"conversation {instance.conversation_id} runs its root flow; there is nothing to pop")
    if outputs is not None and not isinstance(outputs, Mapping):
        raise OperatorError(f"outputs must be a mapping of the sub-flow's keys, not {type(outputs).__name__}")
    _application_write(child, instance, outputs or {}, config, actor)
    policy = _policy(parent)
    if policy is not None:
        for key, value in map_keys(instance.context.data, instance.flow_output_mapping).items():
            _, refusal = policy.vet(key, value, model=False)
            if refusal is not None:
                raise ContextValidationError(
                    f"{parent.name!r} refuses output {key!r}: {refusal.reason}", key=key, rule=refusal.rule
                )
    finished, handed = _pop(
        instance,
        "completed",
        reason=f"{actor}: {reason or 'finished by an operator'}",
        max_completed=config.max_completed_flows,
        policy=policy,
    )
    _trace(
        instance,
        config,
        "operator_pop_flow",
        actor=actor,
        reason=reason,
        flow=finished.flow_id,
        name=finished.flow_name,
        outputs=sorted(finished.outputs),
        resumed=instance.flow_id,
    )
    instance.pending_cancel = False
    instance.updated_at = now()
    settle(parent, instance, lambda: instant(config, instance.updated_at), entered=True)  # the parent's state resumes
    settle_between_turns(instance)
    return handed


def _application_write(
    definition: FSMDefinition, instance: FSMInstance, updates: Mapping[str, Any], config: EngineConfig, actor: str
) -> list[ContextChange]:
    """An operator's write, under the application's rules; its values' origin names the operator."""
    if not updates:
        return []
    changes = apply_update(
        instance.context.data,
        updates,
        source="application",
        max_bytes=config.max_context_bytes,
        policy=_policy(definition),
    )
    note(instance, changes, between_turns("operator", actor=actor))
    return changes


def set_context(
    definition: FSMDefinition,
    instance: FSMInstance,
    updates: Mapping[str, Any],
    actor: str,
    reason: str | None,
    config: EngineConfig,
) -> list[ContextChange]:
    """Write context keys of the active flow as the application (``update_context``'s rules, with an actor).

    Protected keys may be written; declared keys are checked and an invalid value raises
    ``ContextValidationError`` with nothing of the update kept; ``None`` removes a key.
    """
    check(instance, actor)
    if not isinstance(updates, Mapping):
        raise OperatorError(f"updates must be a mapping of keys to values, not {type(updates).__name__}")
    changes = _application_write(definition, instance, updates, config, actor)
    _trace(instance, config, "operator_set_context", actor=actor, reason=reason, keys=[c.key for c in changes])
    instance.updated_at = now()
    return changes


def resume_bot(
    definition: FSMDefinition,
    instance: FSMInstance,
    actor: str,
    state: str | None,
    reason: str | None,
    config: EngineConfig,
) -> None:
    """Hand the conversation back to the bot, where it was or in ``state``.

    Resuming in a state declared ``handoff: true`` does not hand off again: the operator chose it. A
    terminal ``state`` ends the conversation, as ``force_state`` would.
    """
    check(instance, actor)
    if instance.mode != "human":
        raise HandoffError(f"conversation {instance.conversation_id} is not handed off; the bot already has it")
    if state is not None:
        _state(definition, state)
        if instance.flow_stack and definition.get_state(state).is_terminal:
            raise OperatorFlowError(
                f"state {state!r} is terminal in sub-flow {instance.flow_name!r}; resume elsewhere and pop_flow"
            )
    source = instance.current_state
    instance.mode = "bot"
    instance.handoff = None
    _trace(instance, config, "resume_bot", actor=actor, reason=reason, source=source, target=state or source)
    if state is not None and state != source:
        _leave(instance, source)
        instance.current_state = state
        instance.consecutive_digressions = 0
        if definition.get_state(state).is_terminal:
            instance.status = "ended"
            _trace(instance, config, "end", state=state, reason=f"{actor} resumed the bot in a terminal state")
    instance.updated_at = now()
    settle(definition, instance, lambda: instant(config, instance.updated_at), entered=True)


def operator_message(
    instance: FSMInstance, text: str, actor: str, config: EngineConfig, *, message_id: str | None = None
) -> None:
    """Record a person's reply in the transcript (``{"operator": text}``, its id ``message_id`` when given); only
    while a person has it."""
    check(instance, actor)
    if instance.mode != "human":
        raise HandoffError(
            f"conversation {instance.conversation_id} is with the bot; hand it off before posting operator messages"
        )
    instance.context.conversation.add_operator_message(text, id=message_id)
    _prune_transcript(instance, config)
    _trace(instance, config, "operator_message", actor=actor, chars=len(text))
    instance.updated_at = now()


def human_turn(
    definition: FSMDefinition,
    instance: FSMInstance,
    message: str | UserMessage,
    config: EngineConfig,
    *,
    message_id: str | None = None,
) -> TurnOutcome:
    """A user message while a person has the conversation: recorded, and nothing else (no model, no hooks).

    The reply is ``""``: the person answers through ``post_operator_message``. The turn has a record
    (verdict ``human_mode``, no model calls) so explain and the idempotency of ``message_id`` work as for
    any turn.
    """
    started = now()
    user = message if isinstance(message, UserMessage) else UserMessage(text=message)
    message = user.text
    state = instance.current_state
    conversation = instance.context.conversation
    conversation.add_user_message(
        message, id=message_id, at=timestamp(), metadata=user.metadata, parts=user.stored_parts
    )
    _prune_transcript(instance, config)
    instance.turn_count += 1
    handoff = instance.handoff
    (shown,) = _redact((definition,), instance.context.data, message)
    record = TurnRecord(
        index=instance.turn_count,
        message_id=message_id,
        user_message=shown,
        intent="continue",
        state_before=state,
        state_after=state,
        flow_before=instance.flow_id,
        flow_after=instance.flow_id,
        verdict=Verdict(
            kind="human_mode",
            target_state=state,
            reason="a person has the conversation"
            + (f" (handed off by {handoff.actor}: {handoff.reason})" if handoff else "")
            + "; the message was recorded and no model was called",
        ),
        reply="",
        started_at=started,
        finished_at=now(),
    )
    instance.keep_turn(
        record,
        max_turn_records=config.max_turn_records,
        message_id=message_id,
        reply="",
        max_message_ids=config.max_processed_message_ids,
    )
    return TurnOutcome(
        reply="",
        record=record,
        state=state,
        ended=False,
        fsm_id=instance.fsm_id,
        flow_depth=len(instance.flow_stack) + 1,
        mode="human",
    )


__all__ = [
    "check",
    "find_flow",
    "force_state",
    "hand_off",
    "human_turn",
    "operator_message",
    "pop_flow",
    "push_flow",
    "resume_bot",
    "set_context",
]
