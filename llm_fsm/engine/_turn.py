"""One turn, and the opening of a conversation, as pure generators.

The turn logic is written once, as a generator that *yields* the effects it
needs (an LLM call, a hook call) and receives their results. The runtime's performer (``llm_fsm.runtime``)
performs them for a sync, async or streaming driver; this module never does I/O, never reads
the clock except for timestamps, and works on an instance the driver may
throw away: if anything raises, nothing of the turn is kept, and the user's
message is not left dangling in the history.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from llm_fsm.definition._model import FSMDefinition, State
from llm_fsm.engine._actions import ActionMemo, ActionScope, CallAction
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
    _trace,
)
from llm_fsm.engine._handoff import hand_off_declared
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._languages import conversation_language, follow_language
from llm_fsm.engine._messages import UserMessage
from llm_fsm.engine._moves import _scope, arrive_or_redirect
from llm_fsm.engine._prompts import OPENING_MESSAGE, PromptBuilder
from llm_fsm.engine._provenance import prune, settle_opening
from llm_fsm.engine._records import ContextChange, LLMCallRecord, LLMResult
from llm_fsm.engine._turn_phases import _apply, _ask, _decide, _hand_off_for_actions, _prepare, _understand
from llm_fsm.engine._turn_reply import _end, _record, _reply
from llm_fsm.engine._turn_reply import _prune_transcript as _prune_transcript  # imported from here by ``_operator``
from llm_fsm.engine._turn_reply import _redact as _redact
from llm_fsm.engine._turn_request import _request
from llm_fsm.engine._wording import approved

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
    scope = _scope(config, None, action_memo)
    changes = yield from _open(definition, instance, config, initial_context, scope)
    state = definition.get_state(instance.current_state)
    reply = yield from _greet(definition, instance, builder, state, schema_sent)
    return _opened(definition, instance, config, scope, state, changes, reply)


def _open(
    definition: FSMDefinition, instance: FSMInstance, config: EngineConfig, initial_context: Any, scope: ActionScope
) -> Generator[Effect, Any, list[ContextChange]]:
    """The context the conversation starts with (the caller's, then what ``on_start`` hooks add), then the initial
    state entered: its actions run, and may redirect the conversation before it says a word."""
    changes = _apply_application(definition, instance, initial_context, config, "initial_context")
    _trace(instance, config, "start", state=instance.current_state, fsm_id=instance.fsm_id)
    additions = yield _hook("on_start", instance)
    changes += _apply_application(definition, instance, additions, config, "on_start")
    _, entered = yield from arrive_or_redirect(definition, instance, config, None, OPENING_MESSAGE, scope)
    changes += entered
    return changes


def _greet(
    definition: FSMDefinition, instance: FSMInstance, builder: PromptBuilder, state: State, schema_sent: bool
) -> Generator[Effect, Any, str]:
    """The model's first message, for the state the conversation opened in; it may not move (no user spoke yet)."""
    request = _request(
        builder, definition, instance, state, OPENING_MESSAGE, "opening", allow_moves=False, schema_sent=schema_sent
    )
    result: LLMResult = yield CallLLM(request)
    reply = result.response.message
    wording = approved(definition, state, instance.context.data, conversation_language(definition, instance))
    if wording is not None and wording.text is not None and (wording.mode == "strict" or wording.text not in reply):
        reply = wording.text  # the opening is not rewritten: a guided opening lacking the text says the text
    instance.usage.add(LLMCallRecord.of("opening", result))
    instance.context.conversation.add_assistant_message(reply)
    return reply


def _opened(
    definition: FSMDefinition,
    instance: FSMInstance,
    config: EngineConfig,
    scope: ActionScope,
    state: State,
    changes: list[ContextChange],
    reply: str,
) -> TurnOutcome:
    """Settle the opened conversation: a person takes it when an action or the initial state asks for one, and an
    initial state that is terminal ends it at once."""
    _hand_off_for_actions(instance, config, scope)
    hand_off_declared(definition, instance, config)
    follow_language(definition, instance)
    if state.is_terminal:
        instance.status = "ended"
        _trace(instance, config, "end", state=state.id, reason="initial state is terminal")
    settle_opening(instance)
    prune(instance)
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

    The phases (``_turn_phases``, ``_turn_reply``) run in this order, each yielding its own effects.
    """
    turn = yield from _prepare(definition, instance, message, builder, config, message_id, schema_sent, action_memo)
    result = yield from _ask(turn)
    understood = yield from _understand(turn, result)
    decision = yield from _decide(turn, understood)
    applied = yield from _apply(turn, understood, decision)
    reply = yield from _reply(turn, understood, applied)
    yield from _end(turn, applied)
    return _record(turn, understood, decision, applied, reply)


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
