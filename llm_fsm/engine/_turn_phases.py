"""The phases of one turn, in the order ``run_turn`` runs them: prepare, ask, understand, decide, apply.

A turn used to be one function of 268 lines; each phase here is one step a reader can hold in their head. A phase
that needs the outside world is a generator yielding its effects (``run_turn`` chains them with ``yield from``, so
the driver sees the same effects in the same order as before); the rest are plain functions. What every phase shares
travels in a ``_Turn``; what a phase concludes for the later ones is its return value. The reply and the record,
the turn's last phases, are in ``_turn_reply``.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from llm_fsm.definition._model import FSMDefinition, State
from llm_fsm.engine._actions import ActionMemo, ActionScope, ActionsRun, redirect, run_for
from llm_fsm.engine._context import apply_update
from llm_fsm.engine._data import now
from llm_fsm.engine._effects import (
    CallLLM,
    Effect,
    EngineConfig,
    _apply_application,
    _hook,
    _policy,
    _trace,
)
from llm_fsm.engine._extract import Extractor, fill
from llm_fsm.engine._handoff import hand_off, hand_off_declared
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._languages import conversation_language
from llm_fsm.engine._messages import UserMessage, entry_role, entry_text, timestamp
from llm_fsm.engine._moves import _chain, _complete_finished_flows, _move, _scope, _took_guarded, arrive_or_redirect
from llm_fsm.engine._prompts import PromptBuilder
from llm_fsm.engine._provenance import note_model
from llm_fsm.engine._records import ContextChange, LLMCallRecord, LLMResult, Verdict
from llm_fsm.engine._retrieval import Retrieved, retrieval_verdict, retrieve
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
from llm_fsm.engine._values import Grounding
from llm_fsm.errors import BudgetExceededError, InvalidTransitionError

_HANDOFF_NOTE = (
    "A person (a colleague) takes over this conversation now. Tell the user so in one or two short sentences; "
    "ask nothing more and do not say why a system failed."
)


@dataclass(slots=True, eq=False)
class _Turn:
    """The turn's inputs, where it started, and what it gathers on the way to its record (changes, model calls)."""

    definition: FSMDefinition
    instance: FSMInstance
    builder: PromptBuilder
    config: EngineConfig
    user: UserMessage
    message: str
    """The text the turn reasons with (a message of parts has its text here too)."""
    message_id: str | None
    schema_sent: bool
    scope: ActionScope
    received: float
    started: float
    state_before: str
    flow_before: str
    state: State
    changes: list[ContextChange] = field(default_factory=list)
    calls: list[LLMCallRecord] = field(default_factory=list)
    actions_wrote: bool = False
    """Whether an action stored a value this turn: a condition may hold now, so the turn chains on."""
    retrieved: Retrieved | None = None
    """What the state's ``retrieve`` found for this message (None: the state retrieves nothing)."""

    @property
    def snippets(self) -> tuple[Any, ...]:
        return self.retrieved.snippets if self.retrieved is not None else ()


@dataclass(slots=True)
class _Understood:
    """What the model made of the message, once the values it extracted are stored (or refused); the later phases
    read it, none changes it (not frozen: a frozen dataclass costs every turn its slower constructor)."""

    result: LLMResult
    proposal: str | None
    intent: str
    route: str
    """The intent as the turn acts on it: an answer to "do you want to cancel?" becomes a cancel or a step."""
    model_changes: list[ContextChange]
    unchangeable: list[ContextChange]
    """Values a confirmation step does not let change: refused, and the reply says so."""


@dataclass(slots=True)
class _Applied:
    """Where the decision took the turn: the verdict carried out (an entry action may have redirected it), the
    active flow's definition and its current state, and the note when the reply must be written again. Read-only
    for the later phases, like ``_Understood``."""

    verdict: Verdict
    active: FSMDefinition
    state: State
    note: str | None
    chained: list[Verdict]


# --- prepare ---------------------------------------------------------------------------


def _prepare(
    definition: FSMDefinition,
    instance: FSMInstance,
    message: str | UserMessage,
    builder: PromptBuilder,
    config: EngineConfig,
    message_id: str | None,
    schema_sent: bool,
    action_memo: ActionMemo | None,
) -> Generator[Effect, Any, _Turn]:
    """Refuse a turn over budget before anything is spent, note where the turn starts (its record compares), let
    ``before_llm`` hooks add to the context the model is about to read, then look up what the state retrieves (its
    query may read what the hooks added)."""
    user = message if isinstance(message, UserMessage) else UserMessage(text=message)
    _check_budget(instance, config)
    turn = _Turn(
        definition=definition,
        instance=instance,
        builder=builder,
        config=config,
        user=user,
        message=user.text,
        message_id=message_id,
        schema_sent=schema_sent,
        scope=_scope(config, message_id, action_memo),
        received=timestamp(),
        started=now(),
        state_before=instance.current_state,
        flow_before=instance.flow_id,
        state=definition.get_state(instance.current_state),
    )
    additions = yield _hook("before_llm", instance, message=user.text)
    turn.changes = _apply_application(definition, instance, additions, config, "before_llm")
    turn.retrieved = yield from retrieve(definition, turn.state, instance.context.data, user.text)
    return turn


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


# --- ask -------------------------------------------------------------------------------


def _ask(turn: _Turn) -> Generator[Effect, Any, LLMResult]:
    """The one understanding call every message gets: the model reads it in the current state and answers with an
    intent, a proposed move, the values it found and a reply (its re-asks on a malformed answer are the interface's
    business, counted in the result)."""
    request = _request(
        turn.builder,
        turn.definition,
        turn.instance,
        turn.state,
        turn.message,
        "turn",
        schema_sent=turn.schema_sent,
        user_content=turn.user.model_content,
        snippets=turn.snippets,
    )
    result: LLMResult = yield CallLLM(request)
    turn.calls.append(LLMCallRecord.of("turn", result))
    return result


# --- understand ------------------------------------------------------------------------


def _understand(turn: _Turn, result: LLMResult) -> Generator[Effect, Any, _Understood]:
    """Store the values the model extracted, under the keys' rules (grounded in what was said, typed, bounded; a
    confirmation step refuses the keys it does not let change), then let ``after_context_update`` hooks react. The
    decision that follows sees the context as updated."""
    definition, instance, config, state = turn.definition, turn.instance, turn.config, turn.state
    response = result.response
    proposal = response.transition.target_state or None
    intent = response.intent

    update = response.transition.context_update
    unchangeable: list[ContextChange] = []
    if state.confirmation is not None and state.confirmation.changeable_keys is not None:
        update, unchangeable = _not_changeable(definition, state.confirmation.changeable_keys, update)
    now = functools.cache(functools.partial(_now, turn))  # the clock is read once, and only when needed
    policy = _policy(definition, functools.partial(_grounding, instance, turn.message, now))
    if policy is not None:
        policy.language = conversation_language(definition, instance)  # the model's values are read in it
    extractor = _extractor(turn, intent, now) if policy is not None else None
    if extractor is not None and policy is not None:
        policy.extractor = extractor
    data, protected, max_bytes = instance.context.data, definition.application_only_keys, config.max_context_bytes
    model_changes = apply_update(data, update, source="model", protected=protected, max_bytes=max_bytes, policy=policy)
    if extractor is not None and policy is not None:
        model_changes += fill(extractor, policy, data, model_changes, protected=protected, max_bytes=max_bytes)
    # the id this turn's message gets when _record appends it: nothing else is appended to the transcript before
    note_model(instance, model_changes, turn.message_id or instance.context.conversation.next_id(), policy)
    model_changes += unchangeable
    turn.changes += model_changes
    if model_changes:
        _trace(
            instance,
            config,
            "context_update",
            source="model",
            applied=[c.key for c in model_changes if c.applied],
            dropped={c.key: c.reason for c in model_changes if not c.applied},
        )
    additions = yield _hook("after_context_update", instance, message=turn.message)
    turn.changes += _apply_application(definition, instance, additions, config, "after_context_update")
    if intent != "digression":
        instance.consecutive_digressions = 0
    return _Understood(result, proposal, intent, _route(turn, intent), model_changes, unchangeable)


def _extractor(turn: _Turn, intent: str, now: Callable[[], dt.datetime]) -> Extractor | None:
    """The engine's own extractors for the declared keys the state collects, on a message that answers the step
    (not a side question, a cancel or the answer to "do you want to cancel?"), outside a confirmation's read-back."""
    state = turn.state
    if intent != "continue" or state.confirmation is not None or turn.instance.pending_cancel:
        return None
    if not state.required_context_keys or not turn.definition.context_keys:
        return None
    extractor = Extractor(turn.definition, state.required_context_keys, turn.message, lambda: now().date(), now)
    return extractor if extractor else None


def _now(turn: _Turn) -> dt.datetime:
    """The conversation's instant, aware: the application's clock (``EngineConfig.clock``; a naive time is read as
    UTC), else the turn's start in UTC. Its own date is the conversation's date; a key's ``timezone`` moves it."""
    clock = turn.config.clock
    now = clock() if clock is not None else dt.datetime.fromtimestamp(turn.started, dt.UTC)
    return now if now.tzinfo is not None else now.replace(tzinfo=dt.UTC)


def _grounding(instance: FSMInstance, message: str, now: Callable[[], dt.datetime]) -> Grounding:
    """What a grounded value may be taken from: the user's stored messages, this one, and the assistant's (or a
    person's, during a handoff) messages in the history window the model sees (an offer accepted, perhaps after
    a side question)."""
    conversation = instance.context.conversation
    exchanges = conversation.exchanges
    users = [entry_text(entry) for entry in exchanges if entry_role(entry) == "user"]
    window = exchanges[-2 * conversation.max_history_size :] if conversation.max_history_size > 0 else []
    # a human agent's words are offers too: the user accepting what an operator proposed grounds it
    offers = [entry_text(entry) for entry in window if entry_role(entry) in ("assistant", "operator")]
    instant = now()
    return Grounding([*users, message], offers, instant.date(), instant)


def _route(turn: _Turn, intent: str) -> str:
    """The intent as the turn acts on it: when the last turn asked "do you want to cancel?", this message answers."""
    instance = turn.instance
    if not instance.pending_cancel:
        return intent
    instance.pending_cancel = False
    if intent in ("confirm", "cancel"):
        return "cancel_confirmed"
    _trace(instance, turn.config, "cancel_declined", state=turn.state_before, intent=intent)
    return "continue" if intent == "deny" else intent  # "no, don't cancel" is no answer to a read-back


# --- decide ----------------------------------------------------------------------------


def _decide(turn: _Turn, understood: _Understood) -> Generator[Effect, Any, _Decision]:
    """Decide where the turn goes. Actions waiting for this state's data run first, so its guards see their results;
    a failed action, or one asking for a person, decides instead of the model. Otherwise the route does: a
    digression, a cancel, a sub-flow started or resumed, a confirmation's answer, or an ordinary step."""
    definition, instance, config, state = turn.definition, turn.instance, turn.config, turn.state
    route, state_before = understood.route, turn.state_before
    # not on a cancel: the user is leaving, and a backend call (or its failure, or a handoff) must not take the turn
    # elsewhere (if the conversation goes on, they run on its next turn)
    collected = ActionsRun()
    if route not in ("cancel", "cancel_confirmed"):
        collected = yield from run_for(definition, instance, state, "collected", turn.scope)
    turn.changes += collected.changes
    turn.actions_wrote = any(c.applied for c in collected.changes)

    if collected.failure is not None:
        failed = redirect(definition, collected.failure, turn.scope)
        return _Decision(failed, note=_decision_note(failed, definition.get_state(failed.target_state)))
    if collected.handoff is not None:
        reason = f"{collected.handoff}; a person takes over"
        return _Decision(Verdict(kind="handed_off", target_state=state_before, reason=reason))
    fallback = _retrieval_fallback(turn, route)
    if fallback is not None:
        return _Decision(fallback, note=_decision_note(fallback, definition.get_state(fallback.target_state)))
    if route == "digression":
        return _digression(definition, instance, config, state)
    if route in ("cancel", "cancel_confirmed"):
        confirmed = route == "cancel_confirmed"
        return (yield from _cancel(definition, instance, config, state_before, confirmed=confirmed))
    flow = understood.result.response.flow
    if route == "start_flow":
        return (yield from _start_flow(definition, instance, config, state_before, flow))
    if route == "resume_flow":
        return (yield from _resume(definition, instance, config, state_before, flow))
    if state.confirmation is not None and route in ("confirm", "deny"):
        corrected = any(c.applied for c in understood.model_changes)
        intent, proposal = understood.intent, understood.proposal
        return (yield from _confirmation(definition, instance, config, state, intent, proposal, corrected))
    data, proposal = instance.context.data, understood.proposal
    return _decide_transition(definition, state_before, data, proposal, refused=understood.model_changes)


def _retrieval_fallback(turn: _Turn, route: str) -> Verdict | None:
    """The move a failed retrieval's ``on_error`` names, when it names a declared state other than this one; not on
    a cancel (the user is leaving). A state the definition does not declare (fsm-lint's FSM076) goes on without."""
    retrieved = turn.retrieved
    target = retrieved.fallback if retrieved is not None else None
    if retrieved is None or target is None or route in ("cancel", "cancel_confirmed"):
        return None
    if target not in turn.definition.states or target == turn.state_before:
        retrieved.record.on_error = "continue"
        return None
    return retrieval_verdict(retrieved, target)


# --- apply -----------------------------------------------------------------------------


def _apply(turn: _Turn, understood: _Understood, decision: _Decision) -> Generator[Effect, Any, _Applied]:
    """Carry the decision out: move (running entry actions, then chaining), arrive in a sub-flow just started, hand
    finished sub-flows' outputs back to their parents, and hand the conversation to a person when an action or the
    state reached asks for one."""
    instance, config, scope, message = turn.instance, turn.config, turn.scope, turn.message
    verdict = decision.verdict
    if config.strict and verdict.kind == "stay_rejected":
        raise InvalidTransitionError(verdict.reason, explanation=decision.evaluations)
    active = decision.definition or turn.definition
    note = decision.note
    chained: list[Verdict] = []

    if verdict.moved:
        verdict, note, chained = yield from _move_and_chain(turn, understood, decision, active, note)
    elif verdict.kind == "flow_started" and decision.definition is not None:
        redirected, entered = yield from arrive_or_redirect(active, instance, config, None, message, scope)
        turn.changes += entered
        if redirected is not None:
            verdict = redirected
            note = _decision_note(verdict, active.get_state(verdict.target_state))
    elif verdict.kind == "stay_rejected":
        proposal, intent = understood.proposal, understood.intent
        _trace(instance, config, "rejection", proposal=proposal, intent=intent, reason=verdict.reason)

    if instance.status == "active":
        active, output_changes, completion_note = yield from _complete_finished_flows(
            active, instance, config, message, scope
        )
        turn.changes += output_changes
        note = completion_note or note

    if _hand_off_for_actions(instance, config, scope):
        note = _HANDOFF_NOTE
    if instance.status == "active" and (
        instance.current_state != turn.state_before or instance.flow_id != turn.flow_before
    ):
        hand_off_declared(active, instance, config)  # the reply for the state is still given, then a person has it
    return _Applied(verdict, active, active.get_state(instance.current_state), note, chained)


def _move_and_chain(
    turn: _Turn, understood: _Understood, decision: _Decision, active: FSMDefinition, note: str | None
) -> Generator[Effect, Any, tuple[Verdict, str | None, list[Verdict]]]:
    """Take the move (its entry actions may redirect it), then keep moving while conditions already hold, when
    something this turn could have made one hold: a guarded transition taken, a value the model stored, or one an
    action wrote. Not after a flow operation or an action's error: those moves are not the state's own steps."""
    instance, config, scope = turn.instance, turn.config, turn.scope
    proposed = decision.verdict
    verdict, moved_changes, wrote = yield from _move(active, instance, config, proposed, turn.message, scope)
    turn.changes += moved_changes
    turn.actions_wrote = turn.actions_wrote or wrote
    if verdict is not proposed:
        note = _decision_note(verdict, active.get_state(verdict.target_state))
    chained: list[Verdict] = []
    if (
        decision.definition is None
        and verdict.kind not in ("action_error", "retrieval_error")
        and (
            _took_guarded(turn.definition, turn.state_before, verdict)
            or any(c.applied for c in understood.model_changes)
            or turn.actions_wrote
        )
    ):
        chained, chain_changes = yield from _chain(active, instance, config, turn.message, scope)
        turn.changes += chain_changes
        if chained:
            note = _decision_note(chained[-1], active.get_state(instance.current_state))
    return verdict, note, chained


def _hand_off_for_actions(instance: FSMInstance, config: EngineConfig, scope: ActionScope) -> bool:
    """Hand off when an action asked for a person this turn (its ``HandOff`` or ``on_error: handoff``)."""
    if scope.handoff is None or instance.status != "active" or instance.mode != "bot":
        return False
    hand_off(instance, scope.handoff, "action", config)
    return True
