"""Models of a running conversation, and of what one turn decided.

Everything here is plain data: a store can save an ``FSMInstance`` as JSON and
another process can load it and carry on. Nothing here does I/O.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_MAX_HISTORY_SIZE = 5
"""Exchanges (user message + reply) shown to the model in the prompt window."""

DEFAULT_MAX_MESSAGE_LENGTH = 1000
"""Characters of each message shown to the model; longer ones are cut in the prompt."""

DEFAULT_MAX_STORED_MESSAGES = 200
"""Messages kept in the stored transcript before the oldest are archived by the store."""

DEFAULT_MAX_TURN_RECORDS = 50
"""Turn records (explain data) kept per conversation."""

DEFAULT_MAX_CONTEXT_BYTES = 10_000
"""Size cap of the context data, as compact JSON (the Mathia seed's limit)."""

ConversationStatus = Literal["active", "ended", "cancelled"]


def new_conversation_id() -> str:
    """Random, unguessable ids: knowing one conversation id reveals nothing about another."""
    return str(uuid.uuid4())


def now() -> float:
    return time.time()


class _Data(BaseModel):
    model_config = ConfigDict(extra="ignore")


# --- the seed's runtime models ---------------------------------------------------


class Conversation(_Data):
    """The transcript. ``exchanges`` holds one dict per message: ``{"user": text}`` or ``{"assistant": text}``."""

    exchanges: list[dict[str, str]] = Field(default_factory=list)
    max_history_size: int = DEFAULT_MAX_HISTORY_SIZE
    max_message_length: int = DEFAULT_MAX_MESSAGE_LENGTH
    archived_messages: int = Field(
        default=0, description="Messages moved out of `exchanges` into the store's archive."
    )

    def add_user_message(self, text: str) -> None:
        self.exchanges.append({"user": text})

    def add_assistant_message(self, text: str) -> None:
        self.exchanges.append({"assistant": text})

    def window(self) -> list[tuple[str, str]]:
        """The last ``max_history_size`` exchanges as (role, text), each cut to ``max_message_length``."""
        keep = self.max_history_size * 2
        recent = self.exchanges[-keep:] if keep > 0 else []
        out: list[tuple[str, str]] = []
        for entry in recent:
            for role, text in entry.items():
                if len(text) > self.max_message_length:
                    text = text[: self.max_message_length] + "…"
                out.append((role, text))
        return out


class FSMContext(_Data):
    """What the conversation knows: collected data, transcript, and metadata for the application."""

    data: dict[str, Any] = Field(default_factory=dict)
    conversation: Conversation = Field(default_factory=Conversation)
    metadata: dict[str, Any] = Field(default_factory=dict)


class StateTransition(_Data):
    """What the model proposes: where to go, and what it extracted from the message."""

    target_state: str
    context_update: dict[str, Any] = Field(default_factory=dict)


class LLMRequest(_Data):
    """One call to a model."""

    system_prompt: str
    user_message: str
    context: dict[str, Any] | None = None
    response_schema: dict[str, Any] | None = Field(
        default=None, description="JSON Schema the reply must follow (structured output)."
    )
    purpose: Literal["turn", "opening", "regenerate"] = "turn"


class LLMResponse(_Data):
    """The model's answer, parsed."""

    transition: StateTransition
    message: str
    reasoning: str | None = None


# --- explain records -------------------------------------------------------------


class ConditionResult(_Data):
    """How one condition evaluated against the context after the turn's update."""

    description: str
    missing_keys: list[str] = Field(default_factory=list, description="requires_context_keys absent, null or empty.")
    logic_value: Any = None
    logic_missing_vars: list[str] = Field(default_factory=list, description="Variables the rule read that were missing.")
    error: str | None = None
    holds: bool


class TransitionEvaluation(_Data):
    """One declared transition, considered."""

    index: int = Field(default=0, description="Position in the state's `transitions` list.")
    target_state: str
    priority: int
    guarded: bool
    conditions: list[ConditionResult] = Field(default_factory=list)
    eligible: bool


VerdictKind = Literal[
    "proposal_accepted",  # the model's eligible proposal stands
    "guarded_override",  # a guarded transition of strictly higher priority beat the proposal
    "guarded_fallback",  # the proposal was stay or ineligible; an eligible guarded transition fired
    "stay",  # nothing moved
    "stay_rejected",  # the model proposed a move that is not allowed; stayed
]


class Verdict(_Data):
    """What the engine decided, and why, in words a person can read."""

    kind: VerdictKind
    target_state: str
    reason: str
    transition_index: int | None = Field(
        default=None, description="Index, in the state's `transitions`, of the transition taken (None when staying)."
    )

    @property
    def moved(self) -> bool:
        return self.kind in ("proposal_accepted", "guarded_override", "guarded_fallback")


class ContextChange(_Data):
    """One key of a context update and what happened to it."""

    key: str
    value: Any = None
    previous: Any = None
    applied: bool
    reason: str = Field(description="'set', 'corrected', 'removed', or why it was dropped.")


class LLMCallRecord(_Data):
    purpose: str
    attempts: int = 1
    error: str | None = None


class TurnRecord(_Data):
    """Everything one turn did, so any decision can be explained afterwards."""

    index: int
    message_id: str | None = None
    user_message: str
    state_before: str
    state_after: str
    proposal: str | None = Field(default=None, description="Target state the model proposed.")
    context_changes: list[ContextChange] = Field(default_factory=list)
    evaluations: list[TransitionEvaluation] = Field(default_factory=list)
    verdict: Verdict
    llm_calls: list[LLMCallRecord] = Field(default_factory=list)
    reply: str
    started_at: float
    finished_at: float


class TraceEvent(_Data):
    """One entry of the audit trail."""

    event: str
    timestamp: float = Field(default_factory=now)
    data: dict[str, Any] = Field(default_factory=dict)


# --- the instance -----------------------------------------------------------------


class FSMInstance(_Data):
    """One running conversation of a definition: everything a store saves."""

    fsm_id: str
    current_state: str
    context: FSMContext = Field(default_factory=FSMContext)
    persona: str | None = None

    conversation_id: str = Field(default_factory=new_conversation_id)
    user_id: str | None = None
    room_id: str | None = None
    definition_hash: str | None = Field(default=None, description="Hash of the definition the conversation started on.")
    status: ConversationStatus = "active"
    version: int = Field(default=0, description="Bumped on every save; stores compare-and-set on it.")
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)
    turn_count: int = 0
    turns: list[TurnRecord] = Field(default_factory=list)
    processed_messages: dict[str, str] = Field(
        default_factory=dict, description="message_id → reply, so a retried message is answered once."
    )
    trace: list[TraceEvent] = Field(default_factory=list)
    archive_outbox: list[dict[str, str]] = Field(
        default_factory=list,
        description=(
            "Messages pruned from the live transcript this turn. The store appends them to the "
            "conversation's archive on save and empties this list, so no message is silently dropped."
        ),
    )

    @property
    def ended(self) -> bool:
        return self.status != "active"

    def copy_for_turn(self) -> "FSMInstance":
        """A deep copy the turn can change freely; the original stays intact if the turn fails."""
        return self.model_copy(deep=True)


__all__ = [
    "ConditionResult",
    "ContextChange",
    "Conversation",
    "ConversationStatus",
    "DEFAULT_MAX_CONTEXT_BYTES",
    "DEFAULT_MAX_HISTORY_SIZE",
    "DEFAULT_MAX_MESSAGE_LENGTH",
    "DEFAULT_MAX_STORED_MESSAGES",
    "DEFAULT_MAX_TURN_RECORDS",
    "FSMContext",
    "FSMInstance",
    "LLMCallRecord",
    "LLMRequest",
    "LLMResponse",
    "StateTransition",
    "TraceEvent",
    "TransitionEvaluation",
    "TurnRecord",
    "Verdict",
    "new_conversation_id",
]
