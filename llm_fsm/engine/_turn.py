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
import json
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from llm_fsm.definition._model import FlowDeclaration, FSMDefinition, State
from llm_fsm.engine._actions import (
    ActionMemo,
    ActionScope,
    ActionsRun,
    CallAction,
    arrive,
    forget_visit,
    redirect,
    run_for,
)
from llm_fsm.engine._context import apply_update
from llm_fsm.engine._data import (
    DEFAULT_MAX_COMPLETED_FLOWS,
    DEFAULT_MAX_CONTEXT_BYTES,
    DEFAULT_MAX_FLOW_DEPTH,
    DEFAULT_MAX_STORED_MESSAGES,
    DEFAULT_MAX_TURN_RECORDS,
    now,
)
from llm_fsm.engine._flows import find_paused, pop_flow, push_flow, resume_flow
from llm_fsm.engine._handoff import hand_off, hand_off_declared
from llm_fsm.engine._hooks import HookEvent, make_event
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._messages import UserMessage, entry_role, entry_text, timestamp
from llm_fsm.engine._prompts import OPENING_MESSAGE, PromptBuilder
from llm_fsm.engine._records import (
    ContextChange,
    LLMCallRecord,
    LLMRequest,
    LLMResult,
    TraceEvent,
    TransitionEvaluation,
    TurnRecord,
    Verdict,
)
from llm_fsm.engine._reply_schema import key_json_schema, response_json_schema
from llm_fsm.engine._transitions import decide, evaluate_condition
from llm_fsm.engine._values import MASK, REASK_RULES, Grounding, KeyPolicy
from llm_fsm.errors import BudgetExceededError, DefinitionError, FlowError, InvalidTransitionError

DEFAULT_MAX_TRACE_EVENTS = 100
DEFAULT_MAX_PROCESSED_MESSAGE_IDS = 100


@dataclass(frozen=True)
class EngineConfig:
    """Limits and policies of the engine; the defaults are the documented ones."""

    max_context_bytes: int = DEFAULT_MAX_CONTEXT_BYTES
    max_turn_records: int = DEFAULT_MAX_TURN_RECORDS
    max_stored_messages: int = DEFAULT_MAX_STORED_MESSAGES
    max_trace_events: int = DEFAULT_MAX_TRACE_EVENTS
    max_processed_message_ids: int = DEFAULT_MAX_PROCESSED_MESSAGE_IDS
    max_completed_flows: int = DEFAULT_MAX_COMPLETED_FLOWS
    max_flow_depth: int = DEFAULT_MAX_FLOW_DEPTH
    max_chained_transitions: int = 5
    """Guarded transitions followed in one turn after its move, when the state reached already has its data
    (0 turns chaining off). Never through a confirmation step, a terminal state or a state with
    ``auto_advance: false``; never a judgment transition."""
    max_conversation_tokens: int | None = None
    """Prompt + completion tokens a conversation may spend; a turn that starts at or past it raises
    BudgetExceededError before the model is called (the turn that crosses it completes)."""
    max_conversation_cost_usd: float | None = None
    """The same for cost, in dollars of litellm's price list (calls without a known price count 0)."""
    strict: bool = False
    """Raise InvalidTransitionError when the model proposes a transition that is refused."""


# --- effects the drivers perform ---------------------------------------------------


@dataclass(frozen=True)
class CallLLM:
    request: LLMRequest


@dataclass(frozen=True)
class CallHook:
    """Call the application's hooks named ``name``; the event is built only if there are any."""

    name: str
    make_event: Callable[[], HookEvent]


@dataclass(frozen=True)
class LoadFlow:
    """Resolve a declared sub-flow's definition; the driver answers ``(fsm_id, FSMDefinition)``."""

    declaration: FlowDeclaration
    parent: FSMDefinition


@dataclass(frozen=True)
class LoadDefinition:
    """Load the definition of a flow being resumed; the driver answers an ``FSMDefinition``."""

    fsm_id: str


@dataclass(frozen=True)
class Decided:
    """The turn has decided where the conversation is; only the reply remains (streaming drivers tell the client).

    Non-streaming drivers answer None and go on.
    """

    state: str
    verdict: str
    ended: bool


@dataclass(frozen=True)
class AwaitMessage:
    """The streamed turn call's message is the reply: the driver answers with its full text once it has it."""


@dataclass
class TurnOutcome:
    """What a turn gave: the reply, its record (None for a retried ``message_id`` answered from the store), the
    context changes, and where it left the conversation."""

    reply: str
    record: TurnRecord | None = None
    changes: list[ContextChange] = field(default_factory=list)
    state: str = ""
    ended: bool = False
    fsm_id: str = ""
    flow_depth: int = 1
    mode: str = "bot"
    """``human`` when a person has the conversation after this turn: the reply is ``""`` for a message that
    arrived in human mode (the person answers), or the bot's last reply for a turn that reached a handoff state."""


Effect = CallLLM | CallHook | LoadFlow | LoadDefinition | Decided | AwaitMessage | CallAction
TurnGenerator = Generator[Effect, Any, TurnOutcome]


# --- helpers ---------------------------------------------------------------------------


def _allowed_targets(state: State) -> list[str]:
    targets = [state.id]
    for t in state.transitions:
        if t.target_state not in targets:
            targets.append(t.target_state)
    return targets


def _trace(instance: FSMInstance, config: EngineConfig, event: str, **data: Any) -> None:
    instance.trace.append(TraceEvent(event=event, data=data))
    if len(instance.trace) > config.max_trace_events:
        del instance.trace[: len(instance.trace) - config.max_trace_events]


def _hook(name: str, instance: FSMInstance, **fields: Any) -> CallHook:
    # The event (with its copy of the context) is built by the driver only when hooks are
    # registered for this name, so a turn without hooks pays nothing for them.
    data, conversation_id, fsm_id, state = (
        instance.context.data,
        instance.conversation_id,
        instance.fsm_id,
        instance.current_state,
    )
    return CallHook(
        name,
        lambda: make_event(name, data=data, conversation_id=conversation_id, fsm_id=fsm_id, state=state, **fields),
    )


def _policy(
    definition: FSMDefinition, grounding: Grounding | Callable[[], Grounding] | None = None
) -> KeyPolicy | None:
    """The declarations' policy, or None for a definition that declares nothing (today's behaviour, at no cost)."""
    if not definition.context_keys and definition.additional_keys:
        return None
    return KeyPolicy(definition, grounding)


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


def _apply_application(
    definition: FSMDefinition, instance: FSMInstance, additions: Any, config: EngineConfig, hook: str
) -> list[ContextChange]:
    if not additions:
        return []
    changes = apply_update(
        instance.context.data,
        additions,
        source="application",
        max_bytes=config.max_context_bytes,
        policy=_policy(definition),
    )
    if changes:
        _trace(instance, config, "context_update", source=f"application:{hook}", keys=[c.key for c in changes])
    return changes


def _prune_transcript(instance: FSMInstance, config: EngineConfig) -> None:
    """Keep the stored transcript bounded; the overflow goes to the store's archive, not the void."""
    exchanges = instance.context.conversation.exchanges
    overflow = len(exchanges) - config.max_stored_messages
    if overflow > 0:
        instance.archive_outbox.extend(exchanges[:overflow])
        del exchanges[:overflow]
        instance.context.conversation.archived_messages += overflow


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


def _request(
    builder: PromptBuilder,
    definition: FSMDefinition,
    instance: FSMInstance,
    state: State,
    message: str,
    purpose: str,
    *,
    note: str | None = None,
    allow_moves: bool = True,
    schema_sent: bool = False,
    user_content: list[dict[str, Any]] | None = None,
) -> LLMRequest:
    prompt = builder.build_system_prompt(
        instance, state, definition=definition, engine_decision=note, schema_sent=schema_sent
    )
    targets = _allowed_targets(state) if allow_moves else [state.id]
    schema = _schema(
        tuple(targets),
        tuple(builder.intents_for(definition, instance, state)) if allow_moves else None,
        tuple(builder.flow_names_for(definition, instance, state)) if allow_moves else None,
        _typed_keys(definition, state) if allow_moves and definition.context_keys else (),
    )
    return LLMRequest(
        system_prompt=prompt,
        user_message=message,
        user_content=user_content,
        response_schema=schema,
        purpose=purpose,  # type: ignore[arg-type]
        context_keys=_context_keys(state, instance) if allow_moves else [],
    )


def _context_keys(state: State, instance: FSMInstance) -> list[str]:
    """What the model may usefully write in this state: keys to collect, keys its conditions need, and
    keys already collected (so a correction of any of them is possible)."""
    keys: list[str] = list(state.required_context_keys or ())
    for transition in state.transitions:
        for condition in transition.conditions or ():
            keys += condition.requires_context_keys or ()
            if condition.compiled is not None:
                keys += sorted(condition.compiled.reads)
    keys += [k for k in instance.context.data if not str(k).startswith("_")]
    return list(dict.fromkeys(keys))


_TYPED_KEYS: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {}


def _typed_keys(definition: FSMDefinition, state: State) -> tuple[tuple[str, str], ...]:
    """(key, JSON Schema as text) of the declared keys the model may write in ``state`` (hashable, built once)."""
    cache_key = (definition.content_hash, state.id)
    found = _TYPED_KEYS.get(cache_key)
    if found is None:
        keys = list(state.required_context_keys or ())
        for transition in state.transitions:
            for condition in transition.conditions or ():
                keys += condition.requires_context_keys or ()
                if condition.compiled is not None:
                    keys += sorted(condition.compiled.reads)
        typed = []
        for key in dict.fromkeys(keys):
            declaration = (definition.context_keys or {}).get(key)
            if declaration is None or key in definition.application_only_keys:
                continue
            schema = key_json_schema(declaration)
            if schema is not None:
                typed.append((key, json.dumps(schema, sort_keys=True)))
        found = tuple(typed)
        if len(_TYPED_KEYS) < 4096:
            _TYPED_KEYS[cache_key] = found
    return found


@functools.lru_cache(maxsize=512)
def _schema(
    targets: tuple[str, ...],
    intents: tuple[str, ...] | None,
    flows: tuple[str, ...] | None,
    typed_keys: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    """Reply schemas depend only on the state's options, so each is built once (and shared: do not mutate)."""
    key_schemas = {key: json.loads(text) for key, text in typed_keys}
    return response_json_schema(list(targets), intents=intents, flows=flows, bounded=False, key_schemas=key_schemas)


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
    state = definition.get_state(instance.current_state)
    started = yield from arrive(definition, instance, None, state, scope)
    changes += started.changes
    if started.failure is not None:
        _, moved_changes, _ = yield from _move(
            definition, instance, config, redirect(definition, started.failure, scope), OPENING_MESSAGE, scope
        )
        changes += moved_changes
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


def _decide_transition(
    definition: FSMDefinition, state_id: str, data: dict[str, Any], proposal: str | None, *, confirming: bool = False
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
        )
    else:
        verdict, evaluations = decide(definition, state_id, data, proposal)
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
            "conversation, no carries on where it was. Ask nothing else."
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
    parent = yield LoadDefinition(instance.fsm_id)
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
    note = (
        "The user cancelled what they were doing: everything they had given was cleared and the conversation is "
        "back at its start. Say so in one short sentence, e.g. 'Cancelled. How else can I help?', and nothing else."
    )
    return _Decision(verdict, note=note)


def _what_to_change(definition: FSMDefinition, keys: list[str] | None) -> str:
    """The note for a plain "no" at a confirmation step: stay, and ask what to change (naming what may)."""
    which = ""
    if keys:
        labels = []
        for key in keys:
            found = definition.declaration_for(key)
            labels.append(found[1].label(key) if found else key.replace("_", " "))
        which = " They may change: " + ", ".join(labels) + "."
    return (
        "The user said no to the read-back and gave no new value. Nothing is confirmed and the conversation stays "
        "in this step. Ask in one short sentence what they would like to change." + which
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
    resumed = yield LoadDefinition(instance.fsm_id)
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
    return _Decision(verdict, note=_what_to_change(definition, confirmation.changeable_keys))


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


def _took_guarded(definition: FSMDefinition, state_id: str, verdict: Verdict) -> bool:
    """Whether the turn moved by a guarded transition.

    A judgment move that stores nothing new ("let me change the date") is the model's choice of a state to
    be in, and chaining straight out of it would undo it; with new values (the new date given at once, or a
    whole form in the first message) the chain goes on (the caller checks that).
    """
    index = verdict.transition_index
    transitions = definition.get_state(state_id).transitions
    return index is not None and 0 <= index < len(transitions) and transitions[index].is_guarded


def _scope(config: EngineConfig, message_id: str | None, memo: ActionMemo | None) -> ActionScope:
    return ActionScope(
        message_id=message_id,
        memo={} if memo is None else memo,
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
            forget_visit(instance, source)  # left without its exit actions, but left: a return visit runs them anew
        arrived: ActionsRun = yield from arrive(
            definition, instance, left, definition.get_state(verdict.target_state), scope
        )
        changes += arrived.changes
        wrote = wrote or any(c.applied for c in arrived.changes)
        if arrived.failure is None:
            return verdict, changes, wrote
        verdict = redirect(definition, arrived.failure, scope)


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
        verdict, _ = decide(definition, state.id, instance.context.data, None)
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

    The resumed parent then gets one decision with no proposal: its guarded transitions
    may fire on the outputs (conditions met means move on), nothing else can move it.
    """
    changes: list[ContextChange] = []
    note = None
    while instance.flow_stack and definition.get_state(instance.current_state).is_terminal:
        parent: FSMDefinition = yield LoadDefinition(instance.flow_stack[-1].fsm_id)
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
        verdict, _ = decide(definition, instance.current_state, instance.context.data, None)
        if verdict.moved:
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
            arrived = yield from arrive(definition, instance, source, definition.get_state(verdict.target_state), scope)
            changes += arrived.changes
            if arrived.failure is not None:
                _, redirected_changes, _ = yield from _move(
                    definition, instance, config, redirect(definition, arrived.failure, scope), message, scope
                )
                changes += redirected_changes
        note = (
            f"The sub-flow {finished.flow_name!r} has just finished"
            + (f" with results {sorted(finished.outputs)}" if finished.outputs else "")
            + ". Tell the user the outcome in one sentence and continue with the current state's purpose."
        )
    return definition, changes, note


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

    ``action_memo``: the driver passes the same dict to every attempt of one turn (a turn runs again when its
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

    # actions waiting for this state's data run before the decision, so its guards see their results
    scope = _scope(config, message_id, action_memo)
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
        entered = yield from arrive(active, instance, None, active.get_state(instance.current_state), scope)
        changes += entered.changes
        if entered.failure is not None:
            verdict, moved_changes, _ = yield from _move(
                active, instance, config, redirect(active, entered.failure, scope), message, scope
            )
            changes += moved_changes
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
    "AwaitMessage",
    "CallAction",
    "CallHook",
    "Decided",
    "CallLLM",
    "EngineConfig",
    "LoadDefinition",
    "LoadFlow",
    "TurnOutcome",
    "run_opening",
    "run_turn",
]
