"""One turn, and the opening of a conversation, as pure generators.

The turn logic is written once, as a generator that *yields* the effects it
needs (an LLM call, a hook call) and receives their results. ``llm_fsm.manager`` drives
it synchronously or asynchronously; this module never does I/O, never reads
the clock except for timestamps, and works on an instance the driver may
throw away: if anything raises, nothing of the turn is kept, and the user's
message is not left dangling in the history.
"""

from __future__ import annotations

import functools
from typing import Any

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._actions import (
    ActionMemo,
    ActionScope,
    ActionsRun,
    CallAction,
    redirect,
    run_for,
)
from llm_fsm.engine._context import apply_update
from llm_fsm.engine._data import now
from llm_fsm.engine._effects import (
    DEFAULT_MAX_PROCESSED_MESSAGE_IDS,
    DEFAULT_MAX_TRACE_EVENTS,
    AwaitMessage,
    CallHook,
    CallLLM,
    Decided,
    Effect,
    EngineConfig,
    LoadDefinition,
    LoadFlow,
    TurnGenerator,
    TurnOutcome,
    _apply_application,
    _hook,
    _policy,
    _trace,
)
from llm_fsm.engine._handoff import hand_off, hand_off_declared
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._messages import UserMessage, entry_role, entry_text, timestamp
from llm_fsm.engine._moves import _chain, _complete_finished_flows, _move, _scope, _took_guarded, arrive_or_redirect
from llm_fsm.engine._prompts import OPENING_MESSAGE, PromptBuilder
from llm_fsm.engine._records import (
    ContextChange,
    LLMCallRecord,
    LLMResult,
    TurnRecord,
    Verdict,
)
from llm_fsm.engine._routes import (
    _cancel,
    _confirmation,
    _decide_transition,
    _Decision,
    _decision_note,
    _digression,
    _not_changeable,
    _resume,
    _start_flow,
)
from llm_fsm.engine._turn_request import _request
from llm_fsm.engine._values import MASK, REASK_RULES, Grounding
from llm_fsm.errors import BudgetExceededError, InvalidTransitionError

# --- helpers ---------------------------------------------------------------------------


def _check_budget(instance: FSMInstance, config: EngineConfig) -> None:
    """Refuse a turn of a conversation that has spent its budget, before any model call (nothing is saved)."""
    usage = instance.usage
    if config.max_conversation_tokens is not None and usage.tokens >= config.max_conversation_tokens:
        raise BudgetExceededError(
            f"conversation {instance.conversation_id} has used {usage.tokens:,} tokens of its "
            f"{config.max_conversation_tokens:,} (EngineConfig.max_conversation_tokens)"
        )
    if config.max_conversation_cost_usd is not None and usage.cost_usd >= config.max_conversation_cost_usd:
        raise BudgetExceededError(
            f"conversation {instance.conversation_id} has cost ${usage.cost_usd:.4f} of its "
            f"${config.max_conversation_cost_usd:.4f} (EngineConfig.max_conversation_cost_usd)"
        )


def _grounding(instance: FSMInstance, message: str) -> Grounding:
    """What a grounded value may be taken from: the user's stored messages, this one, and the assistant's (or a
    person's, during a handoff) messages in the history window the model sees (an offer accepted, perhaps after
    a side question)."""
    conversation = instance.context.conversation
    exchanges = conversation.exchanges
    users = [entry_text(entry) for entry in exchanges if entry_role(entry) == "user"]
    window = exchanges[-2 * conversation.max_history_size :] if conversation.max_history_size > 0 else []
    # a human agent's words are offers too: the user accepting what an operator proposed grounds it
    offers = [entry_text(entry) for entry in window if entry_role(entry) in ("assistant", "operator")]
    return Grounding([*users, message], offers)


def _redact(definitions: tuple[FSMDefinition, ...], data: dict[str, Any], *texts: str) -> list[str]:
    """``texts`` with the stored values of sensitive keys masked: the explain record quotes the user.

    The keys of every flow the turn ran in count (a sub-flow's value handed to a parent that calls it sensitive).
    """
    secrets = [
        str(value)
        for definition in definitions
        for key, declaration in (definition.context_keys or {}).items()
        if declaration.sensitive and isinstance(value := data.get(key), (str, int, float)) and len(str(value)) >= 3
    ]
    out = []
    for text in texts:
        for secret in secrets:
            text = text.replace(secret, MASK)
        out.append(text)
    return out


_HANDOFF_NOTE = (
    "A person (a colleague) takes over this conversation now. Tell the user so in one or two short sentences; "
    "ask nothing more and do not say why a system failed."
)


def _hand_off_for_actions(instance: FSMInstance, config: EngineConfig, scope: ActionScope) -> bool:
    """Hand off when an action asked for a person this turn (its ``HandOff`` or ``on_error: handoff``)."""
    if scope.handoff is None or instance.status != "active" or instance.mode != "bot":
        return False
    hand_off(instance, scope.handoff, "action", config)
    return True


def _results_note(scope: ActionScope) -> str | None:
    """When actions wrote results this turn, the model's reply (written before they ran) cannot mention them:
    the reply is written again with them in the context. One more call, only on turns whose actions wrote."""
    written = [path for r in scope.records if r.outcome in ("ok", "replayed") for path in r.outputs]
    if not written:
        return None
    return (
        f"A backend call has just returned {', '.join(dict.fromkeys(written))} (now in the current context). "
        "Answer the user's last message for the current state, using these values where they matter."
    )


def _reask_note(definition: FSMDefinition, refused: list[ContextChange]) -> str | None:
    """The instruction to ask again for values that were refused, saying what was wrong with each."""
    lines = []
    for change in refused:
        found = definition.declaration_for(change.key)
        declaration = found[1] if found else None
        label = declaration.label(change.key) if declaration else change.key
        # an invented value is not repeated: quoted in the reply, it would ground itself on the next turn
        reason = "the user has not said it" if change.rule == "ungrounded" else change.reason
        why = (declaration.invalid_message if declaration else None) or reason
        lines.append(f"- {label}: {why}")
    if not lines:
        return None
    return (
        "These values were NOT accepted and are not stored:\n"
        + "\n".join(lines)
        + "\nDo not treat them as known. Say briefly what was wrong and ask the user for them again."
    )


def _prune_transcript(instance: FSMInstance, config: EngineConfig) -> None:
    """Keep the stored transcript bounded; the overflow goes to the store's archive, not the void."""
    exchanges = instance.context.conversation.exchanges
    overflow = len(exchanges) - config.max_stored_messages
    if overflow > 0:
        instance.archive_outbox.extend(exchanges[:overflow])
        del exchanges[:overflow]
        instance.context.conversation.archived_messages += overflow


# --- the opening -----------------------------------------------------------------------


def run_opening(
    definition: FSMDefinition,
    instance: FSMInstance,
    builder: PromptBuilder,
    config: EngineConfig,
    initial_context: Any = None,
    *,
    schema_sent: bool = False,
    action_memo: ActionMemo | None = None,
) -> TurnGenerator:
    """Create-time work: initial context, ``on_start``, the initial state's actions, and the model's opening message.

    ``schema_sent`` (here and in ``run_turn``): the LLM interface sends the reply
    schema as ``response_format``, so prompts need no format example.
    """
    changes = _apply_application(definition, instance, initial_context, config, "initial_context")
    _trace(instance, config, "start", state=instance.current_state, fsm_id=instance.fsm_id)
    additions = yield _hook("on_start", instance)
    changes += _apply_application(definition, instance, additions, config, "on_start")
    scope = _scope(config, None, action_memo)
    _, entered = yield from arrive_or_redirect(definition, instance, config, None, OPENING_MESSAGE, scope)
    changes += entered
    state = definition.get_state(instance.current_state)
    result: LLMResult = yield CallLLM(
        _request(
            builder, definition, instance, state, OPENING_MESSAGE, "opening", allow_moves=False, schema_sent=schema_sent
        )
    )
    reply = result.response.message
    instance.usage.add(LLMCallRecord.of("opening", result))
    instance.context.conversation.add_assistant_message(reply)
    _hand_off_for_actions(instance, config, scope)
    hand_off_declared(definition, instance, config)
    if state.is_terminal:
        instance.status = "ended"
        _trace(instance, config, "end", state=state.id, reason="initial state is terminal")
    instance.updated_at = now()
    return TurnOutcome(
        reply=reply,
        changes=changes,
        state=instance.current_state,
        ended=instance.status != "active",
        mode=instance.mode,
    )


# --- a turn ----------------------------------------------------------------------------


def run_turn(
    definition: FSMDefinition,
    instance: FSMInstance,
    message: str | UserMessage,
    builder: PromptBuilder,
    config: EngineConfig,
    *,
    message_id: str | None = None,
    schema_sent: bool = False,
    action_memo: ActionMemo | None = None,
) -> TurnGenerator:
    """One user message: understand, update, decide, reply. Mutates ``instance`` (a disposable copy).

    ``action_memo``: the driver passes the same ``ActionMemo`` to every attempt of one turn (a turn runs again when its
    save loses a race), so an action's result is reused rather than the function called twice.

    Every message goes through the same understanding call; the model's ``intent``
    then routes it (digression, cancel, sub-flow start or resume, confirmation,
    or an ordinary step), and each route obeys the same invariant as transitions.

    ``message`` is the user's text, or a checked ``UserMessage`` (``engine._messages.check_message``): its text is
    what the turn reasons with, its parts go to the model, and its parts and metadata are stored with it.
    """
    user = message if isinstance(message, UserMessage) else UserMessage(text=message)
    message = user.text
    _check_budget(instance, config)
    received = timestamp()
    started = now()
    state_before = instance.current_state
    flow_before = instance.flow_id
    state = definition.get_state(state_before)
    calls: list[LLMCallRecord] = []

    changes = _apply_application(
        definition, instance, (yield _hook("before_llm", instance, message=message)), config, "before_llm"
    )

    result: LLMResult = yield CallLLM(
        _request(
            builder,
            definition,
            instance,
            state,
            message,
            "turn",
            schema_sent=schema_sent,
            user_content=user.model_content,
        )
    )
    calls.append(LLMCallRecord.of("turn", result))
    response = result.response
    proposal = response.transition.target_state or None
    intent = response.intent

    update = response.transition.context_update
    unchangeable: list[ContextChange] = []
    if state.confirmation is not None and state.confirmation.changeable_keys is not None:
        update, unchangeable = _not_changeable(definition, state.confirmation.changeable_keys, update)
    model_changes = apply_update(
        instance.context.data,
        update,
        source="model",
        protected=definition.application_only_keys,
        max_bytes=config.max_context_bytes,
        policy=_policy(definition, functools.partial(_grounding, instance, message)),
    )
    model_changes += unchangeable
    changes += model_changes
    if model_changes:
        _trace(
            instance,
            config,
            "context_update",
            source="model",
            applied=[c.key for c in model_changes if c.applied],
            dropped={c.key: c.reason for c in model_changes if not c.applied},
        )
    additions = yield _hook("after_context_update", instance, message=message)
    changes += _apply_application(definition, instance, additions, config, "after_context_update")
    if intent != "digression":
        instance.consecutive_digressions = 0

    route: str = intent
    if instance.pending_cancel:  # the last turn asked "do you want to cancel?"
        instance.pending_cancel = False
        if intent in ("confirm", "cancel"):
            route = "cancel_confirmed"
        else:
            _trace(instance, config, "cancel_declined", state=state_before, intent=intent)
            route = "continue" if intent == "deny" else intent  # "no, don't cancel" is no answer to a read-back

    # actions waiting for this state's data run before the decision, so its guards see their results; not on a
    # cancel: the user is leaving, and a backend call (or its failure, or a handoff) must not take the turn elsewhere
    # (if the conversation goes on, they run on its next turn)
    scope = _scope(config, message_id, action_memo)
    collected = ActionsRun()
    if route not in ("cancel", "cancel_confirmed"):
        collected = yield from run_for(definition, instance, state, "collected", scope)
    changes += collected.changes
    actions_wrote = any(c.applied for c in collected.changes)

    if collected.failure is not None:
        failed = redirect(definition, collected.failure, scope)
        decision = _Decision(failed, note=_decision_note(failed, definition.get_state(failed.target_state)))
    elif collected.handoff is not None:
        decision = _Decision(
            Verdict(kind="handed_off", target_state=state_before, reason=f"{collected.handoff}; a person takes over")
        )
    elif route == "digression":
        decision = _digression(definition, instance, config, state)
    elif route in ("cancel", "cancel_confirmed"):
        decision = yield from _cancel(definition, instance, config, state_before, confirmed=route == "cancel_confirmed")
    elif route == "start_flow":
        decision = yield from _start_flow(definition, instance, config, state_before, response.flow)
    elif route == "resume_flow":
        decision = yield from _resume(definition, instance, config, state_before, response.flow)
    elif state.confirmation is not None and route in ("confirm", "deny"):
        corrected = any(c.applied for c in model_changes)
        decision = yield from _confirmation(definition, instance, config, state, intent, proposal, corrected)
    else:
        decision = _decide_transition(definition, state_before, instance.context.data, proposal)

    verdict = decision.verdict
    if config.strict and verdict.kind == "stay_rejected":
        raise InvalidTransitionError(verdict.reason, explanation=decision.evaluations)
    active = decision.definition or definition
    note = decision.note
    chained: list[Verdict] = []

    if verdict.moved:
        proposed = verdict
        verdict, moved_changes, wrote = yield from _move(active, instance, config, verdict, message, scope)
        changes += moved_changes
        actions_wrote = actions_wrote or wrote
        if verdict is not proposed:
            note = _decision_note(verdict, active.get_state(verdict.target_state))
        if (
            decision.definition is None
            and verdict.kind != "action_error"
            and (
                _took_guarded(definition, state_before, verdict)
                or any(c.applied for c in model_changes)
                or actions_wrote
            )
        ):
            chained, chain_changes = yield from _chain(active, instance, config, message, scope)
            changes += chain_changes
            if chained:
                note = _decision_note(chained[-1], active.get_state(instance.current_state))
    elif verdict.kind == "flow_started" and decision.definition is not None:
        redirected, entered = yield from arrive_or_redirect(active, instance, config, None, message, scope)
        changes += entered
        if redirected is not None:
            verdict = redirected
            note = _decision_note(verdict, active.get_state(verdict.target_state))
    elif verdict.kind == "stay_rejected":
        _trace(instance, config, "rejection", proposal=proposal, intent=intent, reason=verdict.reason)

    if instance.status == "active":
        active, output_changes, completion_note = yield from _complete_finished_flows(
            active, instance, config, message, scope
        )
        changes += output_changes
        note = completion_note or note

    if _hand_off_for_actions(instance, config, scope):
        note = _HANDOFF_NOTE
    if instance.status == "active" and (instance.current_state != state_before or instance.flow_id != flow_before):
        hand_off_declared(active, instance, config)  # the reply for the state is still given, then a person has it

    reply = response.message
    new_state = active.get_state(instance.current_state)
    if note is None:
        note = _results_note(scope)
    reask = _reask_note(definition, [c for c in model_changes if not c.applied and c.rule in REASK_RULES])
    if reask is not None:
        note = reask if note is None else f"{note}\n{reask}"
    if unchangeable:
        allowed = (state.confirmation.changeable_keys if state.confirmation else None) or []
        told = (
            "These values cannot be changed at this step and were NOT stored: "
            + ", ".join(c.key for c in unchangeable)
            + ". Say so briefly"
            + (f" and ask which of these they would like to change: {', '.join(allowed)}." if allowed else ".")
        )
        note = told if note is None else f"{note}\n{told}"
    regenerating = note is not None and instance.status == "active"
    yield Decided(
        state=instance.current_state,
        verdict=verdict.kind,
        ended=instance.status != "active" or new_state.is_terminal,
    )
    if not regenerating and result.message_pending:
        reply = yield AwaitMessage()
    if regenerating:
        # The model wrote its reply for a situation the engine did not accept: ask again for
        # the state actually reached, so the user never reads a reply meant for another state.
        regenerated: LLMResult = yield CallLLM(
            _request(
                builder,
                active,
                instance,
                new_state,
                message,
                "regenerate",
                note=note,
                allow_moves=False,
                schema_sent=schema_sent,
                user_content=user.model_content,
            )
        )
        calls.append(LLMCallRecord.of("regenerate", regenerated))
        reply = regenerated.response.message

    if new_state.is_terminal and instance.status == "active":
        instance.status = "ended"
        _trace(instance, config, "end", state=new_state.id)
    if instance.status != "active":
        additions = yield _hook("on_end", instance, message=message, previous_state=state_before, verdict=verdict)
        changes += _apply_application(active, instance, additions, config, "on_end")

    conversation = instance.context.conversation
    conversation.add_user_message(message, id=message_id, at=received, metadata=user.metadata, parts=user.stored_parts)
    conversation.add_assistant_message(reply)
    _prune_transcript(instance, config)

    instance.turn_count += 1
    shown_message, shown_reply = _redact((definition, active), instance.context.data, message, reply)
    record = TurnRecord(
        index=instance.turn_count,
        message_id=message_id,
        user_message=shown_message,
        intent=intent,
        state_before=state_before,
        state_after=instance.current_state,
        flow_before=flow_before,
        flow_after=instance.flow_id,
        proposal=proposal,
        context_changes=changes,
        evaluations=decision.evaluations,
        verdict=verdict,
        chained=chained,
        llm_calls=calls,
        actions=scope.records,
        reply=shown_reply,
        started_at=started,
        finished_at=now(),
    )
    for call in calls:
        instance.usage.add(call)
    instance.turns.append(record)
    if len(instance.turns) > config.max_turn_records:
        del instance.turns[: len(instance.turns) - config.max_turn_records]
    if message_id is not None:
        instance.processed_messages[message_id] = reply
        while len(instance.processed_messages) > config.max_processed_message_ids:
            instance.processed_messages.pop(next(iter(instance.processed_messages)))
    instance.updated_at = record.finished_at
    return TurnOutcome(
        reply=reply,
        record=record,
        changes=changes,
        state=instance.current_state,
        ended=instance.status != "active",
        fsm_id=instance.fsm_id,
        flow_depth=len(instance.flow_stack) + 1,
        mode=instance.mode,
    )


__all__ = [
    "DEFAULT_MAX_PROCESSED_MESSAGE_IDS",
    "DEFAULT_MAX_TRACE_EVENTS",
    "AwaitMessage",
    "CallAction",
    "CallHook",
    "Decided",
    "CallLLM",
    "Effect",
    "EngineConfig",
    "LoadDefinition",
    "LoadFlow",
    "TurnGenerator",
    "TurnOutcome",
    "run_opening",
    "run_turn",
]
