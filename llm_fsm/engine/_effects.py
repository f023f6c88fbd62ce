"""What the turn asks its driver for, and the limits it runs under: the engine's configuration, the effects
(a model call, a hook, a definition, an action, a retrieval), the outcome of a turn, and the small helpers every part of
the turn shares (trace events, hook effects, the key policy, application writes)."""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from llm_fsm.definition._model import FlowDeclaration, FSMDefinition
from llm_fsm.engine._actions import CallAction
from llm_fsm.engine._context import apply_update
from llm_fsm.engine._data import (
    DEFAULT_MAX_COMPLETED_FLOWS,
    DEFAULT_MAX_CONTEXT_BYTES,
    DEFAULT_MAX_FLOW_DEPTH,
    DEFAULT_MAX_STORED_MESSAGES,
    DEFAULT_MAX_TURN_RECORDS,
)
from llm_fsm.engine._hooks import HookEvent, make_event
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._provenance import Origin, in_turn, note
from llm_fsm.engine._records import (
    ContextChange,
    LLMRequest,
    TurnRecord,
)
from llm_fsm.engine._retrieval import CallRetriever
from llm_fsm.engine._values import Grounding, KeyPolicy

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
    clock: Callable[[], datetime] | None = None
    """The conversation's clock: "now", in the conversation's time zone (an aware datetime; a naive one is read as
    UTC). Relative dates the user says ("next Friday", "tomorrow") ground a date key against its date, or against
    the same instant's date in the key's declared ``timezone``. None: the turn's start time in UTC. The engine
    reads it once per turn that grounds a value, and where a state has timers (``after``: their due times, and
    whether a claimed one is due), and does no I/O itself."""
    record_sensitive_values: bool = True
    """Turn records keep what re-deciding them needs (``TurnRecord.inputs``), sensitive values included, as the hot
    record keeps them (``explain`` and the API never show inputs). False masks them there too: the audit then reports
    a decision that read one as not recomputable."""
    audit_key: bytes | None = field(default=None, repr=False)
    """Key of the turn records' hash chain (HMAC-SHA256; ``llm_fsm.audit``). None: plain SHA-256, which shows an
    edit but not one made together with every later hash; with a key kept apart from the store, it shows both."""


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
    version: str | None = None
    """The version the flow ran on (its frame's ``definition_hash``): a runtime that pins conversations to their
    versions answers that one."""
    exact: bool = False
    """``version`` is required whatever the policy (a conversation started on a named version): the runtime answers
    that version or raises ``DefinitionVersionNotFoundError``."""


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
    """The streamed turn call's message is the reply: the runtime answers with the whole call's ``LLMResult``
    (the message as streamed, the usage and price the end of the stream reported) once it has it."""


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


Effect = CallLLM | CallHook | LoadFlow | LoadDefinition | Decided | AwaitMessage | CallAction | CallRetriever
TurnGenerator = Generator[Effect, Any, TurnOutcome]


# --- shared helpers ---------------------------------------------------------------------


def _trace(instance: FSMInstance, config: EngineConfig, event: str, **data: Any) -> None:
    instance.add_trace(event, data, config.max_trace_events)


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
        note(instance, changes, Origin(by="application", hook=hook, turn=in_turn(instance)))
    return changes


__all__ = [
    "DEFAULT_MAX_PROCESSED_MESSAGE_IDS",
    "DEFAULT_MAX_TRACE_EVENTS",
    "AwaitMessage",
    "CallHook",
    "CallLLM",
    "Decided",
    "Effect",
    "EngineConfig",
    "LoadDefinition",
    "LoadFlow",
    "TurnGenerator",
    "TurnOutcome",
]
