"""A timer's turn: what an armed ``after`` entry does when it is due, as a pure generator like a user's turn.

The runtime claims a due timer, loads the conversation and runs this on it (``runtime._timers``): the entry says
its fixed text, has the model write a nudge from its instructions, moves to a state (a declared transition whose
conditions must hold now: the model proposes nothing, the engine decides), or calls an action (whose results may
make a guarded transition hold, followed as after any step). The turn is recorded like a user's (a ``TurnRecord``
with intent ``timer`` and the fired timer's id, its inputs kept for the audit), so explain, the turn log,
telemetry and ``audit verify`` see it; the fired timer leaves ``instance.timers`` in the same save, which is what
makes it fire once.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from llm_fsm.definition._languages import Text
from llm_fsm.definition._model import FSMDefinition, State
from llm_fsm.definition._timers import TimerEntry
from llm_fsm.definition._wording import Say
from llm_fsm.engine._actions import ActionMemo, ActionScope, redirect, run_for
from llm_fsm.engine._data import now
from llm_fsm.engine._effects import (
    CallLLM,
    Effect,
    EngineConfig,
    TurnGenerator,
    TurnOutcome,
    _apply_application,
    _hook,
    _trace,
)
from llm_fsm.engine._handoff import hand_off_declared
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._languages import conversation_language
from llm_fsm.engine._moves import _chain, _complete_finished_flows, _move, _scope
from llm_fsm.engine._prompts import PromptBuilder
from llm_fsm.engine._records import ContextChange, LLMCallRecord, LLMResult, TurnRecord, Verdict
from llm_fsm.engine._tape import recording
from llm_fsm.engine._timers import entry_of, instant, settle
from llm_fsm.engine._transitions import _why_not, evaluate_transition
from llm_fsm.engine._turn_phases import _check_budget, _hand_off_for_actions
from llm_fsm.engine._turn_reply import _prune_transcript, _redact
from llm_fsm.engine._turn_request import _request
from llm_fsm.engine._wording import approved, worded
from llm_fsm.errors import BudgetExceededError

TIMER_MESSAGE = "(No message from the user: {waited} passed without one. Write to the user as instructed.)"
"""What the model reads as the user's message in a timer's call: nobody wrote, time passed."""


def due(definition: FSMDefinition, instance: FSMInstance, timer_id: str, at: float) -> TimerEntry | None:
    """The entry ``timer_id`` names when the conversation still arms it and it is due at ``at``; else None (stale
    or early: a worker that claimed it must not fire it)."""
    armed = next((timer for timer in instance.timers if timer.id == timer_id), None)
    if armed is None or armed.due_at > at or instance.status != "active" or instance.mode != "bot":
        return None
    found = entry_of(definition, instance, timer_id)
    return found[2] if found is not None else None


def drop_orphan(definition: FSMDefinition, instance: FSMInstance, timer_id: str, config: EngineConfig) -> bool:
    """Drop ``timer_id`` when the conversation arms it but it names no entry of the state it is in (a definition
    changed under a running conversation): such a timer can never fire, and a store indexes whatever the
    conversation holds, so kept it would be claimed again after every save. True when it was dropped (and traced)."""
    if all(timer.id != timer_id for timer in instance.timers) or entry_of(definition, instance, timer_id) is not None:
        return False
    instance.timers = [timer for timer in instance.timers if timer.id != timer_id]
    instance.add_trace("timer_dropped", {"timer": timer_id, "state": instance.current_state}, config.max_trace_events)
    return True


def run_timer(
    definition: FSMDefinition,
    instance: FSMInstance,
    timer_id: str,
    builder: PromptBuilder,
    config: EngineConfig,
    *,
    schema_sent: bool = False,
    action_memo: ActionMemo | None = None,
) -> TurnGenerator:
    """Fire the armed timer ``timer_id`` on ``instance`` (a disposable copy); the caller has checked with ``due``
    that the conversation arms it and it is due."""
    found = entry_of(definition, instance, timer_id)
    if found is None or all(timer.id != timer_id for timer in instance.timers):
        raise ValueError(f"conversation {instance.conversation_id} does not arm timer {timer_id!r}")
    state, index, entry = found
    started = now()
    at = instant(config, started)
    instance.timers = [timer for timer in instance.timers if timer.id != timer_id]
    flow_before = instance.flow_id
    scope = _scope(config, timer_id, action_memo)
    fired = _Fired(state, entry, scope, started, config)
    _trace(instance, config, "timer", id=timer_id, state=state.id, effect=entry.effect)
    active = definition
    if entry.say is not None:
        fired.reply = _said(definition, instance, config, state, entry.say)
    elif entry.instructions is not None:
        fired.reply = yield from _ask(definition, instance, builder, fired, state, entry.instructions, schema_sent)
    elif entry.go is not None:
        active = yield from _go(definition, instance, builder, config, fired, index, entry.go, schema_sent)
    else:
        active = yield from _act(definition, instance, config, fired)
        if fired.verdict.moved:
            fired.reply = yield from _arrived(active, instance, builder, fired, schema_sent)
    entered = instance.current_state != state.id or instance.flow_id != flow_before or fired.verdict.moved
    if active.get_state(instance.current_state).is_terminal and instance.status == "active" and not instance.flow_stack:
        instance.status = "ended"
        _trace(instance, config, "end", state=instance.current_state)
    if instance.status != "active":
        additions = yield _hook("on_end", instance, message="", previous_state=state.id, verdict=fired.verdict)
        fired.changes += _apply_application(active, instance, additions, config, "on_end")
    settle(active, instance, lambda: at, entered=entered)
    return _record(definition, active, instance, config, fired, timer_id, flow_before)


class _Fired:
    """What the timer's turn gathers on the way to its record."""

    def __init__(
        self, state: State, entry: TimerEntry, scope: ActionScope, started: float, config: EngineConfig
    ) -> None:
        self.state = state
        self.config = config
        self.entry = entry
        self.scope = scope
        self.started = started
        self.reply = ""
        self.calls: list[LLMCallRecord] = []
        self.changes: list[ContextChange] = []
        self.chained: list[Verdict] = []
        self.verdict = Verdict(kind="stay", target_state=state.id, reason=f"timer: after {entry.in_}, {entry.effect}")


def _said(definition: FSMDefinition, instance: FSMInstance, config: EngineConfig, state: State, say: Text | Say) -> str:
    """The entry's fixed text in the conversation's language, filled from the context; nothing is said when it cannot
    be (and the trace says why): no model wrote anything to fall back on."""
    wording = worded(definition, say, instance.context.data, language=conversation_language(definition, instance))
    if wording is None or wording.text is None:
        _trace(instance, config, "say_fallback", state=state.id, reason=wording.reason if wording else None)
        return ""
    return wording.text


def _ask(
    definition: FSMDefinition,
    instance: FSMInstance,
    builder: PromptBuilder,
    fired: _Fired,
    state: State,
    note: str,
    schema_sent: bool,
) -> Generator[Effect, Any, str]:
    """A message the model writes for ``state``, told ``note``; it may not move (nobody spoke). A conversation that
    spent its budget gets none ("": the timer is spent, and a move it made stands)."""
    try:
        _check_budget(instance, fired.config)
    except BudgetExceededError as exc:
        _trace(instance, fired.config, "timer_skipped", state=fired.state.id, reason=str(exc))
        return ""
    waited = f"{fired.entry.in_}" if isinstance(fired.entry.in_, str) else f"{fired.entry.seconds:g} seconds"
    request = _request(
        builder,
        definition,
        instance,
        state,
        TIMER_MESSAGE.format(waited=waited),
        "timer",
        note=note,
        allow_moves=False,
        schema_sent=schema_sent,
    )
    result: LLMResult = yield CallLLM(request)
    fired.calls.append(LLMCallRecord.of("timer", result))
    return result.response.message


def _go(
    definition: FSMDefinition,
    instance: FSMInstance,
    builder: PromptBuilder,
    config: EngineConfig,
    fired: _Fired,
    index: int,
    target: str,
    schema_sent: bool,
) -> Generator[Effect, Any, FSMDefinition]:
    """Move to ``target`` when a declared transition there holds now (the best of them, by priority); else record
    the refusal and stay. The state reached says its approved text, or the model writes a message for it."""
    state = fired.state
    candidates = [
        evaluate_transition(definition, transition, instance.context.data, position)
        for position, transition in enumerate(definition.transitions_from(state.id))  # own, then global
        if transition.target_state == target
    ]
    # only the user's yes leads to a confirmation's on_yes (as in a turn's decision): silence is no yes
    yes_only = candidates and state.confirmation is not None and target == state.confirmation.on_yes
    eligible = [] if yes_only else sorted((e for e in candidates if e.eligible), key=lambda e: e.priority)
    if not eligible:
        why = f"{target!r} is the confirmation's yes, which only the user gives" if yes_only else None
        reason = f"timer {index}: {why or _why_not(candidates[0] if candidates else None, target)}"
        fired.verdict = Verdict(kind="stay_rejected", target_state=state.id, reason=reason)
        _trace(instance, config, "rejection", proposal=target, intent="timer", reason=reason)
        return definition
    proposed = Verdict(
        kind="timer",
        target_state=target,
        reason=f"timer {index}: {fired.entry.in_} passed in {state.id!r}; its move to {target!r} holds",
        transition_index=eligible[0].index,
    )
    fired.verdict, changes, _ = yield from _move(definition, instance, config, proposed, "", fired.scope)
    fired.changes += changes
    if fired.verdict.moved and fired.verdict.kind == "timer" and fired.scope.handoff is None:
        fired.chained, chained = yield from _chain(definition, instance, config, "", fired.scope)  # as after a turn
        fired.changes += chained
    active = yield from _settle_move(definition, instance, config, fired)
    fired.reply = yield from _arrived(active, instance, builder, fired, schema_sent)
    return active


def _arrived(
    active: FSMDefinition, instance: FSMInstance, builder: PromptBuilder, fired: _Fired, schema_sent: bool
) -> Generator[Effect, Any, str]:
    """What the user is told of a move a timer made: the state reached's approved text, else a message the model
    writes for it (in a handoff state too: the person takes over after it, as after a user's turn)."""
    reached = active.get_state(instance.current_state)
    wording = approved(active, reached, instance.context.data, language=conversation_language(active, instance))
    if wording is not None and wording.text is not None and wording.mode == "strict":
        return wording.text
    note = f"The conversation has just moved to this state: {fired.entry.in_} passed without a message. Tell the user."
    reply = yield from _ask(active, instance, builder, fired, reached, note, schema_sent)
    if wording is not None and wording.text is not None and wording.text not in reply:
        return wording.text  # guided: the text is said when the message lacks it (no second call)
    return reply


def _act(
    definition: FSMDefinition, instance: FSMInstance, config: EngineConfig, fired: _Fired
) -> Generator[Effect, Any, FSMDefinition]:
    """Call the entry's action as the state's own (``on_error`` applies); a value it writes may make a guarded
    transition hold, which is followed as after any step."""
    declaration = fired.entry.action_declaration
    assert declaration is not None
    carrier = fired.state.model_copy(update={"actions": [declaration.model_copy(update={"when": "enter"})]})
    run = yield from run_for(definition, instance, carrier, "enter", fired.scope)
    fired.changes += run.changes
    if run.failure is not None:
        fired.verdict, moved, _ = yield from _move(
            definition, instance, config, redirect(definition, run.failure, fired.scope), "", fired.scope
        )
        fired.changes += moved
    elif run.handoff is None and any(change.applied for change in run.changes):
        steps, chained = yield from _chain(definition, instance, config, "", fired.scope)
        fired.changes += chained
        if steps:  # the first step is the timer's move (a record's chained steps follow its verdict's)
            fired.verdict, fired.chained = steps[0], steps[1:]
    return (yield from _settle_move(definition, instance, config, fired))


def _settle_move(
    definition: FSMDefinition, instance: FSMInstance, config: EngineConfig, fired: _Fired
) -> Generator[Effect, Any, FSMDefinition]:
    """After a move: a finished sub-flow hands back to its parent, and a person takes the conversation when an
    action or the state reached asks for one."""
    active = definition
    if instance.status == "active":
        active, outputs, _ = yield from _complete_finished_flows(definition, instance, config, "", fired.scope)
        fired.changes += outputs
    _hand_off_for_actions(instance, config, fired.scope)
    if instance.status == "active" and (fired.verdict.moved or fired.chained):
        hand_off_declared(active, instance, config)
    return active


def _record(
    definition: FSMDefinition,
    active: FSMDefinition,
    instance: FSMInstance,
    config: EngineConfig,
    fired: _Fired,
    timer_id: str,
    flow_before: str,
) -> TurnOutcome:
    """Keep the timer's turn as a user's turn is kept: the message said (if any) in the transcript, the record, the
    usage of its model calls."""
    if fired.reply:
        instance.context.conversation.add_assistant_message(fired.reply)
        _prune_transcript(instance, config)
    instance.turn_count += 1
    (shown_reply,) = _redact((definition, active), instance.context.data, fired.reply)
    record = TurnRecord(
        index=instance.turn_count,
        user_message="",
        intent="timer",
        timer=timer_id,
        state_before=fired.state.id,
        state_after=instance.current_state,
        flow_before=flow_before,
        flow_after=instance.flow_id,
        context_changes=fired.changes,
        verdict=fired.verdict,
        chained=fired.chained,
        llm_calls=fired.calls,
        actions=fired.scope.records,
        reply=shown_reply,
        started_at=fired.started,
        finished_at=now(),
    )
    for call in fired.calls:
        instance.usage.add(call)
    instance.keep_turn(
        record,
        max_turn_records=config.max_turn_records,
        message_id=None,
        reply=fired.reply,
        max_message_ids=config.max_processed_message_ids,
    )
    return TurnOutcome(
        reply=fired.reply,
        record=record,
        changes=fired.changes,
        state=instance.current_state,
        ended=instance.status != "active",
        fsm_id=instance.fsm_id,
        flow_depth=len(instance.flow_stack) + 1,
        mode=instance.mode,
    )


def recorded_timer(
    definition: FSMDefinition,
    instance: FSMInstance,
    timer_id: str,
    builder: PromptBuilder,
    config: EngineConfig,
    *,
    schema_sent: bool = False,
    action_memo: ActionMemo | None = None,
) -> TurnGenerator:
    """``run_timer``, with what it was given kept in its record's ``inputs`` (``engine._tape``), so the audit decides
    it again as it does a user's turn. Its actions' idempotency keys carry the timer's id: a retried firing reuses
    a result rather than calling the backend twice."""

    def fire(config: EngineConfig, memo: ActionMemo) -> TurnGenerator:
        return run_timer(definition, instance, timer_id, builder, config, schema_sent=schema_sent, action_memo=memo)

    return (yield from recording(definition, instance, config, timer_id, action_memo, fire))


__all__ = ["TIMER_MESSAGE", "drop_orphan", "due", "recorded_timer", "run_timer"]
