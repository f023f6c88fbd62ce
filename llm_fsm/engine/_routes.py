"""Routing a message by its intent: an ordinary step (the decision), a cancel, a sub-flow started or
resumed, a confirmation answered, a side question. Each route returns a ``_Decision``: the verdict, and a
note when the reply must be written again for where the conversation really is."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_fsm.definition._model import FSMDefinition, State
from llm_fsm.engine._actions import forget_visit
from llm_fsm.engine._context import _MISSING
from llm_fsm.engine._effects import Effect, EngineConfig, LoadDefinition, LoadFlow, _policy, _trace
from llm_fsm.engine._flows import find_paused, pop_flow, push_flow, resume_flow
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._languages import conversation_language, follow_language, label, sentence
from llm_fsm.engine._records import (
    ContextChange,
    TransitionEvaluation,
    Verdict,
)
from llm_fsm.engine._transitions import decide, evaluate_condition
from llm_fsm.engine._values import MASK
from llm_fsm.errors import DefinitionError, FlowError


@dataclass
class _Decision:
    """What the intent step decided: the verdict, and a note when the reply must be regenerated."""

    verdict: Verdict
    evaluations: list[TransitionEvaluation] = field(default_factory=list)
    note: str | None = None
    definition: FSMDefinition | None = None
    """The active flow's definition after the decision, when a flow operation changed it."""


def _stay_rejected(state_id: str, reason: str) -> Verdict:
    return Verdict(kind="stay_rejected", target_state=state_id, reason=reason)


def _decision_note(verdict: Verdict, state: State) -> str:
    if not verdict.moved:
        return (
            f"The conversation stays in state {state.id!r}: {verdict.reason}. Do not say that you are moving on; "
            "answer the user's last message for this state and ask for what is still needed."
        )
    return (
        f"The conversation has just moved to state {state.id!r} ({verdict.reason}). "
        "Answer the user's last message as the first message of this state."
    )


def _decide_transition(
    definition: FSMDefinition,
    state_id: str,
    data: dict[str, Any],
    proposal: str | None,
    *,
    confirming: bool = False,
    refused: Sequence[ContextChange] = (),
) -> _Decision:
    state = definition.get_state(state_id)
    if state.confirmation is not None and not confirming:
        # Outside the yes/no routes a confirmation step only moves where the model proposes, and never to on_yes.
        verdict, evaluations = decide(
            definition,
            state_id,
            data,
            proposal,
            guards_fire=False,
            refused_targets=frozenset({state.confirmation.on_yes}),
            refused=refused,
        )
    else:
        verdict, evaluations = decide(definition, state_id, data, proposal, refused=refused)
    moved_elsewhere = verdict.target_state != (proposal or state_id)
    note = None
    if verdict.kind in ("guarded_override", "guarded_fallback", "stay_rejected") or moved_elsewhere:
        note = _decision_note(verdict, definition.get_state(verdict.target_state))
    return _Decision(verdict, evaluations, note)


def _cancel(
    definition: FSMDefinition,
    instance: FSMInstance,
    config: EngineConfig,
    state_before: str,
    *,
    confirmed: bool = False,
) -> Generator[Effect, Any, _Decision]:
    if not definition.cancellable:
        verdict = _stay_rejected(state_before, f"flow {instance.flow_name or definition.name!r} cannot be cancelled")
        return _Decision(verdict, note=_decision_note(verdict, definition.get_state(state_before)))
    if not instance.flow_stack and definition.on_cancel == "restart":
        return _restart(definition, instance, config, state_before)
    if not instance.flow_stack and definition.confirm_cancel and not confirmed:
        # An ending the user cannot take back, on one intent a small model may have misread: ask first.
        instance.pending_cancel = True
        _trace(instance, config, "cancel_pending", flow=instance.flow_id, state=state_before)
        verdict = Verdict(
            kind="cancel_pending",
            target_state=state_before,
            reason="the user asked to cancel; asking them to confirm before the conversation ends",
        )
        note = (
            "The user seems to want to cancel. Nothing is cancelled yet. Ask them in one short sentence whether "
            f"they really want to cancel ({definition.description.strip().rstrip('.')}); yes ends the "
            "conversation, no carries on where it was. Ask nothing else. For example: "
            f"'{sentence('cancel_question', conversation_language(definition, instance))}'"
        )
        return _Decision(verdict, note=note)
    if not instance.flow_stack:
        instance.status = "cancelled"
        _trace(instance, config, "cancel", flow=instance.flow_id, state=state_before, scope="conversation")
        verdict = Verdict(
            kind="conversation_cancelled", target_state=state_before, reason="the user cancelled the conversation"
        )
        return _Decision(verdict)
    finished, _ = pop_flow(
        instance, "cancelled", reason="cancelled by the user", max_completed=config.max_completed_flows
    )
    _trace(
        instance,
        config,
        "cancel",
        flow=finished.flow_id,
        name=finished.flow_name,
        state=state_before,
        resumed=instance.flow_id,
    )
    parent = yield LoadDefinition(instance.fsm_id, instance.definition_hash)
    verdict = Verdict(
        kind="flow_cancelled",
        target_state=instance.current_state,
        reason=f"sub-flow {finished.flow_name!r} cancelled by the user; {instance.flow_name or parent.name!r} resumed",
    )
    note = (
        f"The user cancelled {finished.flow_name!r}. Confirm that in one short sentence, then repeat the question "
        "of the current state."
    )
    return _Decision(verdict, note=note, definition=parent)


def _restart(definition: FSMDefinition, instance: FSMInstance, config: EngineConfig, state_before: str) -> _Decision:
    """``on_cancel: restart``: back to the initial state with what the user gave cleared.

    Kept: keys the application provides (``application_context_keys``, protected and application-written
    keys) and ``_``-prefixed keys, which no user wrote; everything else collected is removed.
    """
    kept = definition.provided_context_keys
    data = instance.context.data
    cleared = sorted(k for k in data if k not in kept and not str(k).startswith("_"))
    for key in cleared:
        del data[key]
    cleared += _clear_derived_outputs(definition, data, kept)
    forget_visit(instance, state_before)
    instance.current_state = definition.initial_state
    instance.consecutive_digressions = 0
    _trace(
        instance,
        config,
        "cancel",
        flow=instance.flow_id,
        state=state_before,
        scope="restart",
        target=definition.initial_state,
        cleared=cleared,
    )
    verdict = Verdict(
        kind="conversation_restarted",
        target_state=definition.initial_state,
        reason=f"the user cancelled; back to {definition.initial_state!r} with {len(cleared)} collected key(s) cleared",
    )
    language = conversation_language(definition, instance)
    note = (
        "The user cancelled what they were doing: everything they had given was cleared and the conversation is "
        f"back at its start. Say so in one short sentence, e.g. '{sentence('cancelled', language)}', and nothing else."
    )
    return _Decision(verdict, note=note)


def _clear_derived_outputs(definition: FSMDefinition, data: dict[str, Any], kept: set[str]) -> list[str]:
    """Remove the outputs of actions that take an input the user gave (``order.status`` looked up from the order id
    the user said): a restart forgets those inputs, and results computed from them would still steer the guards.
    Outputs of actions whose inputs the application provides (a tier looked up from ``customer_id``) are kept."""
    removed = []
    for state in definition.states.values():
        for action in state.actions or ():
            from_user = any(
                (top := path.split(".", 1)[0]) not in kept and not top.startswith("_") for path in action.input_paths
            )
            for path in action.output_paths if from_user else ():
                parts = path.split(".")
                parents = [data]
                for part in parts[:-1]:
                    child = parents[-1].get(part)
                    if not isinstance(child, dict):
                        break
                    parents.append(child)
                else:
                    if parents[-1].pop(parts[-1], _MISSING) is _MISSING:
                        continue
                    removed.append(path)
                    for depth in range(len(parents) - 1, 0, -1):  # parents the removal left empty go too
                        if not parents[depth]:
                            del parents[depth - 1][parts[depth - 1]]
    return removed


def _what_to_change(definition: FSMDefinition, instance: FSMInstance, keys: list[str] | None) -> str:
    """The note for a plain "no" at a confirmation step: stay, and ask what to change (naming what may, in the
    conversation's language)."""
    which = ""
    if keys:
        which = " They may change: " + ", ".join(label(definition, instance, key) for key in keys) + "."
    question = sentence("what_to_change", conversation_language(definition, instance))
    return (
        "The user said no to the read-back and gave no new value. Nothing is confirmed and the conversation stays "
        "in this step. Ask in one short sentence what they would like to change."
        + which
        + f" For example: '{question}'"
    )


def _not_changeable(
    definition: FSMDefinition, keys: list[str], update: dict[str, Any]
) -> tuple[dict[str, Any], list[ContextChange]]:
    """Split a model update at a confirmation step into what may change there and what is refused."""
    if not isinstance(update, dict):
        return update, []
    kept: dict[str, Any] = {}
    refused: list[ContextChange] = []
    for key, value in update.items():
        if any(key == k or key.startswith(k + ".") for k in keys):
            kept[key] = value
            continue
        found = definition.declaration_for(key)
        shown = MASK if found is not None and found[1].sensitive else value
        refused.append(
            ContextChange(
                key=key,
                value=shown,
                applied=False,
                reason=f"not changeable at this confirmation (may change: {', '.join(keys) or 'nothing'})",
                rule="not_changeable",
            )
        )
    return kept, refused


def _start_flow(
    definition: FSMDefinition,
    instance: FSMInstance,
    config: EngineConfig,
    state_before: str,
    name: str | None,
) -> Generator[Effect, Any, _Decision]:
    declared = {d.name: d for d in reversed(definition.flows_for(state_before))}
    declaration = declared.get(name or "")
    if declaration is None:
        verdict = _stay_rejected(state_before, f"no sub-flow named {name!r} is declared in state {state_before!r}")
        return _Decision(verdict, note=_decision_note(verdict, definition.get_state(state_before)))
    results = [evaluate_condition(c, instance.context.data) for c in declaration.conditions or ()]
    if not all(r.holds for r in results):
        failed = ", ".join(f"'{r.description}'" for r in results if not r.holds)
        verdict = _stay_rejected(state_before, f"sub-flow {name!r} refused: condition not met: {failed}")
        return _Decision(verdict, note=_decision_note(verdict, definition.get_state(state_before)))
    try:
        child_id, child = yield LoadFlow(declaration, definition)
    except DefinitionError as exc:
        verdict = _stay_rejected(state_before, f"sub-flow {name!r} could not be loaded: {exc.message}")
        return _Decision(verdict, note=_decision_note(verdict, definition.get_state(state_before)))
    parent_flow = instance.flow_id
    follow_language(
        definition, instance
    )  # a switch this turn wrote is in the parent's context, out of the child's sight
    try:
        inputs = push_flow(
            instance,
            declaration,
            child,
            child_id,
            max_depth=config.max_flow_depth,
            reason=f"user asked for {declaration.name}",
            max_completed=config.max_completed_flows,
            policy=_policy(child),
        )
    except FlowError as exc:
        verdict = _stay_rejected(state_before, str(exc))
        return _Decision(verdict, note=_decision_note(verdict, definition.get_state(state_before)))
    _trace(
        instance,
        config,
        "push" if declaration.mode == "call" else "link",
        flow=instance.flow_id,
        name=declaration.name,
        parent=parent_flow,
        inputs=[c.key for c in inputs],
    )
    verdict = Verdict(
        kind="flow_started",
        target_state=instance.current_state,
        reason=f"declared sub-flow {declaration.name!r} started ({declaration.mode})",
    )
    note = (
        f"The user asked for {declaration.name!r}, which has just started. Begin it with the current state's purpose."
    )
    return _Decision(verdict, note=note, definition=child)


def _resume(
    definition: FSMDefinition, instance: FSMInstance, config: EngineConfig, state_before: str, name: str | None
) -> Generator[Effect, Any, _Decision]:
    index = find_paused(instance, name)
    if index is None:
        verdict = _stay_rejected(state_before, f"no paused flow named {name!r}")
        return _Decision(verdict, note=_decision_note(verdict, definition.get_state(state_before)))
    cancelled = resume_flow(instance, index, reason=f"user resumed {name}", max_completed=config.max_completed_flows)
    _trace(instance, config, "resume", flow=instance.flow_id, cancelled=[f.flow_id for f in cancelled])
    resumed = yield LoadDefinition(instance.fsm_id, instance.definition_hash)
    verdict = Verdict(
        kind="flow_resumed",
        target_state=instance.current_state,
        reason=f"paused flow {name!r} resumed; {len(cancelled)} flow(s) above it cancelled",
    )
    note = "The user went back to this task. Continue it where it was paused: repeat the current state's question."
    return _Decision(verdict, note=note, definition=resumed)


def _confirmation(
    definition: FSMDefinition,
    instance: FSMInstance,
    config: EngineConfig,
    state: State,
    intent: str,
    proposal: str | None,
    corrected: bool,
) -> Generator[Effect, Any, _Decision]:
    confirmation = state.confirmation
    assert confirmation is not None
    if intent == "confirm":
        return _decide_transition(definition, state.id, instance.context.data, confirmation.on_yes, confirming=True)
    if corrected:
        verdict = Verdict(
            kind="stay", target_state=state.id, reason="values changed during confirmation; confirming again"
        )
        note = None if not proposal or proposal == state.id else _decision_note(verdict, state)
        return _Decision(verdict, note=note)
    if confirmation.on_no == "cancel":
        return (yield from _cancel(definition, instance, config, state.id))
    if confirmation.on_no:
        return _decide_transition(definition, state.id, instance.context.data, confirmation.on_no, confirming=True)
    verdict = Verdict(kind="stay", target_state=state.id, reason="the user said no; asking what to change")
    return _Decision(verdict, note=_what_to_change(definition, instance, confirmation.changeable_keys))


def _digression(definition: FSMDefinition, instance: FSMInstance, config: EngineConfig, state: State) -> _Decision:
    instance.consecutive_digressions += 1
    count = instance.consecutive_digressions
    _trace(instance, config, "digression", state=state.id, count=count)
    verdict = Verdict(
        kind="digression", target_state=state.id, reason=f"side question ({count} in a row); state and stack unchanged"
    )
    note = None
    if count > definition.max_consecutive_digressions:
        note = (
            f"The user has asked {count} side questions in a row. Answer in one sentence at most if you can, "
            "then steer back to the current purpose and repeat its question."
        )
    return _Decision(verdict, note=note)
