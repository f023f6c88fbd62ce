"""One turn, and the opening of a conversation, as pure generators.

The turn logic is written once, as a generator that *yields* the effects it
needs (an LLM call, a hook call) and receives their results. ``fsm.py`` drives
it synchronously or asynchronously; this module never does I/O, never reads
the clock except for timestamps, and works on an instance the driver may
throw away: if anything raises, nothing of the turn is kept, and the user's
message is not left dangling in the history.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from .context import apply_update
from .definitions import FSMDefinition, State
from .errors import InvalidTransitionError
from .hooks import HookEvent, make_event
from .llm import LLMResult
from .prompts import OPENING_MESSAGE, PromptBuilder
from .response_parsing import response_json_schema
from .runtime import (
    DEFAULT_MAX_CONTEXT_BYTES,
    DEFAULT_MAX_STORED_MESSAGES,
    DEFAULT_MAX_TURN_RECORDS,
    ContextChange,
    FSMInstance,
    LLMCallRecord,
    LLMRequest,
    TraceEvent,
    TurnRecord,
    Verdict,
    now,
)
from .transitions import decide

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
    strict: bool = False
    """Raise InvalidTransitionError when the model proposes a transition that is refused."""


# --- effects the drivers perform ---------------------------------------------------


@dataclass(frozen=True)
class CallLLM:
    request: LLMRequest


@dataclass(frozen=True)
class CallHook:
    event: HookEvent


@dataclass
class TurnOutcome:
    reply: str
    record: TurnRecord | None = None
    changes: list[ContextChange] = field(default_factory=list)


Effect = CallLLM | CallHook
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
    return CallHook(
        make_event(
            name,
            data=instance.context.data,
            conversation_id=instance.conversation_id,
            fsm_id=instance.fsm_id,
            state=instance.current_state,
            **fields,
        )
    )


def _apply_application(
    instance: FSMInstance, additions: Any, config: EngineConfig, hook: str
) -> list[ContextChange]:
    if not additions:
        return []
    changes = apply_update(instance.context.data, additions, source="application", max_bytes=config.max_context_bytes)
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
    if verdict.kind == "stay_rejected":
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
) -> LLMRequest:
    prompt = builder.build_system_prompt(instance, state, definition=definition, engine_decision=note)
    targets = _allowed_targets(state) if allow_moves else [state.id]
    return LLMRequest(
        system_prompt=prompt,
        user_message=message,
        response_schema=response_json_schema(targets),
        purpose=purpose,  # type: ignore[arg-type]
    )


# --- the opening -----------------------------------------------------------------------


def run_opening(
    definition: FSMDefinition,
    instance: FSMInstance,
    builder: PromptBuilder,
    config: EngineConfig,
    initial_context: Any = None,
) -> TurnGenerator:
    """Create-time work: initial context, ``on_start``, and the model's opening message."""
    changes = _apply_application(instance, initial_context, config, "initial_context")
    _trace(instance, config, "start", state=instance.current_state, fsm_id=instance.fsm_id)
    additions = yield _hook("on_start", instance)
    changes += _apply_application(instance, additions, config, "on_start")
    state = definition.get_state(instance.current_state)
    result: LLMResult = yield CallLLM(
        _request(builder, definition, instance, state, OPENING_MESSAGE, "opening", allow_moves=False)
    )
    reply = result.response.message
    instance.context.conversation.add_assistant_message(reply)
    if state.is_terminal:
        instance.status = "ended"
        _trace(instance, config, "end", state=state.id, reason="initial state is terminal")
    instance.updated_at = now()
    return TurnOutcome(reply=reply, changes=changes)


# --- a turn ----------------------------------------------------------------------------


def run_turn(
    definition: FSMDefinition,
    instance: FSMInstance,
    message: str,
    builder: PromptBuilder,
    config: EngineConfig,
    *,
    message_id: str | None = None,
) -> TurnGenerator:
    """One user message: understand, update, decide, reply. Mutates ``instance`` (a disposable copy)."""
    started = now()
    state_before = instance.current_state
    state = definition.get_state(state_before)
    data = instance.context.data
    calls: list[LLMCallRecord] = []

    changes = _apply_application(instance, (yield _hook("before_llm", instance, message=message)), config, "before_llm")

    result: LLMResult = yield CallLLM(_request(builder, definition, instance, state, message, "turn"))
    calls.append(LLMCallRecord(purpose="turn", attempts=result.attempts))
    response = result.response
    proposal = response.transition.target_state or None

    model_changes = apply_update(
        data,
        response.transition.context_update,
        source="model",
        protected=definition.protected_context_keys or (),
        max_bytes=config.max_context_bytes,
    )
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
    changes += _apply_application(instance, additions, config, "after_context_update")

    verdict, evaluations = decide(definition, state_before, data, proposal)
    if config.strict and verdict.kind == "stay_rejected":
        raise InvalidTransitionError(verdict.reason, explanation=evaluations)

    reply = response.message
    if verdict.moved:
        instance.current_state = verdict.target_state
        _trace(instance, config, "transition", source=state_before, target=verdict.target_state, kind=verdict.kind, reason=verdict.reason)
        additions = yield _hook("on_transition", instance, message=message, previous_state=state_before, verdict=verdict)
        changes += _apply_application(instance, additions, config, "on_transition")
    elif verdict.kind == "stay_rejected":
        _trace(instance, config, "rejection", proposal=proposal, reason=verdict.reason)

    new_state = definition.get_state(instance.current_state)
    if verdict.kind != "proposal_accepted" and verdict.kind != "stay":
        # The model wrote its reply for a state the conversation is not in: ask again for the
        # state actually reached, so the user never reads a reply meant for another state.
        note = _decision_note(verdict, new_state)
        regenerated: LLMResult = yield CallLLM(
            _request(builder, definition, instance, new_state, message, "regenerate", note=note, allow_moves=False)
        )
        calls.append(LLMCallRecord(purpose="regenerate", attempts=regenerated.attempts))
        reply = regenerated.response.message

    if new_state.is_terminal and instance.status == "active":
        instance.status = "ended"
        _trace(instance, config, "end", state=new_state.id)
        additions = yield _hook("on_end", instance, message=message, previous_state=state_before, verdict=verdict)
        changes += _apply_application(instance, additions, config, "on_end")

    conversation = instance.context.conversation
    conversation.add_user_message(message)
    conversation.add_assistant_message(reply)
    _prune_transcript(instance, config)

    instance.turn_count += 1
    record = TurnRecord(
        index=instance.turn_count,
        message_id=message_id,
        user_message=message,
        state_before=state_before,
        state_after=instance.current_state,
        proposal=proposal,
        context_changes=changes,
        evaluations=evaluations,
        verdict=verdict,
        llm_calls=calls,
        reply=reply,
        started_at=started,
        finished_at=now(),
    )
    instance.turns.append(record)
    if len(instance.turns) > config.max_turn_records:
        del instance.turns[: len(instance.turns) - config.max_turn_records]
    if message_id is not None:
        instance.processed_messages[message_id] = reply
        while len(instance.processed_messages) > config.max_processed_message_ids:
            instance.processed_messages.pop(next(iter(instance.processed_messages)))
    instance.updated_at = record.finished_at
    return TurnOutcome(reply=reply, record=record, changes=changes)


__all__ = [
    "CallHook",
    "CallLLM",
    "EngineConfig",
    "LLMResult",
    "TurnOutcome",
    "run_opening",
    "run_turn",
]
