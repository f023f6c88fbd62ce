"""Moving inside a flow once the turn has decided: the state, its trace event, ``on_transition``, the
actions of the states left and entered, guarded steps followed in the same turn (chaining), and the
parent's decision when a finished sub-flow hands back."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from llm_fsm.definition._model import FSMDefinition, State
from llm_fsm.engine._actions import (
    ActionMemo,
    ActionScope,
    ActionsRun,
    arrive,
    forget_visit,
    redirect,
    run_for,
)
from llm_fsm.engine._effects import Effect, EngineConfig, LoadDefinition, _apply_application, _hook, _policy, _trace
from llm_fsm.engine._flows import pop_flow
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._records import (
    ContextChange,
    Verdict,
)
from llm_fsm.engine._transitions import decide_verdict


def _took_guarded(definition: FSMDefinition, state_id: str, verdict: Verdict) -> bool:
    """Whether the turn moved by a guarded transition.

    A judgment move that stores nothing new ("let me change the date") is the model's choice of a state to
    be in, and chaining straight out of it would undo it; with new values (the new date given at once, or a
    whole form in the first message) the chain goes on (the caller checks that).
    """
    index = verdict.transition_index
    transitions = definition.transitions_from(state_id)
    return index is not None and 0 <= index < len(transitions) and transitions[index].is_guarded


def _scope(config: EngineConfig, message_id: str | None, memo: ActionMemo | None) -> ActionScope:
    return ActionScope(
        message_id=message_id,
        memo=ActionMemo() if memo is None else memo,
        max_bytes=config.max_context_bytes,
        max_trace_events=config.max_trace_events,
    )


def _move(
    definition: FSMDefinition,
    instance: FSMInstance,
    config: EngineConfig,
    verdict: Verdict,
    message: str,
    scope: ActionScope,
) -> Generator[Effect, Any, tuple[Verdict, list[ContextChange], bool]]:
    """Take a move inside the active flow: the state, its trace event, ``on_transition``, and the actions of the
    states left and entered. A failed action whose ``on_error`` names a state moves there instead (its source's
    ``exit`` actions do not run). Returns the verdict that stands, the changes, and whether actions wrote anything.
    """
    changes: list[ContextChange] = []
    wrote = False
    while True:
        source = instance.current_state
        instance.current_state = verdict.target_state
        _trace(
            instance,
            config,
            "transition",
            source=source,
            target=verdict.target_state,
            kind=verdict.kind,
            reason=verdict.reason,
        )
        additions = yield _hook("on_transition", instance, message=message, previous_state=source, verdict=verdict)
        changes += _apply_application(definition, instance, additions, config, "on_transition")
        left = None if verdict.kind == "action_error" else definition.get_state(source)
        if left is None:
            if source == verdict.target_state == scope.failed_in:
                # on_error names the failed action's own state ("ask again"): the conversation stays, and arriving
                # anew would replay the failure and raise; the failed call runs again once an input changes
                return verdict, changes, wrote
            forget_visit(instance, source)  # left without its exit actions, but left: a return visit runs them anew
        arrived: ActionsRun = yield from arrive(
            definition, instance, left, definition.get_state(verdict.target_state), scope
        )
        changes += arrived.changes
        wrote = wrote or any(c.applied for c in arrived.changes)
        if arrived.failure is None:
            return verdict, changes, wrote
        verdict = redirect(definition, arrived.failure, scope)


def arrive_or_redirect(
    definition: FSMDefinition,
    instance: FSMInstance,
    config: EngineConfig,
    source: State | None,
    message: str,
    scope: ActionScope,
) -> Generator[Effect, Any, tuple[Verdict | None, list[ContextChange]]]:
    """The actions of arriving in the current state (from ``source``, or at a start: the conversation's, a
    sub-flow's); a failure whose ``on_error`` names a state moves there. Returns that move's verdict, if any."""
    arrived = yield from arrive(definition, instance, source, definition.get_state(instance.current_state), scope)
    if arrived.failure is None:
        return None, list(arrived.changes)
    verdict, moved, _ = yield from _move(
        definition, instance, config, redirect(definition, arrived.failure, scope), message, scope
    )
    return verdict, [*arrived.changes, *moved]


def _chain(
    definition: FSMDefinition, instance: FSMInstance, config: EngineConfig, message: str, scope: ActionScope
) -> Generator[Effect, Any, tuple[list[Verdict], list[ContextChange]]]:
    """Follow guarded transitions that already hold from the state the turn reached (forms filled in one turn).

    Only the engine's own kind of move: a guarded transition whose conditions hold, the one ``decide`` picks with
    no proposal. Stops at a confirmation step (the user must say yes), a terminal state, a state with
    ``auto_advance: false``, a handoff state, a state already visited this turn, or after
    ``max_chained_transitions`` steps.
    """
    steps: list[Verdict] = []
    changes: list[ContextChange] = []
    visited = {instance.current_state}
    while len(steps) < config.max_chained_transitions and instance.status == "active" and scope.handoff is None:
        state = definition.get_state(instance.current_state)
        if state.is_terminal or state.confirmation is not None or not state.auto_advance or state.handoff:
            break  # (a handoff state: a person takes the conversation there, so nothing passes it by)
        verdict = decide_verdict(definition, state.id, instance.context.data, None)
        if not verdict.moved or verdict.target_state in visited:
            break
        step = Verdict(
            kind="chained",
            target_state=verdict.target_state,
            reason=f"from {state.id!r}: guarded transition to {verdict.target_state!r} already holds",
            transition_index=verdict.transition_index,
        )
        taken, moved_changes, _ = yield from _move(definition, instance, config, step, message, scope)
        steps.append(taken)
        changes += moved_changes
        visited.add(taken.target_state)
        if taken.kind == "action_error":
            break
    return steps, changes


def _complete_finished_flows(
    definition: FSMDefinition, instance: FSMInstance, config: EngineConfig, message: str, scope: ActionScope
) -> Generator[Effect, Any, tuple[FSMDefinition, list[ContextChange], str | None]]:
    """While the active sub-flow sits in a terminal state, pop it and hand its outputs to its parent.

    The resumed parent's state runs its ``collected`` actions (the outputs may have completed their inputs), then
    gets one decision with no proposal: its guarded transitions may fire on the outputs and the actions' results
    (conditions met means move on), nothing else can move it.
    """
    changes: list[ContextChange] = []
    note = None
    while instance.flow_stack and definition.get_state(instance.current_state).is_terminal:
        frame = instance.flow_stack[-1]
        parent: FSMDefinition = yield LoadDefinition(frame.fsm_id, frame.definition_hash)
        finished, outputs = pop_flow(
            instance,
            "completed",
            reason="reached a terminal state",
            max_completed=config.max_completed_flows,
            policy=_policy(parent),
        )
        changes += outputs
        _trace(
            instance,
            config,
            "pop",
            flow=finished.flow_id,
            name=finished.flow_name,
            outputs=sorted(finished.outputs),
            resumed=instance.flow_id,
        )
        if outputs:
            _trace(
                instance,
                config,
                "context_update",
                source=f"sub-flow:{finished.flow_name}",
                keys=[c.key for c in outputs],
            )
        definition = parent
        # outputs may complete the inputs of the parent state's collected actions: they run before its decision,
        # as in any turn, so its guards see their results (and it does not ask for what it has just been given)
        paused_in = definition.get_state(instance.current_state)
        collected = yield from run_for(definition, instance, paused_in, "collected", scope)
        changes += collected.changes
        verdict: Verdict | None = None
        if collected.failure is not None:
            _, moved, _ = yield from _move(
                definition, instance, config, redirect(definition, collected.failure, scope), message, scope
            )
            changes += moved
        elif collected.handoff is None:  # (a handoff keeps the parent where it is; the turn hands off at its end)
            verdict = decide_verdict(definition, instance.current_state, instance.context.data, None)
        if verdict is not None and verdict.moved:
            _trace(
                instance,
                config,
                "transition",
                source=instance.current_state,
                target=verdict.target_state,
                kind=verdict.kind,
                reason=verdict.reason,
            )
            source = definition.get_state(instance.current_state)
            instance.current_state = verdict.target_state
            _, arrival_changes = yield from arrive_or_redirect(definition, instance, config, source, message, scope)
            changes += arrival_changes
        note = (
            f"The sub-flow {finished.flow_name!r} has just finished"
            + (f" with results {sorted(finished.outputs)}" if finished.outputs else "")
            + ". Tell the user the outcome in one sentence and continue with the current state's purpose."
        )
    return definition, changes, note
